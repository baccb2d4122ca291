// POST /v1/files on the real stack: names, sizes, sniffed types, hashes, the 10 MB limit enforced
// while streaming, organization privacy (getFile) and retention (purgeExpiredFiles).
import { createHash } from 'node:crypto';
import { gzipSync } from 'node:zlib';
import http from 'node:http';
import net from 'node:net';
import { afterAll, describe, expect, it } from 'vitest';
import { closeDb, db, newOrg, sleep, stack } from './helpers/stack.ts';
import { createFile, getFile, purgeExpiredFiles } from '../shared/db/files.ts';
import { parseFileName, sniffContentType } from '../apps/api/routes/files.ts';

afterAll(closeDb);

const MB10 = 10 * 1024 * 1024;
const DAY = 24 * 3_600_000;
// A complete 1x1 PNG.
const PNG = Buffer.from(
  'iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNk+M9QDwADhgGAWjR9awAAAABJRU5ErkJggg==',
  'base64',
);
const sha = (b: Buffer) => createHash('sha256').update(b).digest('hex');

async function upload(key: string | undefined, body: Buffer | string | undefined, opts: { name?: string | null; type?: string | null } = {}) {
  const headers: Record<string, string> = {};
  if (key) headers.authorization = `Bearer ${key}`;
  if (opts.name !== null) headers['x-file-name'] = opts.name ?? 'file.bin';
  if (opts.type !== null) headers['content-type'] = opts.type ?? 'application/octet-stream';
  const res = await fetch(`${stack().baseUrl}/v1/files`, { method: 'POST', headers, body: typeof body === 'string' || body === undefined ? body : new Uint8Array(body) });
  const text = await res.text();
  return { status: res.status, headers: res.headers, body: JSON.parse(text), text };
}

/** A chunked upload of up to `total` bytes (no Content-Length), writing until the server answers or closes. */
function chunkedUpload(key: string, total: number): Promise<{ status: number | null; body: any; written: number }> {
  return new Promise((resolve) => {
    const url = new URL(`${stack().baseUrl}/v1/files`);
    const req = http.request({
      host: url.hostname,
      port: url.port,
      path: url.pathname,
      method: 'POST',
      headers: { authorization: `Bearer ${key}`, 'content-type': 'application/octet-stream', 'x-file-name': 'big.bin', 'transfer-encoding': 'chunked' },
    });
    const chunk = Buffer.alloc(64 * 1024, 0x61);
    let written = 0;
    let done = false;
    let status: number | null = null;
    let text = '';
    const finish = () => {
      if (done) return;
      done = true;
      let body: unknown = null;
      try {
        body = JSON.parse(text);
      } catch {
        /* no body */
      }
      resolve({ status, body, written });
    };
    req.on('response', (res) => {
      status = res.statusCode ?? null;
      res.setEncoding('utf8');
      res.on('data', (d: string) => (text += d));
      res.on('end', finish);
      res.on('error', finish);
    });
    req.on('error', () => setTimeout(finish, 200));
    const pump = () => {
      while (!done && status === null && written < total) {
        written += chunk.length;
        if (!req.write(chunk)) return void req.once('drain', pump);
      }
      if (written >= total && !done) req.end();
    };
    pump();
  });
}

/**
 * A client that is slow to read: a chunked upload of `total` bytes on a raw socket that reads
 * nothing until it has sent all it could (until the server stops taking bytes for `stallMs`),
 * then reads what the server answered. Resolves with the bytes read and the error, if any.
 */
function slowReaderUpload(key: string, total: number, stallMs: number): Promise<{ text: string; error: string | null; written: number }> {
  return new Promise((resolve) => {
    const url = new URL(stack().baseUrl);
    const socket = net.connect({ host: url.hostname, port: Number(url.port) });
    socket.pause();
    const chunk = Buffer.alloc(64 * 1024, 0x61);
    const frame = Buffer.concat([Buffer.from(`${chunk.length.toString(16)}\r\n`), chunk, Buffer.from('\r\n')]);
    let written = 0;
    let text = '';
    let error: string | null = null;
    let stall: NodeJS.Timeout | undefined;
    const read = () => {
      clearTimeout(stall);
      socket.setEncoding('latin1');
      socket.on('data', (d: string) => {
        text += d;
        // The whole answer is in: done (the server would close the connection after its linger).
        const head = text.indexOf('\r\n\r\n');
        const length = /\r\ncontent-length: *(\d+)/i.exec(text.slice(0, head));
        if (head >= 0 && length && text.length - head - 4 >= Number(length[1])) socket.destroy();
      });
      socket.resume();
    };
    socket.on('error', (err: NodeJS.ErrnoException) => (error ??= err.code ?? err.message));
    socket.on('close', () => resolve({ text, error, written }));
    socket.setTimeout(20_000, () => socket.destroy());
    const pump = () => {
      clearTimeout(stall);
      while (written < total) {
        written += chunk.length;
        if (!socket.write(frame)) {
          stall = setTimeout(read, stallMs);
          return void socket.once('drain', pump);
        }
      }
      socket.write('0\r\n\r\n');
      read();
    };
    socket.on('connect', () => {
      socket.write(
        `POST /v1/files HTTP/1.1\r\nHost: ${url.host}\r\nAuthorization: Bearer ${key}\r\nContent-Type: application/octet-stream\r\nX-File-Name: big.bin\r\nTransfer-Encoding: chunked\r\n\r\n`,
      );
      pump();
    });
  });
}

/** One upload over node:http with exactly the headers given (fetch adds or refuses some). */
function rawUpload(headers: Record<string, string>, body: Buffer): Promise<{ status: number; headers: http.IncomingHttpHeaders; body: any }> {
  return new Promise((resolve, reject) => {
    const url = new URL(`${stack().baseUrl}/v1/files`);
    const req = http.request({ host: url.hostname, port: url.port, path: url.pathname, method: 'POST', headers }, (res) => {
      let text = '';
      res.setEncoding('utf8');
      res.on('data', (d: string) => (text += d));
      res.on('end', () => resolve({ status: res.statusCode ?? 0, headers: res.headers, body: JSON.parse(text) }));
    });
    req.on('error', reject);
    req.end(body);
  });
}

function expectInvalid(res: { status: number; body: any }, param: string) {
  expect(res.status).toBe(400);
  expect(res.body.success).toBe(false);
  expect(res.body.error).toMatchObject({ code: 'invalid_input', type: 'validation_error', status: 400, param });
  expect(res.body.error.details.issues[0].path).toBe(param);
}

describe('POST /v1/files', () => {
  it('stores a PNG: decoded name, size, sniffed type, sha256, 30-day expiry', async () => {
    const org = await newOrg(5);
    const before = Date.now();
    const res = await upload(org.api_key, PNG, { name: encodeURIComponent('Käse & Brot (1).png') });
    expect(res.status).toBe(201);
    expect(res.headers.get('content-type')).toMatch(/^application\/json/);
    const f = res.body.data;
    expect(res.body.success).toBe(true);
    expect(Object.keys(f).sort()).toEqual(['content_type', 'created_at', 'expires_at', 'id', 'name', 'sha256', 'size_bytes']);
    expect(f.id).toMatch(/^file_[0-9a-f]{32}$/);
    expect(f).toMatchObject({ name: 'Käse & Brot (1).png', size_bytes: PNG.length, content_type: 'image/png', sha256: sha(PNG) });
    const created = Date.parse(f.created_at);
    expect(created).toBeGreaterThanOrEqual(before - 5_000);
    expect(Date.parse(f.expires_at) - created).toBe(30 * DAY);
    // Stored as sent, for this organization; nothing billed.
    const stored = await getFile(db(), org.org_id, f.id);
    expect(stored?.bytes.equals(PNG)).toBe(true);
    expect(stored?.name).toBe('Käse & Brot (1).png');
    const ledger = await db().query(`SELECT count(*)::int AS n FROM credit_ledger WHERE org_id = $1 AND kind <> 'grant'`, [org.org_id]);
    expect(ledger.rows[0].n).toBe(0);
    // Random ids: two uploads of the same bytes are two files.
    const again = await upload(org.api_key, PNG, { name: 'a.png' });
    expect(again.body.data.id).not.toBe(f.id);
    expect(again.body.data.sha256).toBe(f.sha256);
  });

  it('text is text/plain; other bytes are application/octet-stream', async () => {
    const org = await newOrg(5);
    const text = Buffer.from('Grüße aus Köln\nline two\ttabbed\n', 'utf8');
    const t = await upload(org.api_key, text, { name: 'notes.txt' });
    expect(t.status).toBe(201);
    expect(t.body.data).toMatchObject({ content_type: 'text/plain', size_bytes: text.length, sha256: sha(text) });
    const bin = Buffer.from([0x00, 0x01, 0xff, 0xfe, 0x10, 0x80, 0x00, 0x7f]);
    const b = await upload(org.api_key, bin, { name: 'blob' });
    expect(b.status).toBe(201);
    expect(b.body.data.content_type).toBe('application/octet-stream');
    // The name says nothing about the type: a .png full of text is text.
    const fake = await upload(org.api_key, 'just words', { name: 'photo.png' });
    expect(fake.body.data.content_type).toBe('text/plain');
  });

  it('accepts exactly 10 MB', async () => {
    const org = await newOrg(5);
    const body = Buffer.alloc(MB10, 0x62);
    const res = await upload(org.api_key, body, { name: 'ten.bin' });
    expect(res.status).toBe(201);
    expect(res.body.data).toMatchObject({ size_bytes: MB10, sha256: sha(body), content_type: 'text/plain' });
  });

  it('refuses 10 MB + 1 byte with 413 payload_too_large, declared or streamed', async () => {
    const org = await newOrg(5);
    const declared = await upload(org.api_key, Buffer.alloc(MB10 + 1, 0x62), { name: 'big.bin' });
    expect(declared.status).toBe(413);
    expect(declared.body.error).toMatchObject({ code: 'payload_too_large', status: 413, type: 'validation_error', retryable: false, details: { limit_bytes: MB10 } });
    expect(declared.body.error).not.toHaveProperty('param');
    const streamed = await chunkedUpload(org.api_key, MB10 + 1);
    expect(streamed.status).toBe(413);
    expect(streamed.body.error.code).toBe('payload_too_large');
    const n = await db().query('SELECT count(*)::int AS n FROM files WHERE org_id = $1', [org.org_id]);
    expect(n.rows[0].n).toBe(0);
  });

  it('cuts a 50 MB chunked upload off soon after the limit instead of reading it all', async () => {
    const org = await newOrg(5);
    const res = await chunkedUpload(org.api_key, 50 * 1024 * 1024);
    expect(res.status).toBe(413);
    expect(res.body.error.code).toBe('payload_too_large');
    // The server stopped taking bytes: the client could not send all 50 MB (socket buffers and
    // the bounded linger let some MB more through, up to ~28 MB past the limit when the whole
    // suite loads the machine).
    expect(res.written).toBeLessThan(MB10 + 32 * 1024 * 1024);
  });

  it('a client that reads nothing until it has sent all it can still gets the 413, not a reset', async () => {
    const org = await newOrg(5);
    // The server stops taking bytes a little past the limit; the client notices its writes stall
    // and only then reads. A server that closed the socket with the client's bytes unread would
    // have reset the connection, and the reset would take the unread 413 with it.
    const res = await slowReaderUpload(org.api_key, 50 * 1024 * 1024, 1_000);
    expect(res.text).toMatch(/^HTTP\/1\.1 413 /);
    expect(JSON.parse(res.text.slice(res.text.indexOf('\r\n\r\n') + 4)).error.code).toBe('payload_too_large');
    expect(res.written).toBeLessThan(MB10 + 24 * 1024 * 1024);
  });

  it('refuses bad file names with invalid_input on X-File-Name', async () => {
    const org = await newOrg(5);
    const bad = ['', '%20%20', '%E0%A4%A', 'a%2Fb.txt', '..%2Fetc%2Fpasswd', 'a%5Cb.txt', '..', '.', 'a%00b', 'line%0Abreak', 'x%7Fy', '%C2%85', 'evil%E2%80%AEtxt.exe', 'invoice%E2%80%8B.pdf', '%EF%BB%BFreport.pdf', 'a%E2%80%8Fb.txt', 'x'.repeat(161), encodeURIComponent('é'.repeat(161))];
    for (const name of bad) expectInvalid(await upload(org.api_key, 'data', { name }), 'X-File-Name');
    // 160 decoded characters is fine even when the encoded header is longer.
    const ok = await upload(org.api_key, 'data', { name: encodeURIComponent('é'.repeat(160)) });
    expect(ok.status).toBe(201);
    expect(ok.body.data.name).toBe('é'.repeat(160));
    const n = await db().query('SELECT count(*)::int AS n FROM files WHERE org_id = $1', [org.org_id]);
    expect(n.rows[0].n).toBe(1);
    // The name is checked before the body is read: an oversized body with a bad name is a 400.
    expectInvalid(await upload(org.api_key, Buffer.alloc(MB10 + 1), { name: 'a%2Fb' }), 'X-File-Name');
  });

  it('requires X-File-Name, a non-empty body and application/octet-stream', async () => {
    const org = await newOrg(5);
    expectInvalid(await upload(org.api_key, 'data', { name: null }), 'X-File-Name');
    // The body as a whole (the file): no param, its issue at path '' (as every whole-body refusal).
    const empty = await upload(org.api_key, Buffer.alloc(0), { name: 'empty.txt' });
    expect(empty.status).toBe(400);
    expect(empty.body.error).toMatchObject({ code: 'invalid_input', type: 'validation_error', status: 400 });
    expect(empty.body.error).not.toHaveProperty('param');
    expect(empty.body.error.details.issues).toEqual([{ path: '', message: 'must not be empty' }]);
    for (const type of ['application/json', 'text/plain', 'multipart/form-data; boundary=x']) {
      const res = await upload(org.api_key, type === 'application/json' ? '{"a":1}' : 'data', { type });
      expect(res.status).toBe(415);
      expect(res.body.error).toMatchObject({ code: 'unsupported_media_type', param: 'Content-Type' });
      expect(res.body.error.details.issues).toEqual([{ path: 'Content-Type', message: 'must be application/octet-stream' }]);
    }
    const none = await upload(org.api_key, 'data', { type: null });
    expect(none.status).toBe(415);
    expect(none.body.error).toMatchObject({ code: 'unsupported_media_type', param: 'Content-Type' });
    // No Content-Type at all (fetch would add text/plain to a string body).
    const bare = await new Promise<{ status?: number; body: string }>((resolve, reject) => {
      const url = new URL(`${stack().baseUrl}/v1/files`);
      const req = http.request({ host: url.hostname, port: url.port, path: url.pathname, method: 'POST', headers: { authorization: `Bearer ${org.api_key}`, 'x-file-name': 'a.txt', 'content-length': '4' } }, (res) => {
        let body = '';
        res.setEncoding('utf8');
        res.on('data', (d: string) => (body += d));
        res.on('end', () => resolve({ status: res.statusCode, body }));
      });
      req.on('error', reject);
      req.end('data');
    });
    expect(bare.status).toBe(415);
    expect(JSON.parse(bare.body).error.code).toBe('unsupported_media_type');
  });

  it('an empty body without Content-Type is 415 on Content-Type, as a missing type is with any body', async () => {
    const org = await newOrg(5);
    const headers = { authorization: `Bearer ${org.api_key}`, 'x-file-name': 'empty.txt' };
    const res = await rawUpload({ ...headers, 'content-length': '0' }, Buffer.alloc(0));
    expect(res.status).toBe(415);
    expect(res.body).toEqual({
      success: false,
      error: expect.objectContaining({ code: 'unsupported_media_type', type: 'validation_error', status: 415, param: 'Content-Type' }),
    });
    expect(res.body.error.details.issues).toEqual([{ path: 'Content-Type', message: 'must be application/octet-stream' }]);
    // With the type, an empty body is the body's fault: 400 (the test above).
    const typed = await rawUpload({ ...headers, 'content-type': 'application/octet-stream', 'content-length': '0' }, Buffer.alloc(0));
    expect(typed.status).toBe(400);
    expect(typed.body.error.details.issues).toEqual([{ path: '', message: 'must not be empty' }]);
    const n = await db().query('SELECT count(*)::int AS n FROM files WHERE org_id = $1', [org.org_id]);
    expect(n.rows[0].n).toBe(0);
  });

  it('refuses a compressed body (Content-Encoding other than identity) with 415 on Content-Encoding, storing nothing', async () => {
    const org = await newOrg(5);
    const text = Buffer.from('plain words, compressed on the way\n'.repeat(50));
    const gz = gzipSync(text);
    const headers = (encoding: string) => ({
      authorization: `Bearer ${org.api_key}`,
      'content-type': 'application/octet-stream',
      'x-file-name': 'notes.txt',
      'content-encoding': encoding,
    });
    for (const encoding of ['gzip', 'GZIP', 'br', 'deflate', 'gzip, identity', 'x-custom']) {
      const res = await rawUpload(headers(encoding), gz);
      expect(res.status, encoding).toBe(415);
      expect(res.body).toEqual({
        success: false,
        error: expect.objectContaining({ code: 'unsupported_media_type', type: 'validation_error', status: 415, retryable: false, param: 'Content-Encoding' }),
      });
      expect(res.body.error.details.issues).toEqual([{ path: 'Content-Encoding', message: "must be identity or absent: send the file's bytes as they are, not compressed" }]);
    }
    // Refused before the body is read: a compressed body past the limit is 415, not 413.
    const big = await rawUpload(headers('gzip'), Buffer.alloc(MB10 + 1, 0x61));
    expect(big.status).toBe(415);
    const n = await db().query('SELECT count(*)::int AS n FROM files WHERE org_id = $1', [org.org_id]);
    expect(n.rows[0].n).toBe(0);
    // identity is the bytes as they are: stored, hashed and typed as sent.
    const plain = await rawUpload(headers('identity'), text);
    expect(plain.status).toBe(201);
    expect(plain.body.data).toMatchObject({ size_bytes: text.length, sha256: sha(text), content_type: 'text/plain' });
  });

  it('refuses X-File-Name sent twice instead of storing the joined copies as one name', async () => {
    const org = await newOrg(5);
    // fetch's Headers would join the copies itself: two header lines need a raw request.
    const url = new URL(stack().baseUrl);
    const text = await new Promise<string>((resolve, reject) => {
      const socket = net.connect({ host: url.hostname, port: Number(url.port) });
      let answer = '';
      socket.setEncoding('utf8');
      socket.on('data', (d: string) => (answer += d));
      socket.on('end', () => resolve(answer));
      socket.on('error', reject);
      // write, not end: Node's server drops a request whose client half-closes before it is answered.
      socket.write(
        [
          'POST /v1/files HTTP/1.1',
          `Host: ${url.host}`,
          `Authorization: Bearer ${org.api_key}`,
          'Content-Type: application/octet-stream',
          'X-File-Name: a.txt',
          'X-File-Name: b.txt',
          'Content-Length: 4',
          'Connection: close',
          '',
          'data',
        ].join('\r\n'),
      );
    });
    const status = Number(/^HTTP\/1\.1 (\d{3})/.exec(text)?.[1]);
    const body = JSON.parse(text.slice(text.indexOf('\r\n\r\n') + 4));
    expectInvalid({ status, body }, 'X-File-Name');
    expect(body.error.details.issues).toEqual([{ path: 'X-File-Name', message: 'must be sent once' }]);
    const n = await db().query('SELECT count(*)::int AS n FROM files WHERE org_id = $1', [org.org_id]);
    expect(n.rows[0].n).toBe(0);
  });

  it('requires a key, before reading the body', async () => {
    const res = await upload(undefined, 'data');
    expect(res.status).toBe(401);
    expect(res.body.error.code).toBe('api_key_required');
    const bad = await upload(`svc_sk_${'A'.repeat(40)}`, Buffer.alloc(MB10 + 1));
    expect(bad.status).toBe(401);
    expect(bad.body.error.code).toBe('invalid_api_key');
  });
});

describe('files in the database', () => {
  it('getFile never returns another organization\'s file or an expired one', async () => {
    const a = await newOrg(1);
    const b = await newOrg(1);
    const res = await upload(a.api_key, 'secret notes', { name: 'a.txt' });
    const id = res.body.data.id as string;
    expect((await getFile(db(), a.org_id, id))?.bytes.toString()).toBe('secret notes');
    expect(await getFile(db(), b.org_id, id)).toBeNull();
    expect(await getFile(db(), a.org_id, 'file_' + '0'.repeat(32))).toBeNull();
    expect(await getFile(db(), a.org_id, "file_' OR 1=1 --")).toBeNull();
    // At and after its expiry the file is gone for its own organization too.
    expect(await getFile(db(), a.org_id, id, new Date(Date.now() + 30 * DAY + 60_000))).toBeNull();
  });

  it('purgeExpiredFiles deletes the expired files only', async () => {
    const org = await newOrg(1);
    const old = await createFile(db(), { orgId: org.org_id, name: 'old.txt', contentType: 'text/plain', bytes: Buffer.from('old'), now: new Date(Date.now() - 31 * DAY) });
    const edge = await createFile(db(), { orgId: org.org_id, name: 'edge.txt', contentType: 'text/plain', bytes: Buffer.from('edge'), now: new Date(Date.now() - 29 * DAY) });
    const fresh = await createFile(db(), { orgId: org.org_id, name: 'new.txt', contentType: 'text/plain', bytes: Buffer.from('new') });
    expect(await getFile(db(), org.org_id, old.id)).toBeNull();
    const purged = await purgeExpiredFiles(db());
    expect(purged).toBeGreaterThanOrEqual(1);
    const left = await db().query('SELECT id FROM files WHERE org_id = $1 ORDER BY name', [org.org_id]);
    expect(left.rows.map((r) => r.id).sort()).toEqual([edge.id, fresh.id].sort());
    // Later, the one that was 29 days old expires too.
    await purgeExpiredFiles(db(), new Date(Date.now() + 2 * DAY));
    const after = await db().query('SELECT id FROM files WHERE org_id = $1', [org.org_id]);
    expect(after.rows.map((r) => r.id)).toEqual([fresh.id]);
  });
});

describe('purging expired files in batches', () => {
  /** The stack's database, recording how many rows each statement deleted. */
  function recording() {
    const deleted: number[] = [];
    const spy = {
      query: async (text: string, values?: unknown[]) => {
        const r = await db().query(text, values);
        if (/^\s*DELETE/i.test(text)) deleted.push(r.rowCount ?? 0);
        return r;
      },
    } as unknown as ReturnType<typeof db>;
    return { spy, deleted };
  }
  const expired = async (orgId: string, n: number) => {
    const ids: string[] = [];
    for (let i = 0; i < n; i++) {
      const f = await createFile(db(), { orgId, name: `old-${i}.txt`, contentType: 'text/plain', bytes: Buffer.from(`old ${i}`), now: new Date(Date.now() - 31 * DAY - i * 1000) });
      ids.push(f.id);
    }
    return ids;
  };
  const left = async (orgId: string) => (await db().query('SELECT count(*)::int AS n FROM files WHERE org_id = $1', [orgId])).rows[0].n as number;

  it('deletes a backlog in statements of at most batchSize rows and batchBytes bytes, each committed on its own, until none is left', async () => {
    const org = await newOrg(1);
    await expired(org.org_id, 5);
    const fresh = await createFile(db(), { orgId: org.org_id, name: 'new.txt', contentType: 'text/plain', bytes: Buffer.from('new') });
    const rows = recording();
    expect(await purgeExpiredFiles(rows.spy, new Date(), { batchSize: 2 })).toBeGreaterThanOrEqual(5);
    expect(rows.deleted.length).toBeGreaterThanOrEqual(4); // 2 + 2 + 1, then one that finds none
    expect(Math.max(...rows.deleted)).toBeLessThanOrEqual(2);
    expect(rows.deleted.at(-1)).toBe(0);
    expect((await db().query('SELECT id FROM files WHERE org_id = $1', [org.org_id])).rows.map((r) => r.id)).toEqual([fresh.id]);
    // The bytes bound: each of these files is 5 bytes, so a 5-byte bound takes one at a time (a
    // row goes when the bytes before it are under the bound: the first always does).
    await expired(org.org_id, 3);
    const bytes = recording();
    await purgeExpiredFiles(bytes.spy, new Date(), { batchSize: 100, batchBytes: 5 });
    expect(Math.max(...bytes.deleted)).toBe(1);
    expect(await left(org.org_id)).toBe(1);
  });

  it('stops beginning statements after maxMs, leaving the rest for the next run', async () => {
    const org = await newOrg(1);
    await expired(org.org_id, 4);
    const rows = recording();
    expect(await purgeExpiredFiles(rows.spy, new Date(), { batchSize: 1, maxMs: 0 })).toBe(1);
    expect(rows.deleted).toEqual([1]);
    expect(await left(org.org_id)).toBe(3);
    await purgeExpiredFiles(db());
    expect(await left(org.org_id)).toBe(0);
  });

  it('skips an expired file another transaction holds instead of waiting for it', async () => {
    const org = await newOrg(1);
    const [held, ...others] = await expired(org.org_id, 3);
    const holder = await db().connect();
    try {
      await holder.query('BEGIN');
      await holder.query('SELECT id FROM files WHERE id = $1 FOR UPDATE', [held]);
      const purged = await Promise.race([purgeExpiredFiles(db()), sleep(5_000).then(() => 'waited' as const)]);
      expect(purged).not.toBe('waited');
      const rest = await db().query('SELECT id FROM files WHERE org_id = $1', [org.org_id]);
      expect(rest.rows.map((r) => r.id)).toEqual([held]);
      expect(others).toHaveLength(2);
    } finally {
      await holder.query('ROLLBACK');
      holder.release();
    }
    await purgeExpiredFiles(db());
    expect(await left(org.org_id)).toBe(0);
  });
});

describe('file name and type rules (pure)', () => {
  it('parseFileName', () => {
    expect(parseFileName('report%202025.pdf')).toEqual({ ok: true, name: 'report 2025.pdf' });
    expect(parseFileName('a..b.txt')).toEqual({ ok: true, name: 'a..b.txt' });
    expect(parseFileName(undefined).ok).toBe(false);
    expect(parseFileName('%zz').ok).toBe(false);
    expect(parseFileName('%E2%80%A8').ok).toBe(false);
    // Invisible characters are refused; the joiners that emoji and Persian words need are not.
    for (const c of ['\u200B', '\u200E', '\u200F', '\u061C', '\u2060', '\uFEFF', '\u3164', '\u115F']) {
      expect(parseFileName(encodeURIComponent(`invoice${c}.pdf`))).toEqual({ ok: false, message: 'must not contain invisible characters (zero-width spaces, direction marks, fillers)' });
    }
    expect(parseFileName(encodeURIComponent('👨\u200D👩\u200D👧.png'))).toEqual({ ok: true, name: '👨\u200D👩\u200D👧.png' });
    expect(parseFileName(encodeURIComponent('می\u200Cخواهم.txt'))).toEqual({ ok: true, name: 'می\u200Cخواهم.txt' });
    // Next to ASCII a joiner only makes a lookalike, as does a soft hyphen.
    expect(parseFileName(encodeURIComponent('invoice\u200D.pdf')).ok).toBe(false);
    expect(parseFileName(encodeURIComponent('in\u00ADvoice.pdf')).ok).toBe(false);
  });

  it('sniffContentType', async () => {
    expect(await sniffContentType(PNG)).toBe('image/png');
    expect(await sniffContentType(Buffer.from('%PDF-1.7\n'))).toBe('application/pdf');
    expect(await sniffContentType(Buffer.from('plain'))).toBe('text/plain');
    expect(await sniffContentType(Buffer.from([0xc3, 0x28]))).toBe('application/octet-stream');
  });
});
