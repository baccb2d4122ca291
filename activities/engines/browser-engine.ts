// The browser engine: playwright-core driving Debian's Chromium (never a downloaded browser).
// One warm browser per runner, launched lazily and relaunched after a crash or disconnect; a fresh
// context per run, always closed; concurrency bounded by a semaphore. A run's context and page are
// made ahead of it (one spare, see `Prepared`), when the run before it ends: a new context and its
// first page cost about 140 ms of Chromium's time, a third of a short run, and a spare that no run
// has claimed has never loaded anything, so making it early changes nothing but when the work is
// done. Every connection of a run's context goes through the run's guarded proxy
// (guarded-proxy.ts): only the recipe's hosts, no private, loopback or link-local destination on
// any hop (redirects, subresources, fetch, EventSource, WebSockets), connected to the address that
// was checked; mapped hosts reach the demo sites there (the URL and Host header stay real-looking).
// A private destination anywhere in the run fails it; an undeclared public host fails it when the
// page itself goes there.

import { chromium, errors as pwErrors, type Browser, type BrowserContext, type ElementHandle, type Page, type Response } from 'playwright-core';
import type { Cookie } from 'tough-cookie';
import type { Agent } from 'undici';
import { defaultChromiumPath } from '../../shared/config.ts';
import { ServiceError } from '../../shared/errors.ts';
import type { ClickStep, LoadState, Recipe, WaitStep } from '../../shared/recipes/schema.ts';
import { afterSending, notSent } from './errors.ts';
import { HttpDriver, MAX_BODY_BYTES, boundedCookieHeader, cookieLineFits, createHttpDispatcher, newCookieJar, type RunCookies, type SameSiteContext } from './http-engine.ts';
import { Interpreter, makeUrlCheck, type Driver, type HttpRequestSpec, type HttpResponseData, type PageSnapshot, type RunContext, type UrlCheck } from './interpreter.ts';
import { startGuardedProxy, type GuardedProxy, type ProxyRefusal } from './guarded-proxy.ts';
import { mappedTarget } from './net-guard.ts';
import { browserPageSlots, type Semaphore } from './fair-semaphore.ts';

export { Semaphore } from './fair-semaphore.ts';

// No --no-sandbox here: whether pages run in Chromium's sandbox is `chromiumSandbox` at launch
// (Playwright adds --no-sandbox when it is false, its default); see BrowserPool.getBrowser.
export const CHROMIUM_ARGS = ['--disable-gpu', '--disable-quic', '--no-first-run', '--disable-background-networking', '--disable-component-update', '--disable-sync',
  // WebRTC may not open UDP past the proxy (STUN/TURN to private addresses); QUIC (and so
  // WebTransport) is off above, so every connection is TCP through the run's proxy.
  '--force-webrtc-ip-handling-policy=disable_non_proxied_udp',
];

const ACTION_TIMEOUT_MS = 15_000;
const NAVIGATION_TIMEOUT_MS = 30_000;

/** CHROMIUM_SANDBOX: `auto` (when the platform allows), `on` (required), `off`. */
export type SandboxMode = 'auto' | 'on' | 'off';

/**
 * Whether to launch with Chromium's sandbox first, and why not when not. As root Chromium refuses
 * its sandbox (it would not protect anything from a root process), so `auto` does not try it there.
 */
export function sandboxPlan(mode: SandboxMode, uid: number | undefined): { try: boolean; reason?: string } {
  if (mode === 'off') return { try: false, reason: 'CHROMIUM_SANDBOX=off' };
  if (mode === 'auto' && uid === 0) return { try: false, reason: 'the worker runs as root, where Chromium cannot use its sandbox' };
  return { try: true };
}

export interface BrowserPoolOptions {
  hostMap: Record<string, string>;
  chromiumPath?: string;
  /** Chromium's sandbox around rendered pages (default `auto`). */
  sandbox?: SandboxMode;
  concurrency: number;
  allowPrivateNetwork: boolean;
  /** The pages' semaphore (`browserPageSlots`), when the runner made it: the browser worker's task slots follow it. */
  pages?: Semaphore;
}

/** Host-resolver rules mapping each demo host to its address and port. */
export function hostResolverRules(hostMap: Record<string, string>): string | null {
  const rules = Object.keys(hostMap).map((h) => {
    const t = mappedTarget(hostMap, h)!;
    return `MAP ${h} ${t.host.includes(':') ? `[${t.host}]` : t.host}:${t.port}`;
  });
  return rules.length ? rules.join(', ') : null;
}

const NET_ERROR_RE = /net::(ERR_[A-Z_]+)/;
const NOT_SENT_NET = new Set(['ERR_CONNECTION_REFUSED', 'ERR_NAME_NOT_RESOLVED', 'ERR_ADDRESS_UNREACHABLE', 'ERR_BLOCKED_BY_CLIENT', 'ERR_UNSAFE_PORT', 'ERR_CONNECTION_TIMED_OUT']);

/**
 * A context made before a run needs it: fresh, on about:blank, never navigated. Its proxy refuses
 * every host until a run claims it and adds its recipe's hosts to `hosts`; what the proxy refuses
 * is reported to the claiming run's `refusals`. Claimed once, then closed with its run.
 */
interface Prepared {
  context: BrowserContext;
  page: Page;
  proxy: GuardedProxy;
  hosts: Set<string>;
  sink: { refusals: Refusals | null };
}

export class BrowserPool {
  private browser: Browser | null = null;
  /** The next run's context, being made or made (at most one; null while none is wanted). */
  private spare: Promise<Prepared | null> | null = null;
  private launching: Promise<Browser> | null = null;
  private readonly semaphore: Semaphore;
  private readonly dispatcher: Agent;
  private closed = false;
  /** Launch count (tests read it to see relaunches). */
  launches = 0;
  /** Whether the running browser has Chromium's sandbox (null before the first launch). */
  sandboxed: boolean | null = null;
  private sandboxUnavailable = false;

  constructor(readonly opts: BrowserPoolOptions) {
    this.semaphore = opts.pages ?? browserPageSlots(opts.concurrency);
    this.dispatcher = createHttpDispatcher({ hostMap: opts.hostMap, allowPrivateNetwork: opts.allowPrivateNetwork });
  }

  private async getBrowser(): Promise<Browser> {
    if (this.browser?.isConnected()) return this.browser;
    if (!this.launching) {
      const mode = this.opts.sandbox ?? 'auto';
      const plan = sandboxPlan(mode, process.getuid?.());
      const launch = (sandbox: boolean) =>
        chromium
          .launch({ executablePath: this.opts.chromiumPath ?? process.env.CHROMIUM_PATH ?? defaultChromiumPath(), args: [...CHROMIUM_ARGS], headless: true, chromiumSandbox: sandbox })
          .then((b) => {
            this.announce(sandbox, sandbox ? undefined : plan.reason);
            return b;
          });
      // `auto` tries the sandbox once per pool: where it could not start, relaunches go without it.
      const launched = !plan.try || this.sandboxUnavailable
        ? launch(false)
        : launch(true).catch((err: unknown) => {
            const why = String((err as Error)?.message ?? err).split('\n')[0]!.slice(0, 300);
            if (mode === 'on') throw new Error(`Chromium's sandbox is required (CHROMIUM_SANDBOX=on) and could not be used: ${why}`);
            plan.reason = `Chromium could not start with its sandbox here (${why})`;
            // Only a browser that starts without it shows the sandbox was the obstacle (not, say, a
            // missing binary): then later relaunches skip the attempt.
            return launch(false).then((b) => {
              this.sandboxUnavailable = true;
              return b;
            });
          });
      this.launching = launched
        .then((b) => {
          this.launches++;
          this.browser = b;
          b.on('disconnected', () => {
            if (this.browser === b) this.browser = null;
          });
          if (this.closed) void b.close();
          return b;
        })
        .catch((e: unknown) => {
          throw new ServiceError('engine_unavailable', `The browser could not be started: ${String((e as Error)?.message ?? e).split('\n')[0]}`);
        })
        .finally(() => {
          this.launching = null;
        });
    }
    return this.launching;
  }

  /** Says once, and whenever it changes, whether pages run in Chromium's sandbox; without it, a warning. */
  private announce(sandboxed: boolean, reason: string | undefined): void {
    if (this.sandboxed === sandboxed) return;
    this.sandboxed = sandboxed;
    const line = JSON.stringify({ event: 'browser_sandbox', sandboxed, ...(reason ? { reason } : {}) });
    if (sandboxed) console.log(line);
    else console.warn(line);
  }

  /** A fresh context, its page and its proxy (refusing every host until claimed). */
  private async prepare(): Promise<Prepared> {
    const hosts = new Set<string>();
    const sink: Prepared['sink'] = { refusals: null };
    const proxy = await startGuardedProxy({
      hostMap: this.opts.hostMap,
      allowPrivateNetwork: this.opts.allowPrivateNetwork,
      allowedHosts: hosts,
      onRefused: (r) => sink.refusals?.add(r),
    });
    try {
      const options = { ...contextOptions(), proxy: { server: proxy.server } };
      let browser = await this.getBrowser();
      let context: BrowserContext;
      try {
        context = await browser.newContext(options);
      } catch {
        // the browser died between runs: relaunch once
        if (this.browser === browser) this.browser = null;
        browser = await this.getBrowser();
        context = await browser.newContext(options);
      }
      try {
        return { context, page: await context.newPage(), proxy, hosts, sink };
      } catch (e) {
        await context.close().catch(() => undefined);
        throw e;
      }
    } catch (e) {
      await proxy.close();
      throw e;
    }
  }

  /** Starts making the next run's context, unless one is on its way or the pool is closed. */
  private prepareSpare(): void {
    if (this.spare || this.closed) return;
    // One on its way when the pool closes is awaited and closed by close().
    this.spare = this.prepare().catch(() => null);
  }

  /** The spare context if it is (or becomes) usable, else null. */
  private async takeSpare(): Promise<Prepared | null> {
    const spare = this.spare;
    this.spare = null;
    const p = spare ? await spare : null;
    if (!p) return null;
    const browser = p.context.browser();
    if (!browser || browser !== this.browser || !browser.isConnected() || p.page.isClosed()) {
      void this.dispose(p, true);
      return null;
    }
    return p;
  }

  /** Closes a run's context (bounded: a context that will not close means a stuck browser) and its proxy. */
  private async dispose(p: Prepared, quiet = false): Promise<void> {
    // A context that will not close within a few seconds means a stuck browser: drop it.
    const closed = await Promise.race([p.context.close().then(() => true, () => true), sleep(5_000).then(() => false)]);
    await p.proxy.close().catch(() => undefined);
    const browser = p.context.browser();
    if (!closed && !quiet && browser && this.browser === browser) {
      this.browser = null;
      void browser.close().catch(() => undefined);
    }
  }

  async run(recipe: Recipe, input: Record<string, unknown>, ctx: RunContext, signal: AbortSignal): Promise<unknown> {
    // Waiting for a page and making its context touch no website: `ctx.startSignal` may end them too.
    const setup = ctx.startSignal ? AbortSignal.any([signal, ctx.startSignal]) : signal;
    let release: () => void;
    try {
      release = await this.semaphore.acquire(setup, ctx.party);
    } catch {
      throw new ServiceError('execution_timeout', 'The website task did not start within its time limit (all browsers busy)');
    }
    let prepared: Prepared | null = null;
    const refusals = new Refusals();
    let closing: Promise<void> | null = null;
    const closeContext = (): Promise<void> => {
      const p = prepared;
      return p ? (closing ??= this.dispose(p)) : Promise.resolve();
    };
    const onAbort = () => void closeContext();
    try {
      if (this.closed) throw new ServiceError('engine_unavailable', 'The recipe runner is closed');
      // Setting up is bounded by the signal too, so a stuck browser cannot hold the run.
      let driver: BrowserDriver;
      try {
        driver = await untilAborted(setup, async () => {
          const p = (await this.takeSpare()) ?? (await this.prepare());
          prepared = p;
          // Claimed: from here the proxy lets this recipe's hosts through, and only them.
          p.sink.refusals = refusals;
          for (const h of recipe.hosts) p.hosts.add(h.toLowerCase());
          if (setup.aborted) void closeContext();
          p.context.setDefaultTimeout(ACTION_TIMEOUT_MS);
          p.context.setDefaultNavigationTimeout(NAVIGATION_TIMEOUT_MS);
          const checkUrl = makeUrlCheck(recipe.hosts);
          return new BrowserDriver(p.page, checkUrl, refusals, new HttpDriver(this.dispatcher, checkUrl, new ContextCookies(p.context)));
        });
      } catch (e) {
        if (e instanceof ServiceError) throw e;
        if (setup.aborted) throw new ServiceError('execution_timeout', 'The website task did not finish within its time limit');
        throw new ServiceError('workflow_execution_failed', `The browser could not open a page: ${String((e as Error)?.message ?? e).split('\n')[0]}`, { details: { reason: 'browser_unavailable' } });
      }
      // The page is this run's, and nothing has reached the website: the caller's last word on starting.
      ctx.beforeSite?.();
      signal.addEventListener('abort', onAbort, { once: true });
      if (signal.aborted) onAbort();
      const output = await new Interpreter(recipe, driver, input, ctx, signal).run();
      driver.assertNoPrivateRefusal();
      return output;
    } finally {
      signal.removeEventListener('abort', onAbort);
      // A context claimed after its signal fired (untilAborted gave up on it) is closed when it
      // arrives. Closing before answering measured the same as closing after it (bench/results,
      // speed5): Chromium's teardown then overlaps the workflow's settle instead.
      await closeContext();
      // The next run's context is made now, between runs, not while this one ran: made beside a
      // run, its ~140 ms of Chromium's work slowed that run's page by about as much (bench/results,
      // session 36). Started before the slot is given back, so the run that takes the slot waits
      // for this one instead of making a second.
      this.prepareSpare();
      release();
    }
  }

  async close(): Promise<void> {
    this.closed = true;
    const spare = this.spare;
    this.spare = null;
    const p = spare ? await spare : null;
    if (p) await this.dispose(p, true);
    const b = this.browser ?? (this.launching ? await this.launching.catch(() => null) : null);
    this.browser = null;
    await Promise.allSettled([b?.close(), this.dispatcher.close()]);
  }

  /** For tests: the current browser process, if any. */
  get current(): Browser | null {
    return this.browser;
  }
}

const sleep = (ms: number) => new Promise<void>((r) => setTimeout(r, ms).unref?.());

/**
 * Bounds a page call that has no timeout of its own (page.evaluate, ownerFrame) by the action
 * timeout. A page whose script never yields takes the renderer's thread for good: without a bound
 * the call, the browser slot and a core spinning in that renderer were held until the run's
 * deadline. The timeout is Playwright's own error, so the step fails as `browser_timeout`, and the
 * run's end closes the context (and with it the renderer).
 */
function bounded<T>(work: Promise<T>, ms = ACTION_TIMEOUT_MS): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const expired = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new pwErrors.TimeoutError(`Timeout ${ms}ms exceeded: the page did not answer`)), ms);
  });
  work.catch(() => undefined);
  return Promise.race([work, expired]).finally(() => clearTimeout(timer));
}

/** Runs `fn`, rejecting as soon as `signal` aborts (the work itself is cleaned up by the caller). */
async function untilAborted<T>(signal: AbortSignal, fn: () => Promise<T>): Promise<T> {
  if (signal.aborted) throw new ServiceError('execution_timeout', 'The website task did not finish within its time limit');
  let onAbort!: () => void;
  const aborted = new Promise<never>((_, reject) => {
    onAbort = () => reject(new ServiceError('execution_timeout', 'The website task did not finish within its time limit'));
    signal.addEventListener('abort', onAbort, { once: true });
  });
  const work = fn();
  work.catch(() => undefined);
  try {
    return await Promise.race([work, aborted]);
  } finally {
    signal.removeEventListener('abort', onAbort);
  }
}

function contextOptions() {
  return {
    serviceWorkers: 'block' as const,
    acceptDownloads: false,
    javaScriptEnabled: true,
    locale: 'en-GB',
    timezoneId: 'UTC',
    viewport: { width: 1280, height: 900 },
    userAgent: 'Mozilla/5.0 (X11; Linux x86_64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/140.0 Safari/537.36 WorkflowQueryService/0.1',
  };
}

/** What the run's proxy refused, kept small however many requests a page makes. */
export class Refusals {
  count = 0;
  firstPrivate: ProxyRefusal | null = null;
  private readonly recent: Array<{ n: number; r: ProxyRefusal }> = [];

  add(r: ProxyRefusal): void {
    this.count++;
    if (r.reason === 'destination_refused') this.firstPrivate ??= r;
    this.recent.push({ n: this.count, r });
    if (this.recent.length > 20) this.recent.shift();
  }

  /** The first refusal after `mark` (a count read earlier) that is still remembered. */
  since(mark: number): ProxyRefusal | undefined {
    return this.recent.find((x) => x.n > mark)?.r;
  }
}

export class BrowserDriver implements Driver {
  readonly engine = 'browser' as const;
  private lastStatus: number | null = null;
  private currentStep = '';

  constructor(
    private readonly page: Page,
    private readonly checkUrl: UrlCheck,
    /** Filled by the run's proxy as it refuses connections. */
    private readonly refusals: Refusals,
    private readonly http: HttpDriver,
  ) {}

  /** A private destination anywhere in the run (a page's script, a redirect, a WebSocket) fails it. */
  assertNoPrivateRefusal(): void {
    const r = this.refusals.firstPrivate;
    if (r) throw refused(r.host, this.currentStep);
  }

  /** The page itself may only be on a declared host (a redirect elsewhere was refused by the proxy). */
  private assertPageAllowed(step: string): void {
    const raw = this.page.url();
    if (!/^https?:/i.test(raw)) return;
    try {
      this.checkUrl(new URL(raw), step);
    } catch (e) {
      throw afterSending(e); // the page got there after the step's request was sent
    }
  }

  private async pw<T>(step: string, what: string, fn: () => Promise<T>): Promise<T> {
    this.currentStep = step;
    const mark = this.refusals.count;
    let result: T;
    try {
      result = await fn();
    } catch (e) {
      this.assertNoPrivateRefusal();
      if (e instanceof ServiceError) throw e;
      const msg = String((e as Error)?.message ?? e);
      const net = NET_ERROR_RE.exec(msg)?.[1];
      // A connection the proxy refused during this step explains a network error.
      const mine = this.refusals.since(mark);
      if (mine && net) throw refusalError(mine, step);
      if (e instanceof pwErrors.TimeoutError)
        throw new ServiceError('workflow_execution_failed', `The website did not respond in time: ${what}`, { details: { step, reason: 'browser_timeout' } });
      if (net) {
        const err = new ServiceError('workflow_execution_failed', `The website could not be reached (${net})`, { details: { step, reason: net } });
        if (NOT_SENT_NET.has(net)) notSent.add(err);
        throw err;
      }
      throw e;
    }
    this.assertNoPrivateRefusal();
    this.assertPageAllowed(step);
    return result;
  }

  private result(resp: Response | null): { status: number | null; url: string; retryAfter?: string | null } {
    const status = resp ? resp.status() : null;
    if (status !== null) this.lastStatus = status;
    return { status, url: this.page.url(), retryAfter: resp?.headers()['retry-after'] ?? null };
  }

  async navigate(url: URL, opts: { waitUntil?: LoadState; step: string; signal: AbortSignal }) {
    const resp = await this.pw(opts.step, `opening ${url.hostname}${url.pathname}`, () => this.page.goto(url.toString(), { waitUntil: opts.waitUntil ?? 'load' }));
    return this.result(resp);
  }

  /**
   * The rendered DOM, serialized as page.content() does, but handed over only within the HTTP
   * engine's body bound: a page's script can grow its document far past what a website may send
   * (8 MB of markup made in a moment), and reading that would hold the worker's thread for seconds.
   */
  async snapshot(): Promise<PageSnapshot | null> {
    const url = this.page.url();
    if (!url || url === 'about:blank') return null;
    const step = this.currentStep;
    const html = await this.pw(step, 'reading the page', () =>
      bounded(
        this.page.evaluate((max) => {
          let s = document.doctype ? new XMLSerializer().serializeToString(document.doctype) : '';
          if (document.documentElement) s += document.documentElement.outerHTML;
          return s.length > max ? null : s;
        }, MAX_BODY_BYTES),
      ),
    );
    if (html === null) {
      const host = new URL(url).hostname;
      throw new ServiceError('upstream_http_error', `The website's page on ${host} is larger than ${MAX_BODY_BYTES} characters`, { details: { step, host, reason: 'response_too_large' } });
    }
    return { url, status: this.lastStatus, html };
  }

  pageUrl(): string {
    return this.page.url();
  }

  async fill(selector: string, value: string, step: string, target?: (host: string) => void): Promise<void> {
    await this.pw(step, `filling ${selector}`, () => this.onElement(selector, target, (el) => el.fill(value)));
  }

  async select(selector: string, choice: { value?: string; label?: string }, step: string, target?: (host: string) => void): Promise<void> {
    await this.pw(step, `choosing in ${selector}`, () =>
      this.onElement(selector, target, (el) => el.selectOption(choice.value !== undefined ? { value: choice.value } : { label: choice.label! })),
    );
  }

  /**
   * Acts on the element `selector` finds, once `target` has accepted the host of its document. The
   * interpreter checks the page's host when the step begins, but a locator waits for its element
   * (up to the action timeout) and the page may meanwhile go to another host (a client-side
   * redirect, a meta refresh), or the element may be in a frame of another host: a value meant
   * for one site would be typed into another's page. An element handle belongs to one document:
   * if that document goes away between the check and the action, the action fails instead of
   * typing into the next one. An element that a page re-renders meanwhile is found again.
   */
  private async onElement(selector: string, target: ((host: string) => void) | undefined, act: (el: ElementHandle) => Promise<unknown>): Promise<void> {
    for (let attempt = 1; ; attempt++) {
      const el = await this.page.locator(selector).first().elementHandle();
      try {
        if (target) {
          // A frame without a URL of its own (about:blank, about:srcdoc) holds its parent's document's origin.
          let frame = await bounded(el.ownerFrame());
          while (frame && !/^https?:/i.test(frame.url()) && frame.parentFrame()) frame = frame.parentFrame();
          const url = frame?.url() ?? '';
          let host = '';
          try {
            host = new URL(url).hostname.toLowerCase();
          } catch {
            // about:blank, a frame without a document: no site's host
          }
          target(host);
        }
        await act(el);
        return;
      } catch (e) {
        if (attempt >= 3 || e instanceof ServiceError || !/not attached to the DOM/i.test(String((e as Error)?.message))) throw e;
      } finally {
        void el.dispose().catch(() => undefined);
      }
    }
  }

  async click(step: ClickStep, path: string) {
    if (!step.wait_for_navigation) {
      await this.pw(path, `clicking ${step.selector}`, () => this.page.locator(step.selector).first().click());
      return null;
    }
    const resp = await this.pw(path, `clicking ${step.selector} and waiting for the next page`, async () => {
      const nav = this.page.waitForNavigation({ waitUntil: 'load' });
      nav.catch(() => undefined);
      await this.page.locator(step.selector).first().click();
      return nav;
    });
    return this.result(resp);
  }

  async wait(step: WaitStep, rendered: { url_contains?: string }, path: string): Promise<void> {
    const timeout = step.timeout_ms ?? ACTION_TIMEOUT_MS;
    if (step.selector) {
      const sel = step.selector;
      await this.pw(path, `waiting for ${sel}`, () => this.page.locator(sel).first().waitFor({ state: step.state ?? 'visible', timeout }));
    }
    if (step.load_state) {
      const ls = step.load_state;
      await this.pw(path, `waiting for ${ls}`, () => this.page.waitForLoadState(ls, { timeout }));
    }
    if (rendered.url_contains !== undefined) {
      const part = rendered.url_contains;
      await this.pw(path, `waiting for the address to contain ${part}`, () => this.page.waitForURL((u) => u.toString().includes(part), { timeout }));
    }
  }

  async clickNext(selector: string, waitFor: string | undefined, path: string): Promise<void> {
    await this.pw(path, `clicking ${selector}`, async () => {
      await this.page.locator(selector).first().click();
      if (waitFor) await this.page.locator(waitFor).first().waitFor({ state: 'attached' });
      else await this.page.waitForLoadState('networkidle');
    });
  }

  /** `request` steps in a browser recipe go through the HTTP engine, with the context's cookies (`ContextCookies`). */
  async request(spec: HttpRequestSpec, signal: AbortSignal): Promise<HttpResponseData> {
    return this.http.request(spec, signal);
  }
}

/** Playwright's latest expiry (year 9999): a later one is refused by addCookies. */
const MAX_EXPIRES_S = 253_402_300_799;

/**
 * The cookies of `request` steps in a browser recipe: the context's own, so the page and the
 * requests share one session, on every hop of a redirect. What is sent comes from
 * `context.cookies(url)`, which matches domain, path and Secure against the hop's URL. What a website
 * sets is first judged by tough-cookie with the HTTP engine's rules (`addCookies` itself would take a
 * cookie for any domain), then added with every attribute the line had: host-only or Domain,
 * Path, Secure, HttpOnly (the page's scripts must not read what the site meant them not to),
 * SameSite and expiry; a line that expires a cookie removes it. The size and header bounds and the
 * SameSite rule of http-engine.ts hold here too; the count bounds are Chromium's own (180 per
 * domain, 3000 in all), for a context that lives one run.
 */
export class ContextCookies implements RunCookies {
  constructor(private readonly context: BrowserContext) {}

  async header(url: URL, sameSite: SameSiteContext): Promise<string> {
    const cookies = await this.context.cookies(url.href);
    // The same SameSite rule as the HTTP engine's jar: a cross-site hop leaves Strict cookies behind (and Lax ones unless GET or HEAD).
    const allowed = (c: (typeof cookies)[number]) => sameSite === 'strict' || (c.sameSite !== 'Strict' && (sameSite === 'lax' || c.sameSite !== 'Lax'));
    return boundedCookieHeader(cookies.filter(allowed).map((c) => (c.name ? `${c.name}=${c.value}` : c.value)));
  }

  async store(url: URL, lines: string[]): Promise<void> {
    const judge = newCookieJar();
    const now = new Date();
    const cookies: Array<Parameters<BrowserContext['addCookies']>[0][number]> = [];
    for (const line of lines) {
      // Chromium refuses these too; judged here so both engines keep the same bound.
      if (!cookieLineFits(line)) continue;
      let c: Cookie | undefined;
      try {
        c = judge.setCookieSync(line, url.href, { ignoreError: true, now });
      } catch {
        continue;
      }
      if (!c?.domain || !c.path) continue;
      const at = c.expiryTime(now); // ms; undefined for a session cookie
      const sameSite = c.sameSite === 'strict' ? 'Strict' : c.sameSite === 'lax' ? 'Lax' : c.sameSite === 'none' ? 'None' : undefined;
      cookies.push({
        name: c.key,
        value: c.value,
        // Playwright's spelling: a leading dot for a Domain cookie, the bare host for a host-only one.
        domain: c.hostOnly ? c.domain : `.${c.domain}`,
        path: c.path,
        // 1 s after 1970 for an expired one: Chromium then removes the cookie it replaces.
        expires: at === undefined || at === Infinity ? -1 : at <= now.getTime() ? 1 : Math.min(Math.ceil(at / 1000), MAX_EXPIRES_S),
        httpOnly: c.httpOnly,
        secure: c.secure,
        ...(sameSite ? { sameSite } : {}),
      });
    }
    if (cookies.length === 0) return;
    // One cookie Chromium will not take must not cost the others.
    await this.context.addCookies(cookies).catch(() => Promise.all(cookies.map((c) => this.context.addCookies([c]).catch(() => undefined))));
  }
}

function refusalError(r: ProxyRefusal, step: string): ServiceError {
  if (r.reason === 'destination_refused') return refused(r.host, step);
  const err =
    r.reason === 'scheme_not_allowed'
      ? new ServiceError('workflow_execution_failed', 'Refused to open a URL that is not http or https', { details: { step, reason: r.reason } })
      : new ServiceError('workflow_execution_failed', `Refused to reach ${r.host}: the operation may not reach it`, { details: { step, host: r.host, reason: r.reason } });
  return err;
}

// Browser refusals are never "not sent": the proxy may refuse a redirect hop or a request of the
// next page after the step's own request reached the website (an action's outcome is then unknown).
function refused(host: string, step: string): ServiceError {
  return new ServiceError('workflow_execution_failed', `Refused to connect to ${host}: private, loopback and link-local destinations are not allowed`, {
    details: { step, host, reason: 'destination_refused' },
  });
}
