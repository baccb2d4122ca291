// The plain-HTTP engine: undici with a connector that routes mapped hosts (dev/tests) to the demo
// sites while keeping the recipe's real-looking URL and Host header, and that refuses private,
// loopback and link-local destinations for every other host (checked on every connection, so also
// after redirects and against DNS rebinding).

import { isIP } from 'node:net';
import { CookieJar, getPublicSuffix, type Cookie } from 'tough-cookie';
import { Agent, buildConnector, request } from 'undici';
import { reservedHeader, type LoadState } from '../../shared/recipes/schema.ts';
import { ServiceError } from '../../shared/errors.ts';
import { afterSending, isAbortError, networkError, notSent } from './errors.ts';
import { DestinationRefusedError, guardedLookup, isPrivateAddress, mappedTarget, type HostMap } from './net-guard.ts';
import type { Driver, HopCheck, HttpRequestSpec, HttpResponseData, PageSnapshot, UrlCheck } from './interpreter.ts';

export const MAX_BODY_BYTES = 5 * 1024 * 1024;
export const MAX_REDIRECTS = 5;
/** The only recipe headers a redirect to another origin keeps, unless the recipe filled one from a secret (`HttpRequestSpec.originOnly`). */
const SAFE_ACROSS_ORIGINS = new Set(['accept', 'accept-language', 'content-language', 'content-type', 'user-agent']);

export interface HttpDispatcherOptions {
  hostMap?: HostMap;
  allowPrivateNetwork?: boolean;
  connectTimeoutMs?: number;
}

/** One undici Agent per runner; connections are pooled per origin. */
export function createHttpDispatcher(opts: HttpDispatcherOptions): Agent {
  const timeout = opts.connectTimeoutMs ?? 10_000;
  const plain = buildConnector({ timeout });
  const guarded = buildConnector({ timeout, lookup: guardedLookup } as buildConnector.BuildOptions);
  const connect: buildConnector.connector = (o, cb) => {
    const target = mappedTarget(opts.hostMap, o.hostname);
    if (target) return plain({ ...o, hostname: target.host, port: String(target.port) }, cb);
    if (opts.allowPrivateNetwork) return plain(o, cb);
    const bare = o.hostname.replace(/^\[|\]$/g, '');
    if (isIP(bare) && isPrivateAddress(bare)) {
      cb(new DestinationRefusedError(o.hostname, 'it is a private, loopback or link-local address'), null);
      return;
    }
    if (!isIP(bare) && (bare === 'localhost' || bare.endsWith('.localhost'))) {
      cb(new DestinationRefusedError(o.hostname, 'it is a loopback name'), null);
      return;
    }
    return guarded(o, cb);
  };
  return new Agent({ connect, headersTimeout: 30_000, bodyTimeout: 30_000, keepAliveTimeout: 4_000 });
}

/**
 * Bounds of a run's cookies. RFC 6265 §6.1 asks a user agent for at least 50 cookies per domain,
 * 3000 in all and 4096 bytes per cookie; Chromium keeps 180 per domain and 3000 in all. A run is one
 * task against a few sites, not a browsing profile, so it keeps the RFC's per-domain minimum and far
 * fewer in all: a hostile site setting cookies on every answer, hop and step cannot grow the run's
 * memory or the requests it sends.
 */
export const COOKIE_LIMITS = {
  /** Name plus value, in bytes (RFC 6265bis §5.6, Chromium): a larger cookie is ignored whole. */
  cookieBytes: 4096,
  /** Per site (registrable domain: example.test for books.example.test); beyond it the least recently used go first (RFC 6265 §5.3, as browsers do). */
  perSite: 50,
  /** Per run; beyond it the least recently used of all go first. */
  total: 300,
  /**
   * The Cookie header of one request, in bytes (servers commonly refuse a header line beyond 8 KB).
   * Cookies are taken in RFC 6265 §5.4 order (longer Path first, then older); one that would take
   * the header beyond the bound is left out of that request, never cut.
   */
  headerBytes: 8192,
} as const;

/**
 * How a request stands to the cookies' SameSite attribute (RFC 6265bis §5.2): the recipe's own
 * requests are first party (`strict`: every cookie goes); a redirect hop that another site sent the
 * engine to is cross-site: `lax` for GET and HEAD (a top-level navigation: SameSite=Strict cookies
 * stay behind), `none` for other methods (SameSite=Lax ones stay behind too).
 * docs/contract-decisions.md, "SameSite in the engines".
 */
export type SameSiteContext = 'strict' | 'lax' | 'none';

/** A host's registrable domain (example.test for books.example.test); an address, or a name without one, is its own. */
export function registrableDomain(hostname: string): string {
  const host = hostname.toLowerCase().replace(/^\[|\]$/g, '');
  if (isIP(host)) return host;
  try {
    return getPublicSuffix(host, { allowSpecialUseDomain: true, ignoreError: true }) ?? host;
  } catch {
    return host;
  }
}

/** A URL's schemeful site (RFC 6265bis §5.2, HTML's "site"): its scheme and registrable domain. */
export const siteOf = (url: URL): string => `${url.protocol}//${registrableDomain(url.hostname)}`;

/** Whether a Set-Cookie line's name and value fit COOKIE_LIMITS.cookieBytes (a line that does not parse is judged by the jar). */
export function cookieLineFits(line: string): boolean {
  const semi = line.indexOf(';');
  const pair = semi === -1 ? line : line.slice(0, semi);
  // Name and value without the '=' and the spaces around them: the bytes a browser counts.
  return Buffer.byteLength(pair.replace(/\s*=\s*/, '').trim(), 'utf8') <= COOKIE_LIMITS.cookieBytes;
}

/** A Cookie header of `pairs` (name=value, in order) within COOKIE_LIMITS.headerBytes: a pair that does not fit is left out. */
export function boundedCookieHeader(pairs: string[]): string {
  const kept: string[] = [];
  let bytes = 0;
  for (const pair of pairs) {
    const add = Buffer.byteLength(pair, 'utf8') + (kept.length ? 2 : 0);
    if (bytes + add > COOKIE_LIMITS.headerBytes) continue;
    kept.push(pair);
    bytes += add;
  }
  return kept.join('; ');
}

/**
 * Where a run's cookies live: the HTTP engine's own jar (`HttpCookies`), or for `request` steps of a
 * browser recipe the browser context's cookies (browser-engine.ts). Either way RFC 6265's rules
 * decide, as tough-cookie implements them: a cookie goes only to the hosts its Domain allows (a host
 * only cookie to its host alone), only on its Path, a Secure one never over plain http; one for a
 * public suffix or for another site's domain is never kept; Max-Age and Expires hold. Both keep
 * COOKIE_LIMITS and SameSite (`SameSiteContext`).
 */
export interface RunCookies {
  /** The Cookie header for a request to `url` ('' when no cookie goes there), within COOKIE_LIMITS.headerBytes. */
  header(url: URL, sameSite: SameSiteContext): string | Promise<string>;
  /** Keeps the cookies of the Set-Cookie lines `url` answered with. A malformed line, one that `url` may not set, or one beyond COOKIE_LIMITS.cookieBytes is ignored (as a browser does), never thrown. */
  store(url: URL, lines: string[]): Promise<void> | undefined;
}

/** A tough-cookie jar with the rules both engines apply (each explicit, so an upgrade cannot loosen one unnoticed). */
export function newCookieJar(): CookieJar {
  return new CookieJar(undefined, {
    // Never a cookie for "com" or "co.uk": it would go to every site under it.
    rejectPublicSuffixes: true,
    // A name under a special-use TLD (.test, .example, .local) is a site like any other (the demo
    // sites are under .test); the TLD itself is still refused like a public suffix.
    allowSpecialUseDomain: true,
    // A Secure cookie is set and sent over https only: not over plain http to a loopback address either.
    allowSecureOnLocal: false,
    enforceSecureOriginOnStorage: true,
    // __Secure- and __Host- cookies that break their prefix's rules are ignored, not thrown.
    prefixSecurity: 'silent',
    looseMode: false,
  });
}

const accessed = (c: Cookie) => (c.lastAccessed instanceof Date ? c.lastAccessed.getTime() : 0);

/** The HTTP engine's per-run jar, within COOKIE_LIMITS. tough-cookie's synchronous API (its memory store answers at once): no await on the request path. */
export class HttpCookies implements RunCookies {
  private readonly jar = newCookieJar();
  /** Most runs never get a cookie: then nothing is looked up at all. */
  private empty = true;

  header(url: URL, sameSite: SameSiteContext = 'strict'): string {
    if (this.empty) return '';
    let cookies: Cookie[];
    try {
      cookies = this.jar.getCookiesSync(url.href, { sameSiteContext: sameSite, sort: true });
    } catch {
      // tough-cookie refuses to look up some names (a bare special-use name such as "test"): no cookie goes there.
      return '';
    }
    return boundedCookieHeader(cookies.map((c) => c.cookieString()));
  }

  store(url: URL, lines: string[]): undefined {
    let added = false;
    for (const line of lines) {
      if (!cookieLineFits(line)) continue;
      try {
        if (this.jar.setCookieSync(line, url.href, { ignoreError: true })) added = true;
      } catch {
        // A line the website got wrong in a way ignoreError does not cover: ignored like the others.
      }
    }
    if (added) {
      this.empty = false;
      this.evict();
    }
  }

  /** How many cookies the jar holds (expired ones included until the next eviction). */
  get size(): number {
    return this.all().length;
  }

  private all(): Cookie[] {
    let out: Cookie[] = [];
    this.jar.store.getAllCookies((err, cookies) => {
      if (!err && cookies) out = cookies;
    });
    return out;
  }

  private remove(c: Cookie): void {
    this.jar.store.removeCookie(c.domain, c.path, c.key, () => undefined);
  }

  /** Drops expired cookies, then the least recently used beyond COOKIE_LIMITS.perSite of a site, then beyond COOKIE_LIMITS.total. */
  private evict(): void {
    const now = Date.now();
    const live: Cookie[] = [];
    for (const c of this.all()) {
      const at = c.expiryTime();
      if (at !== undefined && at <= now) this.remove(c);
      else live.push(c);
    }
    if (live.length <= COOKIE_LIMITS.perSite) return;
    // Least recently used first; of those set at the same moment, the one set first.
    live.sort((a, b) => accessed(a) - accessed(b) || a.creationIndex - b.creationIndex);
    const sites = live.map((c) => registrableDomain(c.domain ?? ''));
    const perSite = new Map<string, number>();
    for (const site of sites) perSite.set(site, (perSite.get(site) ?? 0) + 1);
    const kept: Cookie[] = [];
    for (const [i, c] of live.entries()) {
      const site = sites[i]!;
      const n = perSite.get(site)!;
      if (n > COOKIE_LIMITS.perSite) {
        perSite.set(site, n - 1);
        this.remove(c);
      } else kept.push(c);
    }
    for (let i = 0; i < kept.length - COOKIE_LIMITS.total; i++) this.remove(kept[i]!);
  }
}

/**
 * Refuses, before anything is sent, a header the engine must write itself (`reservedHeader`):
 * `host` would send the request, its secrets and the site's cookies to whichever site shares the
 * URL host's address, past the host list and the secret-host check, which judge the URL. Recipes
 * are validated against this too; this holds for versions stored before that and for every
 * caller of the engine. Final, like a refused destination.
 */
function assertOwnHeaders(headers: Record<string, string>, step: string): void {
  for (const name of Object.keys(headers)) {
    if (!reservedHeader(name)) continue;
    const header = name.toLowerCase();
    const err = new ServiceError('workflow_execution_failed', `Refused to send a request with a ${header} header: the engine sends each request to its URL's host and manages the connection itself`, {
      details: { step, header, reason: 'header_not_allowed' },
    });
    notSent.add(err);
    throw err;
  }
}

async function readBody(body: AsyncIterable<Uint8Array> & { destroy?: (e?: Error) => void }, host: string, step: string): Promise<string> {
  const chunks: Uint8Array[] = [];
  let size = 0;
  for await (const chunk of body) {
    size += chunk.byteLength;
    if (size > MAX_BODY_BYTES) {
      body.destroy?.();
      throw new ServiceError('upstream_http_error', `The website ${host} returned more than ${MAX_BODY_BYTES} bytes`, { details: { step, host, reason: 'response_too_large' } });
    }
    chunks.push(chunk);
  }
  return Buffer.concat(chunks).toString('utf8');
}

export class HttpDriver implements Driver {
  readonly engine = 'http' as const;
  private page: PageSnapshot | null = null;

  constructor(
    private readonly dispatcher: Agent,
    private readonly checkUrl: UrlCheck,
    /** The run's cookies: one jar per run (one driver per run), or the browser context's. */
    private readonly cookies: RunCookies = new HttpCookies(),
  ) {}

  async request(spec: HttpRequestSpec, signal: AbortSignal): Promise<HttpResponseData> {
    assertOwnHeaders(spec.headers, spec.step);
    let url = spec.url;
    let method = spec.method;
    let body = spec.body;
    const headers = { ...spec.headers };
    /** The sites of the hops so far: the recipe's own request, then each site that redirected. */
    const chain: string[] = [];
    for (let hop = 0; ; hop++) {
      const host = url.hostname.toLowerCase();
      const sendHeaders: Record<string, string> = { ...headers };
      // The recipe's own request is first party. A hop that a site other than its own sent the
      // engine to (anywhere in the chain) is cross-site: SameSite cookies stay behind as a browser's
      // would on a cross-site navigation, so one site cannot spend another's session.
      const site = siteOf(url);
      const sameSite: SameSiteContext = !chain.some((s) => s !== site) ? 'strict' : method === 'GET' || method === 'HEAD' ? 'lax' : 'none';
      chain.push(site);
      // The cookies for this hop's own URL (a recipe's cookie header, kept only on its origin, wins).
      if (!sendHeaders.cookie) {
        const got = this.cookies.header(url, sameSite);
        const cookie = typeof got === 'string' ? got : await got;
        if (cookie) sendHeaders.cookie = cookie;
      }
      // A hop is checked as the recipe's own request was (HopCheck): on everything it sends, before
      // it is sent. The request itself reached the website already (never "not sent").
      if (hop > 0 && spec.checkHop) {
        try {
          spec.checkHop(url, [...Object.values(sendHeaders), body]);
        } catch (e) {
          throw afterSending(e);
        }
      }
      let res: Awaited<ReturnType<typeof request>>;
      try {
        res = await request(url, { method, headers: sendHeaders, body, dispatcher: this.dispatcher, signal });
      } catch (e) {
        if (signal.aborted || isAbortError(e)) throw e;
        const err = networkError(e, host, spec.step);
        throw hop > 0 ? afterSending(err) : err;
      }
      // Each hop's cookies are kept, as set by that hop's URL, before the next hop is asked for its own.
      const setCookie = res.headers['set-cookie'];
      if (setCookie) {
        const kept = this.cookies.store(url, Array.isArray(setCookie) ? setCookie : [setCookie]);
        if (kept) await kept;
      }
      const location = res.headers.location;
      if ([301, 302, 303, 307, 308].includes(res.statusCode) && location && method !== 'HEAD') {
        await res.body.dump().catch(() => undefined);
        if (hop >= MAX_REDIRECTS)
          throw new ServiceError('upstream_http_error', `The website ${host} redirected more than ${MAX_REDIRECTS} times`, { details: { step: spec.step, host, reason: 'too_many_redirects' } });
        let next: URL;
        try {
          next = new URL(Array.isArray(location) ? location[0]! : location, url);
        } catch {
          // The website's answer is broken, not the recipe: never internal_error (our fault).
          throw new ServiceError('upstream_http_error', `The website ${host} redirected to an invalid URL`, { details: { step: spec.step, host, reason: 'invalid_redirect' } });
        }
        try {
          this.checkUrl(next, spec.step);
        } catch (e) {
          throw afterSending(e);
        }
        if (res.statusCode === 303 || ((res.statusCode === 301 || res.statusCode === 302) && method !== 'GET')) {
          method = 'GET';
          body = undefined;
          delete headers['content-type'];
        }
        // Another origin (scheme, host or port) never sees what the recipe sent the first one:
        // credentials, cookies and any custom header that may carry a secret stay behind.
        if (next.origin !== url.origin) {
          // A 307 or 308 would resend the body, and a body may carry a secret (a sign-in form's
          // password) that was meant for this origin only: refused, not resent, and final (the
          // same website answers the same way on a retry). The request itself reached the website
          // (never "not sent": an action may have happened). The one exception is the same host
          // moving the request from http to https: the body goes nowhere else, only encrypted.
          const upgrade = url.protocol === 'http:' && next.protocol === 'https:' && next.hostname === url.hostname;
          if (body !== undefined && body !== '' && !upgrade)
            throw new ServiceError('workflow_execution_failed', `The website ${host} redirected a request with a body to another origin (${next.host}): the body is not sent there`, {
              details: { step: spec.step, host, reason: 'cross_origin_body_redirect' },
            });
          for (const name of Object.keys(headers)) if (!SAFE_ACROSS_ORIGINS.has(name.toLowerCase()) || spec.originOnly?.includes(name.toLowerCase())) delete headers[name];
        }
        url = next;
        continue;
      }
      let text: string;
      try {
        text = method === 'HEAD' ? '' : await readBody(res.body, host, spec.step);
      } catch (e) {
        if (e instanceof ServiceError) throw e;
        if (signal.aborted || isAbortError(e)) throw e;
        throw networkError(e, host, spec.step);
      }
      const ct = res.headers['content-type'];
      return { status: res.statusCode, url: url.toString(), headers: res.headers, body: text, contentType: (Array.isArray(ct) ? ct[0] : ct) ?? '' };
    }
  }

  async navigate(url: URL, opts: { waitUntil?: LoadState; step: string; signal: AbortSignal; checkHop?: HopCheck }): Promise<{ status: number | null; url: string; retryAfter?: string | null }> {
    const res = await this.request(
      { method: 'GET', url, headers: { 'user-agent': 'Mozilla/5.0 (X11; Linux x86_64) WorkflowQueryService/0.1', accept: 'text/html,application/xhtml+xml' }, step: opts.step, usesSecrets: false, checkHop: opts.checkHop },
      opts.signal,
    );
    this.page = { url: res.url, status: res.status, html: res.body };
    const ra = res.headers['retry-after'];
    return { status: res.status, url: res.url, retryAfter: Array.isArray(ra) ? ra[0] : (ra ?? null) };
  }

  async snapshot(): Promise<PageSnapshot | null> {
    return this.page;
  }
}
