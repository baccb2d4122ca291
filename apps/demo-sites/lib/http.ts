// Small HTTP toolkit shared by the demo sites: a buffered reply type, helpers
// to build replies, a tiny router and HTML escaping. Handlers never touch the
// socket; the server writes the reply (so injected latency can be applied
// after a state change has already happened).
import type { IncomingHttpHeaders } from 'node:http';

export interface DemoRequest {
  method: string;
  host: string;
  path: string; // pathname only
  url: URL; // absolute, e.g. http://books.example.test/search?q=x
  query: URLSearchParams;
  headers: IncomingHttpHeaders;
  body: Buffer;
  cookies: Record<string, string>;
  clientIp: string;
  params: Record<string, string>; // filled by the router
}

export interface Reply {
  status: number;
  headers: Record<string, string | string[]>;
  body: string | Uint8Array;
}

export type Handler = (req: DemoRequest) => Reply | Promise<Reply>;

export interface Site {
  host: string;
  name: string;
  handle: Handler;
  reset?: () => void;
  stats?: () => Record<string, number>;
  /** invalidates login sessions; returns how many were dropped */
  expireSessions?: () => number;
  /** true when error replies should be JSON (API-only sites) */
  json?: boolean;
}

export const CACHE_PUBLIC = 'public, max-age=60';
export const NO_STORE = 'no-store';

export function html(status: number, body: string, headers: Record<string, string | string[]> = {}): Reply {
  return {
    status,
    headers: { 'content-type': 'text/html; charset=utf-8', 'cache-control': status === 200 ? CACHE_PUBLIC : NO_STORE, ...headers },
    body,
  };
}

export function json(status: number, value: unknown, headers: Record<string, string | string[]> = {}): Reply {
  return {
    status,
    headers: { 'content-type': 'application/json; charset=utf-8', 'cache-control': NO_STORE, ...headers },
    body: JSON.stringify(value),
  };
}

export function text(status: number, body: string, headers: Record<string, string | string[]> = {}): Reply {
  return { status, headers: { 'content-type': 'text/plain; charset=utf-8', 'cache-control': NO_STORE, ...headers }, body };
}

export function redirect(status: 302 | 303 | 301 | 307, location: string, headers: Record<string, string | string[]> = {}): Reply {
  return { status, headers: { location, 'cache-control': NO_STORE, ...headers }, body: '' };
}

export function esc(value: unknown): string {
  return String(value)
    .replace(/&/g, '&amp;')
    .replace(/</g, '&lt;')
    .replace(/>/g, '&gt;')
    .replace(/"/g, '&quot;')
    .replace(/'/g, '&#39;');
}

export function parseCookies(header: string | undefined): Record<string, string> {
  const out: Record<string, string> = {};
  if (!header) return out;
  for (const part of header.split(';')) {
    const i = part.indexOf('=');
    if (i < 0) continue;
    const k = part.slice(0, i).trim();
    if (!k) continue;
    try {
      out[k] = decodeURIComponent(part.slice(i + 1).trim());
    } catch {
      out[k] = part.slice(i + 1).trim();
    }
  }
  return out;
}

export function formBody(req: DemoRequest): URLSearchParams {
  return new URLSearchParams(req.body.toString('utf8'));
}

/** JSON body or undefined when missing/invalid. */
export function jsonBody(req: DemoRequest): Record<string, unknown> | undefined {
  try {
    const v = JSON.parse(req.body.toString('utf8')) as unknown;
    return v && typeof v === 'object' && !Array.isArray(v) ? (v as Record<string, unknown>) : undefined;
  } catch {
    return undefined;
  }
}

/** Reads either a JSON or an urlencoded body into a flat string map. */
export function bodyFields(req: DemoRequest): Record<string, string> {
  const ct = String(req.headers['content-type'] ?? '');
  const out: Record<string, string> = {};
  if (ct.includes('json')) {
    const b = jsonBody(req) ?? {};
    for (const [k, v] of Object.entries(b)) if (v !== null && v !== undefined) out[k] = String(v);
  } else {
    for (const [k, v] of formBody(req)) out[k] = v;
  }
  return out;
}

interface Route {
  method: string;
  re: RegExp;
  keys: string[];
  handler: Handler;
}

/** Tiny router: patterns like '/books/:isbn'. Unmatched method on a known path → 405. */
export class Router {
  private routes: Route[] = [];
  constructor(private notFound: Handler) {}

  on(method: string, pattern: string, handler: Handler): this {
    const keys: string[] = [];
    const src = pattern
      .split('/')
      .map((seg) => {
        if (seg.startsWith(':')) {
          keys.push(seg.slice(1));
          return '([^/]+)';
        }
        return seg.replace(/[.*+?^${}()|[\]\\]/g, '\\$&');
      })
      .join('/');
    this.routes.push({ method, re: new RegExp(`^${src}/?$`), keys, handler });
    return this;
  }
  get(p: string, h: Handler): this {
    return this.on('GET', p, h);
  }
  post(p: string, h: Handler): this {
    return this.on('POST', p, h);
  }

  handle = async (req: DemoRequest): Promise<Reply> => {
    const allowed = new Set<string>();
    const method = req.method === 'HEAD' ? 'GET' : req.method;
    for (const r of this.routes) {
      const m = r.re.exec(req.path);
      if (!m) continue;
      if (r.method !== method) {
        allowed.add(r.method);
        continue;
      }
      const params: Record<string, string> = {};
      r.keys.forEach((k, i) => {
        try {
          params[k] = decodeURIComponent(m[i + 1]);
        } catch {
          params[k] = m[i + 1];
        }
      });
      req.params = params;
      return r.handler(req);
    }
    if (allowed.size > 0) {
      if (allowed.has('GET')) allowed.add('HEAD');
      const allow = [...allowed].join(', ');
      return {
        status: 405,
        headers: { allow, 'content-type': 'text/plain; charset=utf-8', 'cache-control': NO_STORE },
        body: `405 Method Not Allowed. Allowed: ${allow}\n`,
      };
    }
    return this.notFound(req);
  };
}

/** Deterministic 32-bit hash (FNV-1a) for seeded fixture variation. */
export function hash(s: string): number {
  let h = 0x811c9dc5;
  for (let i = 0; i < s.length; i++) {
    h ^= s.charCodeAt(i);
    h = Math.imul(h, 0x01000193);
  }
  return h >>> 0;
}

export function intParam(v: string | null, def: number, min: number, max: number): number | undefined {
  if (v === null || v === '') return def;
  if (!/^\d+$/.test(v)) return undefined;
  const n = Number(v);
  return n >= min && n <= max ? n : undefined;
}
