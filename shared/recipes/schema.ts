// The declarative recipe language that operation versions carry (see shared/recipes/README.md).
// A recipe is plain JSON: it names the hosts it may reach, a list of steps, and an output template.
// Nothing in a recipe is ever evaluated as code: templates only look values up by path.
// Workflow-safe: no Node built-ins (zod and pure functions only).

import { z } from 'zod';
import type { ErrorCode, ValidationIssue } from '../errors.ts';
import { patternProblem } from '../regex.ts';
import { BAD_PORTS } from './ports.ts';

// ---------------------------------------------------------------------------------------------
// Templates

/** `{{input.x}}`, `{{vars.y.z}}`, `{{vars.items[0]}}`, `{{secrets.NAME}}`, `{{run.request_ref}}`. */
export const TEMPLATE_NAMESPACES = ['input', 'vars', 'secrets', 'run'] as const;
export type TemplateNamespace = (typeof TEMPLATE_NAMESPACES)[number];

/** Matches every `{{ ... }}` placeholder in a string. */
export const PLACEHOLDER_RE = /\{\{\s*([^{}]*?)\s*\}\}/g;
/** A valid reference: a namespace, then `.name` or `[index]` segments. */
export const REFERENCE_RE = /^(input|vars|secrets|run)((?:\.[A-Za-z_][A-Za-z0-9_-]*|\[\d+\])*)$/;
/** Variable names that steps may save into. */
export const VAR_NAME_RE = /^[A-Za-z_][A-Za-z0-9_]{0,63}$/;

export interface TemplateRef {
  namespace: TemplateNamespace;
  path: Array<string | number>;
  raw: string;
}

/** Parses one placeholder body (`vars.books[0].title`); null when it is not a valid reference. */
export function parseReference(body: string): TemplateRef | null {
  const m = REFERENCE_RE.exec(body.trim());
  if (!m) return null;
  const path: Array<string | number> = [];
  const segRe = /\.([A-Za-z_][A-Za-z0-9_-]*)|\[(\d+)\]/g;
  let s: RegExpExecArray | null;
  while ((s = segRe.exec(m[2] ?? '')) !== null) {
    if (s[1] !== undefined) path.push(s[1]);
    else path.push(Number(s[2]));
  }
  return { namespace: m[1] as TemplateNamespace, path, raw: body.trim() };
}

/** All placeholders of a string, valid or not. */
export function placeholders(text: string): Array<{ body: string; ref: TemplateRef | null }> {
  const out: Array<{ body: string; ref: TemplateRef | null }> = [];
  for (const m of text.matchAll(PLACEHOLDER_RE)) out.push({ body: m[1] ?? '', ref: parseReference(m[1] ?? '') });
  return out;
}

/** When the whole string is exactly one placeholder, its reference (the value keeps its JSON type). */
export function wholeReference(text: string): TemplateRef | null {
  const m = /^\{\{\s*([^{}]*?)\s*\}\}$/.exec(text);
  return m ? parseReference(m[1] ?? '') : null;
}

// ---------------------------------------------------------------------------------------------
// Types

export type Json = null | boolean | number | string | Json[] | { [key: string]: Json };

export type FieldType =
  | 'text'
  | 'attribute'
  | 'html'
  | 'number'
  | 'integer'
  | 'boolean'
  | 'date'
  | 'datetime'
  | 'json'
  | 'exists'
  | 'count'
  | 'url'
  | 'list'
  | 'object';

/**
 * One extracted field. In HTML sources `selector` is a CSS selector relative to the current scope
 * (omitted: the scope itself); in JSON sources `pointer` is a JSON pointer (RFC 6901) relative to
 * the current scope (omitted or "": the scope itself).
 */
export interface Field {
  type: FieldType;
  selector?: string;
  pointer?: string;
  /** Read this attribute instead of the text (`attribute` needs it; `url` defaults to href). */
  attribute?: string;
  /** Optional regular expression applied to the text; its first capture group (or whole match) is kept. */
  pattern?: string;
  /** For `boolean`: texts (case-insensitive, trimmed) that mean true; without it, presence means true. */
  true_values?: string[];
  /** For `list`: fields of each item (an object per match)... */
  fields?: Record<string, Field>;
  /** ...or one scalar field per match. */
  item?: Field;
  /** For `list`: at most this many items (a number or a template such as `{{input.max_results}}`). */
  limit?: number | string;
  /** Value used when nothing matches or the text cannot be parsed; defaults to null (lists: []). */
  default?: Json;
}

export type Condition =
  | { selector_present: string }
  | { selector_absent: string }
  | { text_contains: string }
  | { status: number[] }
  | { empty: string }
  | { missing: { var: string; pointer: string } }
  | { url_contains: string };

export type ExtractSource = 'page' | { var: string };

export type HttpMethod = 'GET' | 'POST' | 'PUT' | 'PATCH' | 'DELETE' | 'HEAD';
export type LoadState = 'load' | 'domcontentloaded' | 'networkidle';

interface StepBase {
  /** Readable name used in progress messages and error details. */
  name?: string;
  /**
   * Marks a step that changes something on the website (places an order, sends a message).
   * A failure whose outcome is uncertain during it is `action_unconfirmed`; any failure after it
   * is `workflow_partially_completed`. Steps are never retried by the engine.
   */
  action?: boolean;
}

export interface RequestStep extends StepBase {
  type: 'request';
  method?: HttpMethod;
  /** Absolute URL template; inserted values are URL-encoded. A lone `{{vars.x}}` is used as a URL. */
  url: string;
  headers?: Record<string, string>;
  /** Query parameters added to the URL; values that resolve to null/undefined/"" are left out. */
  query?: Record<string, string | number | boolean>;
  json?: Json;
  form?: Record<string, string | number | boolean>;
  /** Statuses that are success; default any 2xx. Others map to error codes. */
  expect_status?: number[];
  /** Statuses that mean "no match for this input" → `not_found`. */
  not_found_status?: number[];
  /** How to read the body; default from the content type. */
  parse?: 'json' | 'html' | 'text';
  /** Variable that receives the parsed body (JSON value, or HTML/text string). */
  save_as?: string;
  /** Variable that receives the response status. */
  save_status_as?: string;
}

export interface NavigateStep extends StepBase {
  type: 'navigate';
  url: string;
  wait_until?: LoadState;
  expect_status?: number[];
  not_found_status?: number[];
}

export interface FillStep extends StepBase {
  type: 'fill';
  selector: string;
  value: string;
}

export interface SelectStep extends StepBase {
  type: 'select';
  selector: string;
  /** Option value (template)... */
  value?: string;
  /** ...or visible option label (template). */
  label?: string;
}

export interface ClickStep extends StepBase {
  type: 'click';
  selector: string;
  /** Wait for the navigation the click starts (form submit, link). */
  wait_for_navigation?: boolean;
  expect_status?: number[];
  not_found_status?: number[];
}

export interface WaitStep extends StepBase {
  type: 'wait';
  selector?: string;
  state?: 'attached' | 'detached' | 'visible' | 'hidden';
  load_state?: LoadState;
  /** Substring the page URL must contain (template). */
  url_contains?: string;
  timeout_ms?: number;
}

export interface ExtractStep extends StepBase {
  type: 'extract';
  /** `page` (default): the current page or last HTML response; `{var}`: an HTML string or JSON value. */
  from?: ExtractSource;
  /** Scope: CSS selector (HTML) or JSON pointer (JSON) the fields are read under. */
  scope?: string;
  fields: Record<string, Field>;
  save_as: string;
}

export interface SetStep extends StepBase {
  type: 'set';
  var: string;
  value: Json;
}

export interface PaginateStep extends StepBase {
  type: 'paginate';
  /** The page's steps; they must leave a list in `collect`. */
  steps: Step[];
  /** Variable (or `var.field` path) holding the list one pass of `steps` produced. */
  collect: string;
  /** Variable that receives the concatenated list. */
  save_as: string;
  /** Stop after this many items (number or template); extra items are cut off. */
  limit: number | string;
  /**
   * The list in `collect` already holds every item so far ("load more" buttons, infinite scroll):
   * it replaces the collected items instead of being appended; it stops when it stops growing.
   */
  cumulative?: boolean;
  /** Stop after a page when this holds (e.g. the "next" button is hidden). */
  stop?: Condition;
  /** Used when `limit` is a template that resolves to nothing (an optional input left out). */
  default_limit?: number;
  /** Hard cap of pages (default 10, at most 100). */
  max_pages?: number;
  /**
   * How to reach the next page:
   * - `link`: follow the `href` of `selector` on the current page (or click it in the browser when
   *   it has no href); stops when it is absent.
   * - `counter`: `vars.<page_var>` counts from `start`; the steps use it in their URL; stops on an
   *   empty page.
   * - `cursor`: reads the next cursor at `pointer` in JSON variable `var` into `vars.<page_var>`;
   *   stops when it is missing or null.
   */
  next:
    | { kind: 'link'; selector: string; wait_for?: string }
    | { kind: 'counter'; page_var?: string; start?: number }
    | { kind: 'cursor'; var: string; pointer: string; page_var?: string };
}

export interface NotFoundStep extends StepBase {
  type: 'not_found';
  when: Condition;
  message?: string;
}

export type FailCode = Extract<
  ErrorCode,
  | 'not_found'
  | 'source_blocked'
  | 'credentials_rejected'
  | 'source_permission_denied'
  | 'auth_required'
  | 'upstream_http_error'
  | 'upstream_not_found'
  | 'action_unconfirmed'
  | 'invalid_provider_input'
>;

export interface FailStep extends StepBase {
  type: 'fail';
  when: Condition;
  code: FailCode;
  message?: string;
}

export type Step =
  | RequestStep
  | NavigateStep
  | FillStep
  | SelectStep
  | ClickStep
  | WaitStep
  | ExtractStep
  | SetStep
  | PaginateStep
  | NotFoundStep
  | FailStep;

export interface Recipe {
  engine: 'http' | 'browser';
  /** Hostnames the recipe may reach (exact names, lower case). */
  hosts: string[];
  /** Names of the connection secrets the recipe uses (`{{secrets.NAME}}`). */
  secrets?: string[];
  /** Upper bound for one run, inside the service deadline. */
  timeout_ms?: number;
  steps: Step[];
  /** Output template: any JSON; strings are templates, a lone placeholder keeps the value's type. */
  output: Json;
}

// ---------------------------------------------------------------------------------------------
// zod schemas

const nonEmpty = z.string().min(1).max(2000);
const varName = z.string().regex(VAR_NAME_RE, 'must be a variable name: letters, digits, _ (max 64)');
const hostName = z
  .string()
  .regex(/^(?=.{1,253}$)([a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?)(\.[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?)*$/, 'must be a lower-case host name without scheme or port');
const status = z.number().int().min(100).max(599);
const statuses = z.array(status).min(1).max(20);
const loadState = z.enum(['load', 'domcontentloaded', 'networkidle']);
const scalarTemplate = z.union([z.string().max(4000), z.number(), z.boolean()]);
const limitSchema = z.union([z.number().int().min(1).max(10000), z.string().min(1).max(200)]);
const pointer = z.string().max(500).regex(/^(\/.*)?$/, 'must be a JSON pointer ("" or starting with "/")');

export const JsonSchema: z.ZodType<Json> = z.lazy(() =>
  z.union([z.null(), z.boolean(), z.number(), z.string(), z.array(JsonSchema), z.record(z.string(), JsonSchema)]),
);

export const FieldSchema: z.ZodType<Field> = z.lazy(() =>
  z
    .strictObject({
      type: z.enum(['text', 'attribute', 'html', 'number', 'integer', 'boolean', 'date', 'datetime', 'json', 'exists', 'count', 'url', 'list', 'object']),
      selector: nonEmpty.optional(),
      pointer: pointer.optional(),
      attribute: z.string().min(1).max(100).optional(),
      pattern: z.string().min(1).max(200).optional(),
      true_values: z.array(z.string().max(200)).min(1).max(20).optional(),
      fields: z.record(z.string().regex(/^[A-Za-z_][A-Za-z0-9_]{0,99}$/), FieldSchema).optional(),
      item: FieldSchema.optional(),
      limit: limitSchema.optional(),
      default: JsonSchema.optional(),
    })
    .superRefine((f, ctx) => {
      if (f.selector !== undefined && f.pointer !== undefined)
        ctx.addIssue({ code: 'custom', message: 'use either selector (HTML) or pointer (JSON), not both', path: ['pointer'] });
      if (f.type === 'attribute' && !f.attribute) ctx.addIssue({ code: 'custom', message: 'type "attribute" needs "attribute"', path: ['attribute'] });
      if (f.type === 'list' && !f.fields === !f.item)
        ctx.addIssue({ code: 'custom', message: 'type "list" needs exactly one of "fields" (objects) or "item" (scalars)', path: ['fields'] });
      if (f.type === 'object' && !f.fields) ctx.addIssue({ code: 'custom', message: 'type "object" needs "fields"', path: ['fields'] });
      if (f.type !== 'list' && f.type !== 'object' && (f.fields || f.item))
        ctx.addIssue({ code: 'custom', message: `"fields"/"item" only apply to list and object fields`, path: ['fields'] });
      if (f.type !== 'list' && f.limit !== undefined) ctx.addIssue({ code: 'custom', message: '"limit" only applies to list fields', path: ['limit'] });
      if (f.true_values && f.type !== 'boolean') ctx.addIssue({ code: 'custom', message: '"true_values" only applies to boolean fields', path: ['true_values'] });
      if (f.pattern !== undefined) {
        // It runs on RE2's linear-time engine (shared/regex.ts): RE2 syntax, no lookaround or backreferences.
        const problem = patternProblem(f.pattern);
        if (problem) ctx.addIssue({ code: 'custom', message: problem, path: ['pattern'] });
      }
    }),
);

export const ConditionSchema: z.ZodType<Condition> = z.union([
  z.strictObject({ selector_present: nonEmpty }),
  z.strictObject({ selector_absent: nonEmpty }),
  z.strictObject({ text_contains: nonEmpty }),
  z.strictObject({ status: statuses }),
  z.strictObject({ empty: varName }),
  z.strictObject({ missing: z.strictObject({ var: varName, pointer }) }),
  z.strictObject({ url_contains: nonEmpty }),
]);

const base = {
  name: z.string().min(1).max(100).optional(),
  action: z.boolean().optional(),
};

/**
 * Header names a recipe may not set, in any letter case (`reservedHeader`). The host list and the
 * secret-host check judge a request by its URL's host, but undici takes a `host` header as the
 * request's Host and TLS server name: on a CDN serving many sites at one address, a recipe
 * declaring bank.example could send its secrets and cookies to another site there. The others
 * belong to the connection or the message's framing, not to what is asked (hop-by-hop fields,
 * RFC 9110 §7.6.1 and RFC 9113 §8.2.2; Content-Length, Transfer-Encoding, Expect): the engine
 * writes them itself, and undici refuses most of them only as it sends, which looked like a
 * retryable network failure instead of the recipe's fault. `proxy-` headers speak to a proxy; a
 * recipe has none (the browser's is the service's own).
 */
export const RESERVED_HEADERS: ReadonlySet<string> = new Set([
  'host',
  'connection',
  'keep-alive',
  'transfer-encoding',
  'te',
  'trailer',
  'upgrade',
  'http2-settings',
  'content-length',
  'expect',
]);

/** Whether a recipe may not set a header of this name (RESERVED_HEADERS or `proxy-*`, any letter case). */
export function reservedHeader(name: string): boolean {
  const n = name.toLowerCase();
  return RESERVED_HEADERS.has(n) || n.startsWith('proxy-');
}

const requestHeaders = z
  .record(z.string().regex(/^[A-Za-z0-9!#$%&'*+.^_`|~-]{1,100}$/, 'must be an HTTP header name'), z.string().max(4000))
  .superRefine((headers, ctx) => {
    for (const name of Object.keys(headers))
      if (reservedHeader(name))
        ctx.addIssue({
          code: 'custom',
          message: `the ${name.toLowerCase()} header cannot be set by a recipe: the engine sends the request to the URL's host and manages the connection itself`,
          path: [name],
        });
  });

const RequestStepSchema = z.strictObject({
  ...base,
  type: z.literal('request'),
  method: z.enum(['GET', 'POST', 'PUT', 'PATCH', 'DELETE', 'HEAD']).optional(),
  url: nonEmpty,
  headers: requestHeaders.optional(),
  query: z.record(z.string().min(1).max(200), scalarTemplate).optional(),
  json: JsonSchema.optional(),
  form: z.record(z.string().min(1).max(200), scalarTemplate).optional(),
  expect_status: statuses.optional(),
  not_found_status: statuses.optional(),
  parse: z.enum(['json', 'html', 'text']).optional(),
  save_as: varName.optional(),
  save_status_as: varName.optional(),
});

const NavigateStepSchema = z.strictObject({
  ...base,
  type: z.literal('navigate'),
  url: nonEmpty,
  wait_until: loadState.optional(),
  expect_status: statuses.optional(),
  not_found_status: statuses.optional(),
});

const FillStepSchema = z.strictObject({ ...base, type: z.literal('fill'), selector: nonEmpty, value: z.string().max(4000) });
const SelectStepSchema = z.strictObject({
  ...base,
  type: z.literal('select'),
  selector: nonEmpty,
  value: z.string().max(1000).optional(),
  label: z.string().max(1000).optional(),
});
const ClickStepSchema = z.strictObject({
  ...base,
  type: z.literal('click'),
  selector: nonEmpty,
  wait_for_navigation: z.boolean().optional(),
  expect_status: statuses.optional(),
  not_found_status: statuses.optional(),
});
const WaitStepSchema = z.strictObject({
  ...base,
  type: z.literal('wait'),
  selector: nonEmpty.optional(),
  state: z.enum(['attached', 'detached', 'visible', 'hidden']).optional(),
  load_state: loadState.optional(),
  url_contains: nonEmpty.optional(),
  timeout_ms: z.number().int().min(1).max(120_000).optional(),
});
const ExtractStepSchema = z.strictObject({
  ...base,
  type: z.literal('extract'),
  from: z.union([z.literal('page'), z.strictObject({ var: varName })]).optional(),
  scope: z.string().min(1).max(2000).optional(),
  fields: z.record(z.string().regex(/^[A-Za-z_][A-Za-z0-9_]{0,99}$/), FieldSchema),
  save_as: varName,
});
const SetStepSchema = z.strictObject({ ...base, type: z.literal('set'), var: varName, value: JsonSchema });
const NotFoundStepSchema = z.strictObject({ ...base, type: z.literal('not_found'), when: ConditionSchema, message: z.string().max(500).optional() });
const FailStepSchema = z.strictObject({
  ...base,
  type: z.literal('fail'),
  when: ConditionSchema,
  code: z.enum([
    'not_found',
    'source_blocked',
    'credentials_rejected',
    'source_permission_denied',
    'auth_required',
    'upstream_http_error',
    'upstream_not_found',
    'action_unconfirmed',
    'invalid_provider_input',
  ]),
  message: z.string().max(500).optional(),
});

export const StepSchema: z.ZodType<Step> = z.lazy(() =>
  z.discriminatedUnion('type', [
    RequestStepSchema,
    NavigateStepSchema,
    FillStepSchema,
    SelectStepSchema,
    ClickStepSchema,
    WaitStepSchema,
    ExtractStepSchema,
    SetStepSchema,
    PaginateStepSchema,
    NotFoundStepSchema,
    FailStepSchema,
  ]),
);

const PaginateStepSchema = z.strictObject({
  ...base,
  type: z.literal('paginate'),
  steps: z.array(StepSchema).min(1).max(50),
  collect: z.string().regex(/^[A-Za-z_][A-Za-z0-9_]{0,63}(\.[A-Za-z_][A-Za-z0-9_]{0,99})*$/, 'must be a variable name or a dotted path into one'),
  save_as: varName,
  limit: limitSchema,
  default_limit: z.number().int().min(1).max(10000).optional(),
  stop: ConditionSchema.optional(),
  cumulative: z.boolean().optional(),
  max_pages: z.number().int().min(1).max(100).optional(),
  next: z.discriminatedUnion('kind', [
    z.strictObject({ kind: z.literal('link'), selector: nonEmpty, wait_for: nonEmpty.optional() }),
    z.strictObject({ kind: z.literal('counter'), page_var: varName.optional(), start: z.number().int().min(0).max(1_000_000).optional() }),
    z.strictObject({ kind: z.literal('cursor'), var: varName, pointer, page_var: varName.optional() }),
  ]),
});

const BROWSER_ONLY = new Set(['fill', 'select', 'click', 'wait']);

export const RecipeSchema: z.ZodType<Recipe> = z
  .strictObject({
    engine: z.enum(['http', 'browser']),
    hosts: z.array(hostName).min(1).max(20),
    secrets: z.array(z.string().regex(/^[A-Za-z_][A-Za-z0-9_]{0,99}$/)).max(20).optional(),
    timeout_ms: z.number().int().min(1000).max(170_000).optional(),
    steps: z.array(StepSchema).min(1).max(200),
    output: JsonSchema,
  })
  .superRefine((r, ctx) => {
    const declaredSecrets = new Set(r.secrets ?? []);
    const checkTemplates = (value: unknown, path: Array<string | number>, where: 'step' | 'output') => {
      if (typeof value === 'string') {
        for (const p of placeholders(value)) {
          if (!p.ref) {
            ctx.addIssue({ code: 'custom', message: `invalid template reference "{{${p.body}}}" (use input.x, vars.x, secrets.NAME or run.request_ref)`, path });
          } else if (p.ref.namespace === 'secrets') {
            if (where === 'output') ctx.addIssue({ code: 'custom', message: 'the output must never contain secrets', path });
            else if (p.ref.path.length !== 1 || typeof p.ref.path[0] !== 'string')
              ctx.addIssue({ code: 'custom', message: 'a secret is referenced as {{secrets.NAME}}', path });
            else if (!declaredSecrets.has(p.ref.path[0]))
              ctx.addIssue({ code: 'custom', message: `secret "${p.ref.path[0]}" is used but not listed in "secrets"`, path });
          } else if (p.ref.namespace === 'run' && !(p.ref.path.length === 1 && p.ref.path[0] === 'request_ref')) {
            ctx.addIssue({ code: 'custom', message: 'the only run value is {{run.request_ref}}', path });
          }
        }
      } else if (Array.isArray(value)) {
        value.forEach((v, i) => checkTemplates(v, [...path, i], where));
      } else if (value && typeof value === 'object') {
        for (const [k, v] of Object.entries(value)) checkTemplates(v, [...path, k], where);
      }
    };
    const checkUrl = (url: string, path: Array<string | number>) => {
      if (wholeReference(url)) return; // a URL taken from a variable: checked when it runs
      const m = /^(https?):\/\/([^/?#{}:]+)(:\d+)?(?:[/?#]|$)/i.exec(url);
      if (!m) {
        if (url.startsWith('/')) return; // relative to the current page
        ctx.addIssue({ code: 'custom', message: 'url must start with http:// or https:// and a literal host, or be a path starting with "/"', path });
        return;
      }
      const host = (m[2] ?? '').toLowerCase();
      if (!r.hosts.includes(host)) ctx.addIssue({ code: 'custom', message: `host "${host}" is not listed in "hosts"`, path });
      if (m[3] && BAD_PORTS.has(Number(m[3].slice(1)))) ctx.addIssue({ code: 'custom', message: `port ${m[3].slice(1)} belongs to another protocol (mail, file transfer, remote shells): no browser reaches it either`, path });
    };
    const walk = (steps: Step[], path: Array<string | number>, inPaginate: boolean) => {
      steps.forEach((s, i) => {
        const p = [...path, i];
        if (r.engine === 'http' && BROWSER_ONLY.has(s.type))
          ctx.addIssue({ code: 'custom', message: `step type "${s.type}" needs engine "browser"`, path: [...p, 'type'] });
        // Templates may appear in the string values of steps; selectors and pointers are literal.
        if (s.type === 'request' || s.type === 'navigate') checkUrl(s.url, [...p, 'url']);
        if (s.type === 'request') {
          if (s.json !== undefined && s.form !== undefined)
            ctx.addIssue({ code: 'custom', message: 'a request has either "json" or "form", not both', path: [...p, 'json'] });
          if ((s.json !== undefined || s.form !== undefined) && (s.method === undefined || s.method === 'GET' || s.method === 'HEAD'))
            ctx.addIssue({ code: 'custom', message: 'a request with a body needs method POST, PUT, PATCH or DELETE', path: [...p, 'method'] });
        }
        if (s.type === 'select' && (s.value === undefined) === (s.label === undefined))
          ctx.addIssue({ code: 'custom', message: 'select needs exactly one of "value" or "label"', path: p });
        if (s.type === 'wait' && !s.selector && !s.load_state && !s.url_contains)
          ctx.addIssue({ code: 'custom', message: 'wait needs "selector", "load_state" or "url_contains"', path: p });
        if (s.type === 'wait' && s.state && !s.selector)
          ctx.addIssue({ code: 'custom', message: '"state" applies to a selector', path: [...p, 'state'] });
        if (s.type === 'paginate') {
          if (inPaginate) ctx.addIssue({ code: 'custom', message: 'paginate steps cannot be nested', path: p });
          walk(s.steps, [...p, 'steps'], true);
        }
        if (s.type === 'extract' || s.type === 'paginate') {
          // limits may be templates; checked below with everything else
        }
        checkTemplates(s, p, 'step');
      });
    };
    walk(r.steps, ['steps'], false);
    checkTemplates(r.output, ['output'], 'output');
  });

// ---------------------------------------------------------------------------------------------
// Parsing

export class RecipeValidationError extends Error {
  readonly issues: ValidationIssue[];
  constructor(issues: ValidationIssue[]) {
    super(`Invalid recipe: ${issues.map((i) => `${i.path || '(root)'}: ${i.message}`).join('; ')}`);
    this.name = 'RecipeValidationError';
    this.issues = issues;
  }
}

function issuePath(path: ReadonlyArray<PropertyKey>): string {
  let out = '';
  for (const seg of path) out += typeof seg === 'number' ? `[${seg}]` : `${out ? '.' : ''}${String(seg)}`;
  return out;
}

export function safeParseRecipe(json: unknown): { ok: true; recipe: Recipe } | { ok: false; issues: ValidationIssue[] } {
  let value = json;
  if (typeof value === 'string') {
    try {
      value = JSON.parse(value);
    } catch (e) {
      return { ok: false, issues: [{ path: '', message: `not JSON: ${(e as Error).message}`, code: 'invalid_json' }] };
    }
  }
  const res = RecipeSchema.safeParse(value);
  if (res.success) return { ok: true, recipe: res.data };
  return { ok: false, issues: res.error.issues.map((i) => ({ path: issuePath(i.path), message: i.message, code: i.code })) };
}

/** Validates a recipe (object or JSON text); throws RecipeValidationError listing every issue. */
export function parseRecipe(json: unknown): Recipe {
  const res = safeParseRecipe(json);
  if (!res.ok) throw new RecipeValidationError(res.issues);
  return res.recipe;
}

/** Whether any step of the recipe is marked as an action. */
export function recipePerformsActions(recipe: Recipe): boolean {
  const walk = (steps: Step[]): boolean => steps.some((s) => s.action === true || (s.type === 'paginate' && walk(s.steps)));
  return walk(recipe.steps);
}
