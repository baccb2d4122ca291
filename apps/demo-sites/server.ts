// One HTTP server for all demo sites. Dispatches on the Host header, and also
// accepts absolute-form targets (GET http://host/path) so it can act as a
// plain-HTTP forward proxy (undici ProxyAgent with proxyTunnel:false,
// Chromium --proxy-server). CONNECT is refused with 405.
import http from 'node:http';
import type { AddressInfo, Socket } from 'node:net';
import { esc, json, parseCookies, text, type DemoRequest, type Reply, type Site } from './lib/http.ts';
import { FaultStore } from './lib/faults.ts';
import { HoldStore } from './lib/holds.ts';
import { probeReply } from './lib/probe.ts';
import { demoSiteIcons } from './icons.ts';
import { createSites } from './sites/index.ts';

export { demoSiteIcons };

export interface DemoSites {
  origin: string; // http://127.0.0.1:PORT
  port: number;
  hostMap: Record<string, string>; // every demo host -> '127.0.0.1:PORT'
  hosts: string[];
  close(): Promise<void>;
}

const MAX_BODY = 1024 * 1024;

/** Mutable state of one server instance: the sites, request counts and faults. */
class Instance {
  readonly sites: Site[] = createSites();
  readonly siteByHost = new Map<string, Site>(this.sites.map((s) => [s.host, s]));
  readonly faults = new FaultStore();
  /** Held pages (lib/holds.ts): by key, never reset. */
  readonly holds = new HoldStore();
  requestCounts: Record<string, number> = {};

  reset(): void {
    for (const s of this.sites) s.reset?.();
    this.faults.clear();
    this.requestCounts = {};
  }

  state(): Record<string, unknown> {
    const out: Record<string, unknown> = { orders: 0, bookings: 0 };
    for (const s of this.sites) Object.assign(out, s.stats?.() ?? {});
    out.requests = { ...this.requestCounts };
    out.faults = this.faults.list();
    return out;
  }

  control(method: string, path: string, query: URLSearchParams, body: Buffer): Reply {
    let parsed: unknown = undefined;
    if (body.length) {
      try {
        parsed = JSON.parse(body.toString('utf8'));
      } catch {
        return json(400, { error: 'invalid_json' });
      }
    }
    const allow = (m: string) => json(405, { error: 'method_not_allowed' }, { allow: m });
    const isGet = method === 'GET' || method === 'HEAD';
    switch (path) {
      case '/__demo/state':
        return isGet ? json(200, this.state()) : allow('GET');
      case '/__demo/reset':
        if (method !== 'POST') return allow('POST');
        this.reset();
        return json(200, { ok: true, state: this.state() });
      case '/__demo/faults': {
        if (isGet) return json(200, { faults: this.faults.list() });
        if (method === 'DELETE') {
          this.faults.clear();
          return json(200, { ok: true });
        }
        if (method !== 'POST') return allow('GET, POST, DELETE');
        if (parsed && typeof parsed === 'object' && typeof (parsed as { host?: unknown }).host === 'string') {
          const h = (parsed as { host: string }).host.toLowerCase();
          if (h !== '*' && !this.siteByHost.has(h)) return json(400, { error: 'invalid_fault', message: `unknown host "${h}"` });
        }
        const f = this.faults.add(parsed);
        if (typeof f === 'string') return json(400, { error: 'invalid_fault', message: f });
        return json(201, f);
      }
      case '/__demo/holds': {
        if (isGet) {
          const key = query.get('key');
          if (!HoldStore.validKey(key)) return json(400, { error: 'invalid_hold', message: 'give ?key=' });
          const st = this.holds.state(key);
          return st ? json(200, st) : json(404, { error: 'unknown_hold', key });
        }
        if (method !== 'POST') return allow('GET, POST');
        const h = this.holds.arm(parsed);
        return typeof h === 'string' ? json(400, { error: 'invalid_hold', message: h }) : json(201, h);
      }
      case '/__demo/holds/release': {
        if (method !== 'POST') return allow('POST');
        const h = this.holds.release(parsed);
        return typeof h === 'string' ? json(400, { error: 'invalid_hold', message: h }) : json(200, h);
      }
      case '/__demo/sessions/expire': {
        if (method !== 'POST') return allow('POST');
        let expired = 0;
        for (const s of this.sites) expired += s.expireSessions?.() ?? 0;
        return json(200, { ok: true, expired });
      }
      default:
        return json(404, { error: 'not_found', endpoints: ['GET /__demo/state', 'POST /__demo/reset', 'GET|POST|DELETE /__demo/faults', 'GET|POST /__demo/holds', 'POST /__demo/holds/release', 'POST /__demo/sessions/expire'] });
    }
  }
}

function faultReply(site: Site, path: string, status: number, retryAfter?: number): Reply {
  const headers: Record<string, string> = {};
  if (retryAfter !== undefined) headers['retry-after'] = String(retryAfter);
  else if (status === 429 || status === 503) headers['retry-after'] = '1';
  const reason = http.STATUS_CODES[status] ?? 'Error';
  if (site.json || path.startsWith('/api/')) return json(status, { error: 'injected_fault', status, message: reason }, headers);
  return {
    status,
    headers: { 'content-type': 'text/html; charset=utf-8', 'cache-control': 'no-store', ...headers },
    body: `<!doctype html><html lang="en"><head><meta charset="utf-8"><title>${status} ${esc(reason)}</title></head><body><h1>${status} ${esc(reason)}</h1><p class="error">${esc(site.name)} is having trouble right now. Please try again later.</p></body></html>\n`,
  };
}

/** `/__probe/hold?key=K`: a page naming its key, answered when the key's hold lets it (lib/holds.ts). */
async function heldPage(holds: HoldStore, query: URLSearchParams, res: http.ServerResponse): Promise<Reply> {
  const key = query.get('key');
  if (!HoldStore.validKey(key)) return text(400, 'key is required: 1-100 letters, digits, "-" or "_"\n');
  const gone = new AbortController();
  const onClose = () => gone.abort();
  res.once('close', onClose);
  const outcome = await holds.pass(key, gone.signal);
  res.off('close', onClose);
  return {
    status: 200,
    headers: { 'content-type': 'text/html; charset=utf-8', 'cache-control': 'no-store' },
    body: `<!doctype html><html lang="en"><head><meta charset="utf-8"><title>Held page</title></head><body><h1>Held page</h1><p id="key">${esc(key)}</p><p id="outcome">${outcome}</p></body></html>\n`,
  };
}

function indexPage(sites: Site[], origin: string): Reply {
  const items = sites.map((s) => `<li><a href="http://${s.host}/">${esc(s.host)}</a> — ${esc(s.name)}</li>`).join('');
  return {
    status: 200,
    headers: { 'content-type': 'text/html; charset=utf-8', 'cache-control': 'no-store' },
    body: `<!doctype html><html lang="en"><head><meta charset="utf-8"><title>Demo sites</title></head><body><h1>Demo sites</h1><p>Map these hosts to ${esc(origin)} (or use it as an HTTP proxy):</p><ul>${items}</ul></body></html>\n`,
  };
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

function readBody(req: http.IncomingMessage): Promise<Buffer | null> {
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    let size = 0;
    req.on('data', (c: Buffer) => {
      size += c.length;
      if (size > MAX_BODY) {
        resolve(null);
        req.resume();
        return;
      }
      chunks.push(c);
    });
    req.on('end', () => resolve(Buffer.concat(chunks)));
    req.on('error', reject);
  });
}

function write(req: http.IncomingMessage, res: http.ServerResponse, reply: Reply): void {
  if (res.destroyed || res.writableEnded || req.socket.destroyed) return;
  const body = typeof reply.body === 'string' ? Buffer.from(reply.body, 'utf8') : Buffer.from(reply.body);
  res.statusCode = reply.status;
  for (const [k, v] of Object.entries(reply.headers)) res.setHeader(k, v);
  if (!res.hasHeader('x-content-type-options')) res.setHeader('x-content-type-options', 'nosniff');
  res.setHeader('content-length', String(body.length));
  res.end(req.method === 'HEAD' || reply.status === 204 || reply.status === 304 ? undefined : body);
}

/** Serves the probe pages only, on a site of its own (example.net is not example.test): see the request handler. */
export const PROBE_ONLY_HOST = 'probe.example.net';

export async function startDemoSites(opts: { port?: number; host?: string } = {}): Promise<DemoSites> {
  const listenHost = opts.host ?? '127.0.0.1';
  const mapHost = listenHost === '0.0.0.0' || listenHost === '::' ? '127.0.0.1' : listenHost;
  const localNames = new Set(['127.0.0.1', 'localhost', '::1', '[::1]', mapHost]);
  let origin = '';
  const inst = new Instance();

  const server = http.createServer(async (req, res) => {
    try {
      const rawTarget = req.url ?? '/';
      let url: URL;
      if (/^https?:\/\//i.test(rawTarget)) {
        url = new URL(rawTarget);
      } else {
        const hostHeader = String(req.headers.host ?? mapHost);
        url = new URL(rawTarget.startsWith('/') ? rawTarget : `/${rawTarget}`, `http://${hostHeader}`);
      }
      const host = url.hostname.toLowerCase().replace(/\.$/, '');
      const method = (req.method ?? 'GET').toUpperCase();
      const path = url.pathname;
      const body = await readBody(req);
      if (body === null) return write(req, res, text(413, 'Request body too large\n'));

      if (path.startsWith('/__demo/')) return write(req, res, inst.control(method, path, url.searchParams, body));

      // A host on another registrable domain than the demo sites (example.test), serving the probe
      // pages only: for the engines' cross-site tests, which map it themselves (it is not in hostMap).
      if (host === PROBE_ONLY_HOST) return write(req, res, probeReply(path, url.searchParams, req.headers, method, body) ?? text(404, 'Not found: only /__probe/ pages here.\n'));
      const site = inst.siteByHost.get(host);
      if (!site) {
        if (localNames.has(host)) return write(req, res, path === '/' ? indexPage(inst.sites, origin) : text(404, 'Not found. Use a demo host (see /).\n'));
        return write(req, res, text(502, `Bad gateway: unknown host "${host}" (not a demo site)\n`));
      }
      inst.requestCounts[host] = (inst.requestCounts[host] ?? 0) + 1;
      if (path === '/__probe/hold') return write(req, res, await heldPage(inst.holds, url.searchParams, res));
      const probe = probeReply(path, url.searchParams, req.headers, method, body);
      if (probe) return write(req, res, probe);

      // The query string counts too, so a fault can target one input (`/api/v1/current?city=Madrid`).
      const fault = inst.faults.take(host, method, path + url.search);
      if (fault?.status !== undefined) {
        if (fault.latency_ms) await sleep(fault.latency_ms);
        return write(req, res, faultReply(site, path, fault.status, fault.retry_after_s));
      }

      let reply: Reply;
      const icon = demoSiteIcons[host];
      if ((path === '/favicon.svg' || path === '/favicon.ico') && icon && (method === 'GET' || method === 'HEAD')) {
        reply = { status: 200, headers: { 'content-type': icon.content_type, 'cache-control': 'public, max-age=86400' }, body: icon.bytes };
      } else {
        const dreq: DemoRequest = {
          method,
          host,
          path,
          url: new URL(`http://${host}${path}${url.search}`),
          query: url.searchParams,
          headers: req.headers,
          body,
          cookies: parseCookies(req.headers.cookie),
          clientIp: clientIp(req),
          params: {},
        };
        // The handler runs (and commits any state change) before injected latency.
        reply = await site.handle(dreq);
      }
      if (fault?.latency_ms) await sleep(fault.latency_ms);
      write(req, res, reply);
    } catch (err) {
      console.error('[demo-sites] handler error', err);
      write(req, res, text(500, 'Internal server error\n'));
    }
  });

  server.on('connect', (_req: http.IncomingMessage, socket: Socket) => {
    socket.on('error', () => {});
    const msg = 'CONNECT is not supported: demo sites are plain HTTP\n';
    socket.end(`HTTP/1.1 405 Method Not Allowed\r\nAllow: GET, HEAD, POST\r\nContent-Type: text/plain\r\nContent-Length: ${Buffer.byteLength(msg)}\r\nConnection: close\r\n\r\n${msg}`);
  });
  server.on('clientError', (_err, socket) => {
    if (socket.writable) socket.end('HTTP/1.1 400 Bad Request\r\nConnection: close\r\n\r\n');
  });

  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(opts.port ?? 0, listenHost, () => {
      server.off('error', reject);
      resolve();
    });
  });
  const port = (server.address() as AddressInfo).port;
  const hostPort = `${mapHost.includes(':') ? `[${mapHost}]` : mapHost}:${port}`;
  origin = `http://${hostPort}`;
  const hosts = inst.sites.map((s) => s.host);
  let closed: Promise<void> | undefined;
  return {
    origin,
    port,
    hosts,
    hostMap: Object.fromEntries(hosts.map((h) => [h, hostPort])),
    close() {
      closed ??= new Promise<void>((resolve) => {
        server.close(() => resolve());
        server.closeAllConnections();
      });
      return closed;
    },
  };
}

function clientIp(req: http.IncomingMessage): string {
  const xff = req.headers['x-forwarded-for'];
  const first = (Array.isArray(xff) ? xff[0] : xff)?.split(',')[0]?.trim();
  return (first || req.socket.remoteAddress || 'unknown').replace(/^::ffff:/, '');
}
