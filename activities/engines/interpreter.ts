// The recipe interpreter shared by both engines. It renders templates, enforces the recipe's host
// list, maps statuses and failures to catalog codes, runs extraction, pagination, conditions and
// output assembly. An engine supplies a Driver that performs requests and page interactions.

import { ServiceError } from '../../shared/errors.ts';
import type {
  ClickStep,
  Condition,
  ExtractStep,
  HttpMethod,
  LoadState,
  PaginateStep,
  Recipe,
  RequestStep,
  Step,
  WaitStep,
} from '../../shared/recipes/schema.ts';
import { TemplateError, renderHeader, renderString, renderUrl, renderValue, secretsUsed, toJson, type TemplateScope } from '../../shared/recipes/template.ts';
import { PLACEHOLDER_RE, parseReference } from '../../shared/recipes/schema.ts';
import { DEFINITE_REFUSALS, SecretMatcher, isAbortError, notSent, redactError, statusError, timeoutError } from './errors.ts';
import { domainToASCII } from 'node:url';
import { isProtectableSecret } from '../../shared/secrets.ts';
import { BAD_PORTS } from '../../shared/recipes/ports.ts';
import { BoundedList } from './value-size.ts';
import { documentSlots } from './document-slots.ts';
import { ExtractionError, extractHtmlObject, extractJsonObject, isEmptyValue, jsonPointer, loadHtml, selectIn, type CheerioDoc, type ExtractOptions } from './extract.ts';

/** The party health checks run as (organizations' runs use their organization id, `org_…`). */
export const HEALTH_PARTY = 'health';

export interface RunContext {
  signal: AbortSignal;
  heartbeat(details?: unknown): void;
  /** Connection secrets for `{{secrets.NAME}}`; never logged or returned. */
  secrets?: Record<string, string>;
  /**
   * The site of the connection each secret comes from (lower-case host): a secret's value is sent
   * to that host only. A shared workflow runs with its caller's connections; without this its
   * author could send the caller's key for one site to another site the caller also connected.
   */
  secretSites?: Record<string, string>;
  /** Stable per query, for idempotent actions (`{{run.request_ref}}`). */
  requestRef?: string;
  /** Whose run it is (the organization; `health` for health checks): browser slots are shared out fairly between them. */
  party?: string;
  /**
   * Also ends the run's waits before it reaches the website (a browser page and its context), and
   * only those: once the run has begun, `signal` alone bounds it.
   */
  startSignal?: AbortSignal;
  /**
   * Called once, synchronously, right before the first step (a browser run holds its page by then):
   * nothing has reached the website yet. Throwing there stops the run before it touches the site.
   */
  beforeSite?: () => void;
}

export interface HttpRequestSpec {
  method: HttpMethod;
  url: URL;
  headers: Record<string, string>;
  body?: string;
  /** Path of the step in the recipe, for error details. */
  step: string;
  usesSecrets: boolean;
  /** Headers (lower case) the recipe filled from a secret or a value derived from one: never sent to another origin on a redirect, whatever their name. */
  originOnly?: string[];
  /** The secret-host check of each redirect hop (`HopCheck`); absent when the run has no connection. */
  checkHop?: HopCheck;
}

/**
 * Called for each redirect hop before it is sent, with its URL and the header values and body it
 * carries: throws (`secret_not_for_host`) when the hop would take a connection's secret, or a
 * value derived from one, to a host outside its site.
 */
export type HopCheck = (url: URL, carried: Array<string | undefined>) => void;

export interface HttpResponseData {
  status: number;
  url: string;
  headers: Record<string, string | string[] | undefined>;
  body: string;
  contentType: string;
}

export interface PageSnapshot {
  url: string;
  status: number | null;
  html: string;
}

/** What an engine provides to the interpreter. Drivers throw ServiceError for network failures. */
export interface Driver {
  readonly engine: 'http' | 'browser';
  request(spec: HttpRequestSpec, signal: AbortSignal): Promise<HttpResponseData>;
  /** `checkHop`: as HttpRequestSpec's (the HTTP engine; the browser's hops are Chromium's, see the engines' README). */
  navigate(url: URL, opts: { waitUntil?: LoadState; step: string; signal: AbortSignal; checkHop?: HopCheck }): Promise<{ status: number | null; url: string; retryAfter?: string | null }>;
  /** The current document (rendered DOM in the browser); null when none is loaded. */
  snapshot(): Promise<PageSnapshot | null>;
  /** The URL of the page the browser shows now (where a fill or select sends its value). */
  pageUrl?(): string;
  /**
   * `target` is called with the host of the document holding the element, once it is found and
   * right before the value goes in (the page may have moved on since the step began): throwing
   * there stops the step before anything is typed or chosen.
   */
  fill?(selector: string, value: string, step: string, target?: (host: string) => void): Promise<void>;
  select?(selector: string, choice: { value?: string; label?: string }, step: string, target?: (host: string) => void): Promise<void>;
  click?(step: ClickStep, path: string): Promise<{ status: number | null; url: string; retryAfter?: string | null } | null>;
  wait?(step: WaitStep, rendered: { url_contains?: string }, path: string): Promise<void>;
  /** Browser: click a pagination control without href and wait. */
  clickNext?(selector: string, waitFor: string | undefined, path: string): Promise<void>;
}

/** URL check applied to every URL a recipe reaches, including redirects. */
export type UrlCheck = (url: URL, step: string) => void;

export function makeUrlCheck(hosts: string[]): UrlCheck {
  const allowed = new Set(hosts.map((h) => h.toLowerCase()));
  return (url, step) => {
    if (url.protocol !== 'http:' && url.protocol !== 'https:')
      throw new ServiceError('workflow_execution_failed', `Refused to open a ${url.protocol} URL: only http and https are allowed`, { details: { step, reason: 'scheme_not_allowed' } });
    if (url.username || url.password)
      throw new ServiceError('workflow_execution_failed', 'Refused to open a URL with credentials in it', { details: { step, reason: 'userinfo_not_allowed' } });
    const host = url.hostname.toLowerCase();
    if (!allowed.has(host)) {
      const err = new ServiceError('workflow_execution_failed', `Refused to reach ${host}: the operation may only reach ${[...allowed].join(', ')}`, {
        details: { step, host, reason: 'host_not_allowed' },
      });
      notSent.add(err);
      throw err;
    }
    if (url.port !== '' && BAD_PORTS.has(Number(url.port))) {
      const err = new ServiceError('workflow_execution_failed', `Refused to reach port ${url.port}: it belongs to another protocol (mail, file transfer, remote shells), which no browser reaches either`, {
        details: { step, host, port: Number(url.port), reason: 'port_not_allowed' },
      });
      notSent.add(err);
      throw err;
    }
  };
}

interface State {
  scope: TemplateScope;
  lastStatus: number | null;
  lastUrl: string | null;
  /** HTML from the latest `request` step parsed as HTML; page interactions clear it. */
  htmlDoc: PageSnapshot | null;
  /**
   * The page as last read from the driver (in the browser, the rendered DOM). Every step that may
   * change the page clears it, so the read steps between two such steps (fail, not_found, extract,
   * a pagination's stop check) share one read of one state of the page instead of each serializing
   * the DOM again.
   */
  page: PageSnapshot | null;
  actionsDone: number;
  currentStep: string | undefined;
  /** An action step succeeded and the steps judging its outcome are running. */
  pendingAction: boolean;
  /** Whether a step has sent a secret (a later 401/403 then means the credentials were refused). */
  secretsSent: boolean;
  /**
   * Variables holding values computed from a connection's secret (indices into secretHomes): see
   * `Interpreter.derivedFrom`. A variable not listed holds nothing derived.
   */
  derived: Map<string, Set<number>>;
  /** Secrets whose derived values the run has sent to a website: what it loads afterwards may show them back. */
  derivedSent: Set<number>;
  /**
   * Secrets a decision of the run has depended on (a condition, whether a pagination goes on, a
   * limit): everything the run sends from then on may tell them, so it goes to their sites only.
   */
  decidedBy: Set<number>;
}

/** Steps that act on the website again: reaching one settles a pending action as completed. */
const ACTING_STEPS = new Set<Step['type']>(['request', 'navigate', 'click', 'fill', 'select', 'paginate']);

/** What an HTTP field value may not hold (RFC 9110 §5.5 as undici enforces it: tab, visible ASCII and obs-text 0x80-0xFF only). */
const INVALID_HEADER_VALUE = /[^\t\x20-\x7e\x80-\xff]/;

const DEFAULT_UA = 'Mozilla/5.0 (X11; Linux x86_64) AppleWebKit/537.36 (KHTML, like Gecko) WorkflowQueryService/0.1';

/** A URL as sent and decoded (percent-escapes, and also '+' as a space), to find a value however it was spelled. */
function urlSpellings(url: URL): string[] {
  const decode = (s: string) => {
    try {
      return decodeURIComponent(s);
    } catch {
      return s;
    }
  };
  return [url.href, decode(url.href), decode(url.href.replace(/\+/g, ' '))];
}

/**
 * A value a template could not use (template.ts: too large, nested too deeply), or a website's
 * data too deep to read (extract.ts): neither module knows steps, so the interpreter names it.
 */
function valueRefusal(e: ServiceError): boolean {
  const details = e.details as { reason?: unknown; step?: unknown } | undefined;
  return (details?.reason === 'value_too_large' || details?.reason === 'document_too_complex') && details.step === undefined;
}

/** The same refusal, its details naming the recipe step it arose in. */
function atStep(e: ServiceError, step: string | undefined): ServiceError {
  return new ServiceError(e.code, e.message, { details: { step, ...(e.details as object) } });
}

export class Interpreter {
  private readonly checkUrl: UrlCheck;
  private readonly secretValues: string[];
  /** Each secret value that must stay on its connection's site(s), found in every spelling it can be sent in. */
  private readonly secretHomes: Array<{ forms: SecretMatcher; sites: Set<string> }>;
  private readonly state: State;
  /** Whether the recipe declares a host outside some secret's site (else nothing it sends can carry a secret elsewhere). */
  private readonly mayLeaveSites: boolean;

  constructor(
    private readonly recipe: Recipe,
    private readonly driver: Driver,
    input: Record<string, unknown>,
    private readonly ctx: RunContext,
    private readonly signal: AbortSignal,
  ) {
    this.checkUrl = makeUrlCheck(recipe.hosts);
    const secrets = ctx.secrets ?? {};
    this.secretValues = Object.values(secrets).filter(isProtectableSecret);
    const homes = new Map<string, Set<string>>();
    for (const [name, site] of Object.entries(ctx.secretSites ?? {})) {
      const value = secrets[name];
      if (!isProtectableSecret(value)) continue;
      let sites = homes.get(value);
      if (!sites) homes.set(value, (sites = new Set()));
      sites.add(siteHost(site));
    }
    this.secretHomes = [...homes].map(([value, sites]) => ({ forms: new SecretMatcher([value]), sites }));
    this.mayLeaveSites = this.secretHomes.some(({ sites }) => recipe.hosts.some((h) => !underSite(siteHost(h), sites)));
    this.state = {
      scope: { input, vars: Object.create(null) as Record<string, unknown>, secrets, run: { request_ref: ctx.requestRef } },
      lastStatus: null,
      lastUrl: null,
      htmlDoc: null,
      page: null,
      actionsDone: 0,
      currentStep: undefined,
      secretsSent: false,
      pendingAction: false,
      derived: new Map(),
      derivedSent: new Set(),
      decidedBy: new Set(),
    };
  }

  get urlCheck(): UrlCheck {
    return this.checkUrl;
  }

  async run(): Promise<unknown> {
    try {
      await this.runSteps(this.recipe.steps, '');
      // The output is no step: a failure rendering it names none.
      this.state.currentStep = undefined;
      const out = renderValue(this.recipe.output, this.state.scope);
      return out === undefined ? null : out;
    } catch (e) {
      throw redactError(this.toServiceError(e), this.secretValues);
    } finally {
      this.letGoOfDocs();
    }
  }

  // ----------------------------------------------------------------------------------------

  private toServiceError(e: unknown): ServiceError {
    const step = this.state.currentStep;
    if (this.signal.aborted || isAbortError(e)) {
      if (e instanceof ServiceError && e.code !== 'workflow_execution_failed') return e;
      return timeoutError(step);
    }
    if (e instanceof ServiceError) return valueRefusal(e) && step !== undefined ? atStep(e, step) : e;
    if (e instanceof TemplateError) {
      if (e.kind === 'missing_secret') {
        const err = new ServiceError('credentials_missing', `The connection value ${e.ref} that this operation needs is missing`, { details: { name: e.ref } });
        notSent.add(err);
        return err;
      }
      return new ServiceError('internal_error', `Recipe template error: ${e.message}`, { details: { step } });
    }
    if (e instanceof ExtractionError) return new ServiceError('workflow_execution_failed', `The website's page could not be read: ${e.message}`, { details: { step } });
    const name = (e as Error)?.name;
    if (name === 'TypeError' || name === 'ReferenceError' || name === 'RangeError' || name === 'SyntaxError')
      return new ServiceError('internal_error', 'Unexpected error while running the recipe', { details: { step } });
    // Anything else comes from the website or the browser (timeouts waiting for an element, a
    // crashed page): the task could not be carried out on the website.
    const msg = String((e as Error)?.message ?? e).split('\n')[0]!.slice(0, 300);
    return new ServiceError('workflow_execution_failed', `The website task could not be completed: ${msg}`, { details: { step } });
  }

  private async runSteps(steps: Step[], prefix: string): Promise<void> {
    for (let i = 0; i < steps.length; i++) {
      const step = steps[i]!;
      const path = prefix ? `${prefix}.${i}` : String(i);
      this.state.currentStep = path;
      if (this.state.pendingAction && (step.action || ACTING_STEPS.has(step.type))) this.settlePending();
      try {
        if (this.signal.aborted) throw timeoutError(path);
        this.ctx.heartbeat({ step: path, type: step.type, name: step.name });
        await this.runStep(step, path);
      } catch (e) {
        throw this.actionAware(this.toServiceError(e), step, path);
      }
      if (step.action) this.state.pendingAction = true;
    }
    if (!prefix) this.settlePending();
  }

  private settlePending(): void {
    if (this.state.pendingAction) this.state.actionsDone++;
    this.state.pendingAction = false;
  }

  /**
   * Action semantics. A failure during an action step whose outcome is uncertain is
   * action_unconfirmed. The steps right after an action (wait, extract, set, fail, not_found)
   * judge its outcome: a clear refusal there keeps its code, anything else is action_unconfirmed.
   * Once an action is settled, any later failure is workflow_partially_completed.
   */
  private actionAware(err: ServiceError, step: Step, path: string): ServiceError {
    if (step.type === 'paginate' || err.code === 'action_unconfirmed' || err.code === 'workflow_partially_completed') return err;
    const label = step.name ?? step.type;
    const definite = DEFINITE_REFUSALS.has(err.code) || notSent.has(err);
    const partial = () =>
      new ServiceError('workflow_partially_completed', `An earlier step changed something on the website before "${label}" failed; check the website`, {
        details: { step: path, cause: err.code, completed_actions: this.state.actionsDone },
      });
    const unconfirmed = () =>
      new ServiceError('action_unconfirmed', `The outcome of "${label}" could not be confirmed; check the website before trying again`, {
        details: { step: path, cause: err.code },
      });
    if (step.action) {
      if (!definite) return unconfirmed();
      return this.state.actionsDone > 0 || this.state.pendingAction ? partial() : err;
    }
    if (this.state.pendingAction) {
      if (definite && (step.type === 'fail' || step.type === 'not_found')) return this.state.actionsDone > 0 ? partial() : err;
      return unconfirmed();
    }
    return this.state.actionsDone > 0 ? partial() : err;
  }

  private async runStep(step: Step, path: string): Promise<void> {
    if (step.type !== 'paginate' && secretsUsed(step).size > 0) this.state.secretsSent = true;
    switch (step.type) {
      case 'request':
        return this.request(step, path);
      case 'navigate': {
        const url = this.resolveUrl(step.url, path);
        this.assertSecretsStayHome(url.hostname, () => urlSpellings(url), path, step.url);
        this.letGoOfDocs();
        const res = await this.driver.navigate(url, { waitUntil: step.wait_until, step: path, signal: this.signal, checkHop: this.hopCheck(path) });
        this.afterPageChange(res);
        const snap = await this.pageSnapshot();
        if (snap) detectChallenge(snap.html, url.hostname, path);
        this.checkStatus(res.status, url, step, path, this.state.secretsSent, res.retryAfter);
        return;
      }
      case 'fill': {
        this.needBrowser(step.type);
        await this.elementDecides();
        this.pageMayChange();
        const value = renderString(step.value, this.state.scope);
        this.assertSecretsStayHome(() => this.pageHost(), () => [value], path, step.value);
        return this.driver.fill!(step.selector, value, path, (host) => this.assertSecretsStayHome(host, () => [value], path, step.value));
      }
      case 'select': {
        this.needBrowser(step.type);
        await this.elementDecides();
        this.pageMayChange();
        const choice = { value: step.value !== undefined ? renderString(step.value, this.state.scope) : undefined, label: step.label !== undefined ? renderString(step.label, this.state.scope) : undefined };
        this.assertSecretsStayHome(() => this.pageHost(), () => [choice.value, choice.label], path, [step.value, step.label]);
        return this.driver.select!(step.selector, choice, path, (host) => this.assertSecretsStayHome(host, () => [choice.value, choice.label], path, [step.value, step.label]));
      }
      case 'click': {
        this.needBrowser(step.type);
        await this.elementDecides();
        this.pageMayChange();
        const res = await this.driver.click!(step, path);
        if (res) {
          this.afterPageChange(res);
          this.checkStatus(res.status, new URL(res.url), step, path, this.state.secretsSent, res.retryAfter);
        } else await this.elementDecides();
        return;
      }
      case 'wait':
        this.needBrowser(step.type);
        if (step.selector) await this.elementDecides();
        this.pageMayChange();
        // Whether the address comes to hold a derived value (else the run fails) decides whether the run goes on.
        if (step.url_contains !== undefined) this.decided([...this.derivedFrom(step.url_contains), ...this.state.derivedSent]);
        await this.driver.wait!(step, { url_contains: step.url_contains !== undefined ? renderString(step.url_contains, this.state.scope) : undefined }, path);
        if (step.selector) await this.elementDecides();
        return;
      case 'extract':
        return this.extract(step);
      case 'set':
        this.state.scope.vars[step.var] = renderValue(step.value, this.state.scope);
        this.markDerived(step.var, this.derivedFrom(step.value));
        return;
      case 'paginate':
        return this.paginate(step, path);
      case 'not_found':
        if (await this.holds(step.when)) {
          throw new ServiceError('not_found', step.message ? renderString(step.message, this.state.scope) : 'The website has no match for the input', { details: { step: path } });
        }
        return;
      case 'fail':
        if (await this.holds(step.when)) {
          throw new ServiceError(step.code, step.message ? renderString(step.message, this.state.scope) : undefined, { details: { step: path } });
        }
        return;
    }
  }

  /** The host of the page a fill or select acts on ('' when none is loaded). */
  private pageHost(): string {
    try {
      return new URL(this.driver.pageUrl?.() ?? this.state.lastUrl ?? '').hostname.toLowerCase();
    } catch {
      return '';
    }
  }

  /**
   * A connection's secret is sent only to its connection's site (or a host under it): refused (before anything is sent)
   * when any of the `outgoing` texts going to `host` carries, in any spelling, a secret of a connection for
   * another site, whether the step names the secret or a variable holding it.
   */
  private assertSecretsStayHome(host: string | (() => string), outgoing: () => Array<string | undefined>, path: string, templates: unknown): void {
    // Most runs use no connection: then nothing is decoded or gathered on the request path.
    if (this.secretHomes.length === 0) return;
    this.secretsStay(typeof host === 'string' ? host : host(), outgoing(), this.derivedFrom(templates), path);
  }

  /**
   * The secret-host check of a redirect hop (undefined when the run has no connection). A hop's URL
   * is the website's answer to what the run sent: a site with an open redirect passes a secret, or
   * a value derived from one, on to another declared host (`/go?to=http://b/?k=…`), and a
   * same-origin hop carries the step's headers and body again. So each hop is checked like the
   * step's own request, on what it carries; and its URL, read from a website after the run sent it
   * derived values (this step's included), is derived from them like any answer read then, as a
   * next link read from a page is. Judged when the hop is about to be sent: what the run has sent
   * and decided by then.
   */
  private hopCheck(path: string): HopCheck | undefined {
    if (this.secretHomes.length === 0) return undefined;
    return (url, carried) => this.secretsStay(url.hostname, [...urlSpellings(url), ...carried], new Set(this.state.derivedSent), path);
  }

  /** assertSecretsStayHome's check of `outgoing` texts going to `host`, carrying values derived from the secrets `derived` (indices into secretHomes) besides those the run decided on. */
  private secretsStay(host: string, outgoing: Array<string | undefined>, derived: Set<number>, path: string): void {
    const to = siteHost(host);
    const texts = outgoing.filter((t): t is string => !!t);
    const lower = texts.map((t) => t.toLowerCase());
    for (const i of this.state.decidedBy) derived.add(i);
    for (const [i, { forms, sites }] of this.secretHomes.entries()) {
      // The site itself or a host under it (a key for example.com used on api.example.com).
      if (underSite(to, sites)) continue;
      const carried = texts.some((t, j) => forms.holds(t, lower[j]));
      if (!carried && !derived.has(i)) continue;
      const what = carried ? "a connected account's or access key's secret" : "what the run read from, or decided on, a connected account's or access key's secret";
      const err = new ServiceError('workflow_execution_failed', `Refused to send ${what} to ${to || 'a page that is not loaded'}: it is sent only to ${[...sites].join(', ')}`, {
        details: { step: path, host: to, reason: 'secret_not_for_host' },
      });
      notSent.add(err);
      throw err;
    }
    for (const i of derived) this.state.derivedSent.add(i);
  }

  /**
   * Values computed from a secret. Extraction can turn a secret into text holding none of its
   * spellings (a field's pattern cutting out a piece or one character, a selector answering
   * whether it begins with "a", whitespace collapsed), which the spelling check above would let
   * through to any host. So a variable an extract step fills from a source holding a connection's
   * secret (in any spelling), or from a variable already derived from one, is derived from that
   * secret, and so is every variable built from it (set, pagination, a cursor) and every answer
   * read after the run sent such a value to a website (which may show it back). A step whose
   * templates name a derived variable may send to the secret's site only. Only runs with
   * connections track anything.
   */
  private derivedFrom(templates: unknown): Set<number> {
    const out = new Set<number>();
    if (this.secretHomes.length === 0 || this.state.derived.size === 0) return out;
    const visit = (v: unknown): void => {
      if (typeof v === 'string') {
        for (const m of v.matchAll(PLACEHOLDER_RE)) {
          const ref = parseReference(m[1] ?? '');
          if (ref?.namespace !== 'vars') continue;
          for (const i of this.state.derived.get(String(ref.path[0])) ?? []) out.add(i);
        }
      } else if (Array.isArray(v)) v.forEach(visit);
      else if (v && typeof v === 'object') Object.values(v).forEach(visit);
    };
    visit(templates);
    return out;
  }

  /** The secrets (indices into secretHomes) a text or JSON value holds in any spelling. Iterative: a site's JSON may nest deep. */
  private secretsIn(value: unknown, out = new Set<number>()): Set<number> {
    if (this.secretHomes.length === 0) return out;
    const stack: unknown[] = [value];
    while (stack.length > 0 && out.size < this.secretHomes.length) {
      const v = stack.pop();
      const texts: string[] = [];
      if (typeof v === 'string') texts.push(v);
      else if (Array.isArray(v)) for (const x of v) stack.push(x); // never push(...v): a site's array of a million items is past the arguments limit
      else if (v && typeof v === 'object')
        for (const [k, x] of Object.entries(v)) {
          texts.push(k);
          stack.push(x);
        }
      for (const t of texts) {
        const lower = t.toLowerCase();
        this.secretHomes.forEach(({ forms }, i) => forms.holds(t, lower) && out.add(i));
      }
    }
    return out;
  }

  /**
   * The secrets what a condition reads may depend on: its variable, its template, or what a website
   * answered (the page, its address, the status), which may show back what the run sent it.
   */
  private async conditionSources(c: Condition): Promise<Set<number>> {
    const out = new Set<number>();
    const vars = this.state.scope.vars;
    if (!('empty' in c) && !('missing' in c)) for (const i of this.state.derivedSent) out.add(i);
    if ('selector_present' in c || 'selector_absent' in c || 'text_contains' in c) this.secretsIn((await this.currentDoc()).html, out);
    if ('text_contains' in c || 'url_contains' in c) for (const i of this.derivedFrom(c)) out.add(i);
    if ('url_contains' in c) this.secretsIn(this.state.htmlDoc?.url ?? (await this.pageSnapshot())?.url ?? this.state.lastUrl ?? '', out);
    const name = 'empty' in c ? c.empty : 'missing' in c ? c.missing.var : undefined;
    if (name !== undefined) {
      for (const i of this.state.derived.get(name) ?? []) out.add(i);
      this.secretsIn(vars[name], out);
    }
    return out;
  }

  /**
   * A browser step's selector questions the page: the step finds its element, or it fails the run
   * when its time is up. With a literal selector such as `[data-key^="sk_a"]` on a page showing a
   * secret, whether the run goes on (to another host, say) tells a character of it, a bit per
   * run, as a condition would. So a `click`, `fill`, `select` or a `wait` for a selector on a page
   * that shows a connection's secret in any spelling, or after the run sent a value derived from one
   * (the page may show it back), is a decision on that secret: the page is read before the step, and
   * after a `wait` or a click that stayed on its page (the element waited for may have come with the
   * secret). Only runs that may reach a host outside a secret's site read anything.
   */
  private async elementDecides(): Promise<void> {
    if (!this.mayLeaveSites) return;
    const by = new Set(this.state.derivedSent);
    const snap = await this.pageSnapshot();
    if (snap) this.secretsIn(snap.html, by);
    this.decided(by);
  }

  private decided(by: Iterable<number> | undefined): void {
    for (const i of by ?? []) this.state.decidedBy.add(i);
  }

  /** Every spelling of every secret of the run (connected or not), made when first needed. */
  private secretForms: SecretMatcher | null = null;

  /** Whether a text holds one of the run's secrets in any spelling. */
  private holdsSecret(text: string | undefined): boolean {
    if (!text || this.secretValues.length === 0) return false;
    this.secretForms ??= new SecretMatcher(this.secretValues);
    return this.secretForms.holds(text);
  }

  private markDerived(name: string, from: Set<number>): void {
    if (from.size > 0) this.state.derived.set(name, from);
    else this.state.derived.delete(name);
  }

  private needBrowser(type: string): void {
    if (this.driver.engine !== 'browser') throw new ServiceError('internal_error', `Step "${type}" needs the browser engine`);
  }

  /** A step is about to act on the page: what was read of it no longer holds. */
  private pageMayChange(): void {
    this.letGoOfDocs();
    this.state.htmlDoc = null;
    this.state.page = null;
  }

  private afterPageChange(res: { status: number | null; url: string }): void {
    this.pageMayChange();
    if (res.status !== null) this.state.lastStatus = res.status;
    this.state.lastUrl = res.url;
  }

  private resolveUrl(template: string, path: string): URL {
    let text: string;
    try {
      text = renderUrl(template, this.state.scope);
    } catch (e) {
      if (e instanceof ServiceError && e.code === 'invalid_provider_input') throw atStep(e, path);
      throw e;
    }
    let url: URL;
    try {
      url = this.state.lastUrl ? new URL(text, this.state.lastUrl) : new URL(text);
    } catch {
      throw new ServiceError('workflow_execution_failed', 'The recipe produced an invalid URL', { details: { step: path, reason: 'invalid_url' } });
    }
    this.checkUrl(url, path);
    return url;
  }

  private checkStatus(
    status: number | null,
    url: URL,
    step: { expect_status?: number[]; not_found_status?: number[] },
    path: string,
    usesSecrets: boolean,
    retryAfter?: string | null,
  ): void {
    if (status === null) return;
    if (step.not_found_status?.includes(status)) throw new ServiceError('not_found', 'The website has no match for the input', { details: { step: path, upstream_status: status } });
    const ok = step.expect_status ? step.expect_status.includes(status) : status >= 200 && status < 300;
    if (ok) return;
    throw statusError({ status, host: url.hostname, path: url.pathname, step: path, usesSecrets, retryAfter });
  }

  private async request(step: RequestStep, path: string): Promise<void> {
    // A request may change what the site shows (in the browser, the page's cookies too).
    this.state.page = null;
    const scope = this.state.scope;
    const url = this.resolveUrl(step.url, path);
    for (const [k, v] of Object.entries(step.query ?? {})) {
      const r = renderValue(v, scope);
      if (r === undefined || r === null || r === '') continue;
      url.searchParams.append(k, typeof r === 'object' ? toJson(r) : String(r));
    }
    const usesSecrets = this.state.secretsSent;
    const headers: Record<string, string> = { 'user-agent': DEFAULT_UA };
    headers.accept = step.parse === 'json' ? 'application/json' : step.parse === 'html' ? 'text/html,application/xhtml+xml' : '*/*';
    let body: string | undefined;
    if (step.json !== undefined) {
      body = toJson(renderValue(step.json, scope) ?? null);
      headers['content-type'] = 'application/json';
    } else if (step.form !== undefined) {
      const form = new URLSearchParams();
      for (const [k, v] of Object.entries(step.form)) {
        const r = renderValue(v, scope);
        if (r === undefined || r === null) continue;
        form.append(k, typeof r === 'object' ? toJson(r) : String(r));
      }
      body = form.toString();
      headers['content-type'] = 'application/x-www-form-urlencoded';
    }
    for (const [k, v] of Object.entries(step.headers ?? {})) {
      const value = renderHeader(v, scope);
      // An HTTP field value holds tabs, visible ASCII and Latin-1 only (undici refuses anything else
      // as it sends): an input with a control character or U+2028 in it cannot be sent as the
      // recipe says. Refused here, before anything is sent, as the input's fault (never a
      // retryable network error, nor an action whose outcome is unknown). The value is not named.
      if (INVALID_HEADER_VALUE.test(value)) {
        const err = new ServiceError('invalid_provider_input', `The value of the ${k.toLowerCase()} header holds a character an HTTP header cannot carry`, {
          details: { step: path, header: k.toLowerCase(), reason: 'invalid_header_value' },
        });
        notSent.add(err);
        throw err;
      }
      headers[k.toLowerCase()] = value;
    }
    const refs = [step.url, step.query, step.json, step.form, step.headers];
    this.assertSecretsStayHome(url.hostname, () => [...urlSpellings(url), body, ...Object.values(headers)], path, refs);
    // A redirect to another origin keeps a few harmless headers (accept, user-agent, ...): not when
    // the recipe filled one from a secret, which goes to its own origin only.
    const originOnly = Object.entries(step.headers ?? {})
      .filter(([k, v]) => secretsUsed(v).size > 0 || this.derivedFrom(v).size > 0 || this.holdsSecret(headers[k.toLowerCase()]))
      .map(([k]) => k.toLowerCase());
    this.letGoOfDocs();
    const res = await this.driver.request({ method: step.method ?? 'GET', url, headers, body, step: path, usesSecrets, originOnly, checkHop: this.hopCheck(path) }, this.signal);
    this.state.lastStatus = res.status;
    this.state.lastUrl = res.url;
    if (step.save_status_as) {
      scope.vars[step.save_status_as] = res.status;
      this.markDerived(step.save_status_as, new Set(this.state.derivedSent));
    }
    this.checkStatus(res.status, new URL(res.url), step, path, usesSecrets, headerValue(res.headers['retry-after']));
    const kind = step.parse ?? (/json/i.test(res.contentType) ? 'json' : /html|xml/i.test(res.contentType) ? 'html' : 'text');
    let value: unknown = res.body;
    if (kind === 'json') {
      if (res.body.trim() === '') value = null;
      else {
        try {
          value = JSON.parse(res.body);
        } catch {
          throw new ServiceError('upstream_http_error', `The website returned a response that is not valid JSON (${url.hostname}${url.pathname})`, {
            details: { step: path, host: url.hostname, path: url.pathname, upstream_status: res.status },
          });
        }
      }
    } else if (kind === 'html') {
      this.state.htmlDoc = { url: res.url, status: res.status, html: res.body };
      this.state.lastUrl = res.url;
      detectChallenge(res.body, url.hostname, path);
    }
    if (step.save_as) {
      scope.vars[step.save_as] = value;
      // What a website answers after being sent derived values may show them back.
      this.markDerived(step.save_as, new Set(this.state.derivedSent));
    }
  }

  /** The driver's page, read once per state of it (see State.page); null when none is loaded. */
  private async pageSnapshot(): Promise<PageSnapshot | null> {
    if (this.state.page) return this.state.page;
    const snap = await this.driver.snapshot();
    this.state.page = snap;
    return snap;
  }

  /**
   * The page parsed once, however many steps read it (extraction never changes it), until the run
   * lets go of it (letGoOfDocs) before it waits for the website again.
   */
  private parsedDoc: { snap: PageSnapshot; $: Promise<CheerioDoc> } | null = null;
  /** The run's document slot (document-slots.ts), held while it holds a parsed page. */
  private docSlot: (() => void) | null = null;

  private parsed(doc: PageSnapshot): Promise<CheerioDoc> {
    if (this.parsedDoc?.snap === doc) return this.parsedDoc.$;
    const $ = this.loadHtml(doc.html);
    this.parsedDoc = { snap: doc, $ };
    return $;
  }

  /**
   * A page too complex to parse within the bounds (extract.ts) names the step that read it. The
   * parse gives the thread back between slices; a run ended meanwhile stops it. It waits for one of
   * the process's document slots first (fairly between organizations; the run's signal ends the wait).
   */
  private async loadHtml(html: string): Promise<CheerioDoc> {
    this.docSlot ??= await documentSlots().acquire(this.signal, this.ctx.party);
    try {
      return await loadHtml(html, this.signal);
    } catch (e) {
      if (!(e instanceof ServiceError)) throw e;
      throw atStep(e, this.state.currentStep);
    }
  }

  /** Before the run waits for the website (or ends): its parsed page goes, and its slot to another run. */
  private letGoOfDocs(): void {
    this.parsedDoc = null;
    const release = this.docSlot;
    this.docSlot = null;
    release?.();
  }

  private async currentDoc(): Promise<PageSnapshot> {
    if (this.state.htmlDoc) return this.state.htmlDoc;
    const snap = await this.pageSnapshot();
    if (!snap) throw new ServiceError('internal_error', 'The recipe reads a page before loading one', { details: { step: this.state.currentStep } });
    return snap;
  }

  private extractOptions(): ExtractOptions {
    return {
      // a list limit given as a template of an optional input that was left out means no limit
      resolveLimit: (limit) => this.resolveLimit(limit, Number.POSITIVE_INFINITY),
    };
  }

  private resolveLimit(limit: number | string, fallback?: number): number {
    if (typeof limit === 'number') return limit;
    const v = renderValue(limit, this.state.scope);
    if ((v === undefined || v === null || v === '') && fallback !== undefined) return fallback;
    const n = typeof v === 'number' ? v : Number(v);
    if (!Number.isFinite(n)) throw new ServiceError('invalid_provider_input', `The limit "${limit}" is not a number`, { details: { step: this.state.currentStep } });
    return Math.max(0, Math.floor(n));
  }

  private async extract(step: ExtractStep): Promise<void> {
    const from = step.from ?? 'page';
    // Whatever this step reads is derived from the secrets its source holds (see derivedFrom).
    const source = from === 'page' ? null : this.state.scope.vars[from.var];
    const derived = from === 'page' ? new Set(this.state.derivedSent) : new Set(this.state.derived.get(from.var));
    if (this.secretHomes.length > 0) this.secretsIn(from === 'page' ? (await this.currentDoc()).html : source, derived);
    for (const i of this.derivedFrom(step.fields)) derived.add(i); // a list's limit given as a template
    this.markDerived(step.save_as, derived);
    const opts = this.extractOptions();
    if (from === 'page' || typeof this.state.scope.vars[from.var] === 'string') {
      const doc = from === 'page' ? await this.currentDoc() : null;
      opts.baseUrl = doc?.url ?? this.state.lastUrl ?? undefined;
      const $ = doc ? await this.parsed(doc) : await this.loadHtml(this.state.scope.vars[(from as { var: string }).var] as string);
      let scope = null;
      if (step.scope) {
        scope = selectIn($, null, step.scope).first();
        if (scope.length === 0) {
          this.state.scope.vars[step.save_as] = null;
          return;
        }
      }
      this.state.scope.vars[step.save_as] = extractHtmlObject($, scope, step.fields, opts);
      return;
    }
    opts.baseUrl = this.state.lastUrl ?? undefined;
    let doc = this.state.scope.vars[from.var];
    if (step.scope) doc = jsonPointer(doc, step.scope);
    if (doc === undefined || doc === null) {
      this.state.scope.vars[step.save_as] = null;
      return;
    }
    this.state.scope.vars[step.save_as] = extractJsonObject(doc, step.fields, opts);
  }

  private async paginate(step: PaginateStep, path: string): Promise<void> {
    const limit = this.resolveLimit(step.limit, step.default_limit);
    this.decided(this.derivedFrom(step.limit));
    const maxPages = step.max_pages ?? 10;
    const vars = this.state.scope.vars;
    const acc: unknown[] = [];
    // Checked as it grows, against the bound the output is checked with at the end (value_too_large):
    // a hundred pages of 5 MB were all held before that check (314 MiB of heap at 40 pages).
    const collected = new BoundedList(acc);
    const next = step.next;
    const pageVar = next.kind === 'link' ? undefined : (next.page_var ?? 'page');
    if (next.kind === 'counter') vars[pageVar!] = next.start ?? 1;
    if (next.kind === 'cursor') vars[pageVar!] = null;
    if (pageVar) this.markDerived(pageVar, new Set());
    // What the pages collected, and the cursors read, are derived from whatever they came from.
    const derived = new Set<number>();
    for (let page = 0; page < maxPages && acc.length < limit; page++) {
      vars[step.collect.split('.')[0]!] = undefined;
      await this.runSteps(step.steps, `${path}.steps`);
      // What follows (collecting, the stop condition, the next page) is the pagination's own work.
      this.state.currentStep = path;
      const [head, ...rest] = step.collect.split('.');
      // Whether it goes on depends on the list (its length, whether it grew).
      for (const i of this.state.derived.get(head!) ?? []) derived.add(i);
      this.decided(derived);
      let got: unknown = vars[head!];
      for (const k of rest) got = got && typeof got === 'object' && !Array.isArray(got) ? (got as Record<string, unknown>)[k] : undefined;
      const list = Array.isArray(got) ? got : [];
      // Item by item, never spread: a site's page of 130,000 items is past the arguments limit (a
      // RangeError, which would end the run as our internal_error and retry it against the site).
      // Items past the limit are never kept (the result is cut there).
      if (step.cumulative) {
        const grew = list.length > acc.length;
        collected.clear();
        for (const item of list) {
          if (acc.length >= limit) break;
          collected.add(item);
        }
        if (!grew) break;
      } else
        for (const item of list) {
          if (acc.length >= limit) break;
          collected.add(item);
        }
      this.ctx.heartbeat({ step: path, type: 'paginate', page: page + 1, items: acc.length });
      if (acc.length >= limit || list.length === 0) break;
      if (step.stop && (await this.holds(step.stop))) break;
      if (next.kind === 'counter') {
        vars[pageVar!] = (vars[pageVar!] as number) + 1;
      } else if (next.kind === 'cursor') {
        const c = jsonPointer(vars[next.var], next.pointer);
        this.decided(this.state.derived.get(next.var));
        if (c === undefined || c === null || c === '' || c === false) break;
        vars[pageVar!] = c;
        this.markDerived(pageVar!, new Set(this.state.derived.get(next.var)));
      } else {
        const doc = await this.currentDoc();
        const $ = await this.parsed(doc);
        // Which link there is (if any) is read from the page: a decision like a condition's.
        if (this.secretHomes.length > 0) this.decided(this.secretsIn(doc.html, new Set(this.state.derivedSent)));
        const link = selectIn($, null, next.selector).first();
        if (link.length === 0) break;
        const href = link.attr('href');
        if (href && !/^\s*javascript:/i.test(href)) {
          let url: URL;
          try {
            url = new URL(href, doc.url);
          } catch {
            break;
          }
          this.checkUrl(url, path);
          this.assertSecretsStayHome(url.hostname, () => urlSpellings(url), path, undefined);
          this.letGoOfDocs();
          if (this.state.htmlDoc && this.driver.engine === 'http') {
            // the page came from a request step: load the next one the same way
            const res = await this.driver.request(
              { method: 'GET', url, headers: { 'user-agent': DEFAULT_UA, accept: 'text/html,application/xhtml+xml' }, step: path, usesSecrets: false, checkHop: this.hopCheck(path) },
              this.signal,
            );
            this.checkStatus(res.status, url, {}, path, false, headerValue(res.headers['retry-after']));
            this.state.htmlDoc = { url: res.url, status: res.status, html: res.body };
            this.state.lastUrl = res.url;
            this.state.lastStatus = res.status;
          } else {
            const res = await this.driver.navigate(url, { step: path, signal: this.signal, checkHop: this.hopCheck(path) });
            this.afterPageChange(res);
            this.checkStatus(res.status, url, {}, path, false, res.retryAfter);
          }
        } else if (this.driver.clickNext) {
          this.pageMayChange();
          await this.driver.clickNext(next.selector, next.wait_for, path);
          if (next.wait_for) await this.elementDecides();
        } else break;
      }
    }
    vars[step.save_as] = acc.slice(0, limit);
    this.markDerived(step.save_as, derived);
  }

  private async holds(c: Condition): Promise<boolean> {
    if (this.secretHomes.length > 0) this.decided(await this.conditionSources(c));
    const vars = this.state.scope.vars;
    if ('selector_present' in c || 'selector_absent' in c) {
      const doc = await this.currentDoc();
      const $ = await this.parsed(doc);
      const sel = 'selector_present' in c ? c.selector_present : c.selector_absent;
      const n = selectIn($, null, sel).length;
      return 'selector_present' in c ? n > 0 : n === 0;
    }
    if ('text_contains' in c) {
      const doc = await this.currentDoc();
      const text = (await this.parsed(doc)).root().text().replace(/\s+/g, ' ');
      return text.toLowerCase().includes(renderString(c.text_contains, this.state.scope).toLowerCase());
    }
    if ('status' in c) return this.state.lastStatus !== null && c.status.includes(this.state.lastStatus);
    if ('empty' in c) return isEmptyValue(vars[c.empty]);
    if ('missing' in c) {
      const v = jsonPointer(vars[c.missing.var], c.missing.pointer);
      return v === undefined || v === null;
    }
    if ('url_contains' in c) {
      const url = this.state.htmlDoc?.url ?? (await this.pageSnapshot())?.url ?? this.state.lastUrl ?? '';
      return url.includes(renderString(c.url_contains, this.state.scope));
    }
    return false;
  }
}

/**
 * A host as the secret-host check compares it: lower case, without the trailing dot of a fully
 * qualified name, and an internationalized name in its ASCII (punycode) form, as URLs hold it. A
 * site and a page's host that name the same host in DNS compare equal, whatever their spelling.
 */
export function siteHost(host: string): string {
  const h = host.trim().toLowerCase().replace(/\.$/, '');
  return (h && domainToASCII(h)) || h;
}

/** Whether `host` (as siteHost gives it) is one of `sites` or a host under one. */
const underSite = (host: string, sites: Set<string>): boolean => [...sites].some((site) => host === site || host.endsWith(`.${site}`));

export function headerValue(v: string | string[] | undefined): string | null {
  if (v === undefined) return null;
  return Array.isArray(v) ? (v[0] ?? null) : v;
}

// A title is read whole and its words looked for apart: one pattern with a phrase between two
// `[^<]*` backtracked over every occurrence of the phrase, 11 s of the worker's thread for a
// 200 KB title repeating "captcha" with no end tag.
const TITLE_RE = /<title>([^<]*)<\/title>/gi;
const CHALLENGE_TITLE_RE = /captcha|are you a robot|attention required|just a moment|access denied/i;
const CHALLENGE_CLASS_RE = /class="[^"]*\b(g-recaptcha|h-captcha|cf-turnstile)\b/i;

function looksLikeChallenge(html: string): boolean {
  for (const m of html.matchAll(TITLE_RE)) if (CHALLENGE_TITLE_RE.test(m[1]!)) return true;
  return CHALLENGE_CLASS_RE.test(html);
}

/** Pages that are a bot challenge instead of content. */
export function detectChallenge(html: string, host: string, step: string): void {
  if (looksLikeChallenge(html.slice(0, 200_000)))
    throw new ServiceError('source_blocked', `The website ${host} answered with a bot challenge instead of the page`, { details: { step, host, reason: 'challenge' } });
}
