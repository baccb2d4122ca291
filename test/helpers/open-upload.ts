// An upload (POST /v1/files) begun and left hanging, for tests of what uploads in progress hold of
// an API process: its answer can be watched while its body is still unfinished.
import http from 'node:http';

export interface UploadAnswer {
  status: number;
  headers: http.IncomingHttpHeaders;
  /** The answer's JSON body (undefined if it was not JSON). */
  body: any;
  text: string;
  /** When the answer was complete, ms after the upload began. */
  ms: number;
}

export interface OpenUpload {
  /** The whole answer, once read; undefined if the connection failed before one came. */
  answered: Promise<UploadAnswer | undefined>;
  /** The answer's status as soon as its head arrived (its body may still be coming), else undefined. */
  status(): number | undefined;
  /** The whole answer if it has come already, else undefined. */
  early(): UploadAnswer | undefined;
  /** When the connection closed, ms after the upload began (undefined while open). */
  closedAt(): number | undefined;
  /** Sends the rest of the body (what `declared` still lacks, or 10 more bytes of a chunked one) and waits for the answer. */
  finish(): Promise<UploadAnswer | undefined>;
  /** Drops the connection mid-body. */
  abort(): void;
}

/**
 * An upload to `baseUrl` with `key`, begun and left open: chunked, or with Content-Length
 * `declared`. `first` bytes (1 KiB by default) are sent at once; with `trickle`, one byte more every
 * 200 ms (a slow sender, never idle) until it is answered, finished or aborted.
 */
export function openUpload(baseUrl: string, key: string, o: { declared?: number; first?: number; trickle?: boolean } = {}): OpenUpload {
  const u = new URL('/v1/files', baseUrl);
  const length: Record<string, string> = o.declared === undefined ? { 'transfer-encoding': 'chunked' } : { 'content-length': String(o.declared) };
  const began = Date.now();
  const req = http.request({
    host: u.hostname,
    port: u.port,
    path: u.pathname,
    method: 'POST',
    headers: { authorization: `Bearer ${key}`, 'content-type': 'application/octet-stream', 'x-file-name': 'slow.bin', ...length },
  });
  let sent = 0;
  let status: number | undefined;
  let answer: UploadAnswer | undefined;
  let closedAt: number | undefined;
  const answered = new Promise<UploadAnswer | undefined>((resolve) => {
    req.on('response', (res) => {
      status = res.statusCode ?? 0;
      let text = '';
      res.setEncoding('utf8');
      res.on('data', (d: string) => (text += d));
      res.on('end', () => {
        let body: unknown;
        try {
          body = JSON.parse(text);
        } catch {
          /* not JSON: the test sees `text` */
        }
        answer = { status: status!, headers: res.headers, body, text, ms: Date.now() - began };
        resolve(answer);
      });
    });
    req.on('error', () => resolve(answer));
    req.on('close', () => (closedAt ??= Date.now() - began));
  });
  const write = (n: number) => {
    if (n <= 0 || req.destroyed) return;
    sent += n;
    req.write(Buffer.alloc(n, 0x61));
  };
  req.flushHeaders();
  write(o.first ?? 1024);
  const timer = o.trickle ? setInterval(() => answer === undefined && write(1), 200) : undefined;
  return {
    answered,
    status: () => status,
    early: () => answer,
    closedAt: () => closedAt,
    finish: () => {
      clearInterval(timer);
      req.end(o.declared === undefined ? Buffer.alloc(10, 0x62) : Buffer.alloc(o.declared - sent, 0x62));
      return answered;
    },
    abort: () => {
      clearInterval(timer);
      req.destroy();
    },
  };
}
