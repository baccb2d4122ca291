// The definition of an organization-built workflow (README.md in this folder documents it):
// its JSON Schema, checked with ajv, then the checks a schema cannot express (recipes parse, their
// hosts are declared sites, schemas compile, examples fit them, performs_actions agrees with the
// recipe). Every problem is one issue: a JSON Pointer into the definition and a message.
import { Ajv2020, type ErrorObject } from 'ajv/dist/2020.js';
import addFormatsModule from 'ajv-formats';
import { CATEGORIES } from '../catalog/categories.ts';
import { recipeActions, validateOperationVersion } from '../catalog/validate.ts';
import type { AccessRequirement, ApiDefinition, JsonSchema, OperationDefinition } from '../catalog/types.ts';
import { RecipeValidationError, safeParseRecipe } from '../recipes/schema.ts';
import { ServiceError, type ValidationIssue } from '../errors.ts';
import { canonicalHash } from './canonical.ts';
import { linearRegExp, patternProblem } from '../regex.ts';
import { compileOrgSchema } from '../org-schemas.ts';
import { MAX_SELECTABLE_FIELDS, MAX_SELECTABLE_FIELDS_CHARS, selectableFields } from '../format/shape.ts';
import { displayTextProblem } from '../accounts/display-text.ts';
import { HOST_NAME_PATTERN } from '../host-name.ts';

const addFormats = addFormatsModule as unknown as (ajv: Ajv2020) => Ajv2020;

export interface BuilderExample {
  title?: string;
  input: Record<string, unknown>;
  output: unknown;
}

export interface BuilderOperation {
  name: string;
  label: string;
  description: string;
  /** Credits per completed run (default 1). */
  cost_credits?: number;
  /** Optional: derived from the recipe's `action: true` steps; when given it must agree. */
  performs_actions?: boolean;
  input_schema: JsonSchema;
  output_schema: JsonSchema;
  recipe: Record<string, unknown>;
  examples: BuilderExample[];
  access?: AccessRequirement[];
}

export interface BuilderDefinition {
  handle: string;
  name: string;
  description: string;
  category: string;
  website_url?: string | null;
  sites: Array<{ name: string; host: string }>;
  operations: BuilderOperation[];
}

/** Largest definition accepted (JSON bytes). */
export const MAX_DEFINITION_BYTES = 512 * 1024;

// A host name of at most 253 characters (maxLength beside it).
const HOST = HOST_NAME_PATTERN;

/** A bounded array of closed objects: the shape of every list in a definition. */
function listOf(bounds: { minItems?: number; maxItems: number }, required: string[], properties: Record<string, unknown>) {
  return { type: 'array', ...bounds, items: { type: 'object', additionalProperties: false, required, properties } };
}

/** The definition format as JSON Schema (draft 2020-12): the first, structural check. */
export const DEFINITION_SCHEMA = {
  $schema: 'https://json-schema.org/draft/2020-12/schema',
  type: 'object',
  additionalProperties: false,
  required: ['handle', 'name', 'description', 'category', 'sites', 'operations'],
  properties: {
    handle: { type: 'string', pattern: '^@[a-z0-9][a-z0-9_-]{0,99}$' },
    name: { type: 'string', minLength: 1, maxLength: 120 },
    description: { type: 'string', maxLength: 2000 },
    category: { enum: CATEGORIES.map((c) => c.id) },
    website_url: { anyOf: [{ type: 'null' }, { type: 'string', format: 'uri', pattern: '^https?://', maxLength: 2048 }] },
    sites: listOf({ minItems: 1, maxItems: 20 }, ['name', 'host'], { name: { type: 'string', minLength: 1, maxLength: 120 }, host: { type: 'string', maxLength: 253, pattern: HOST } }),
    operations: listOf(
      { minItems: 1, maxItems: 20 },
      ['name', 'label', 'description', 'input_schema', 'output_schema', 'recipe', 'examples'],
      {
        name: { type: 'string', pattern: '^[a-z][a-z0-9_]{0,99}$' },
        label: { type: 'string', minLength: 1, maxLength: 120 },
        description: { type: 'string', maxLength: 2000 },
        cost_credits: { type: 'integer', minimum: 0, maximum: 1000 },
        performs_actions: { type: 'boolean' },
        input_schema: { type: 'object' },
        output_schema: { type: 'object' },
        recipe: { type: 'object' },
        examples: listOf({ minItems: 1, maxItems: 10 }, ['input', 'output'], { title: { type: 'string', maxLength: 200 }, input: { type: 'object' }, output: true }),
        access: listOf({ maxItems: 10 }, ['kind', 'name', 'site'], {
          kind: { enum: ['account', 'access_key'] },
          name: { type: 'string', pattern: '^[A-Za-z][A-Za-z0-9_]{0,63}$' },
          site: { type: 'string', maxLength: 253, pattern: HOST },
        }),
      },
    ),
  },
} as const;

const ajv = addFormats(new Ajv2020({ allErrors: true, strict: false, code: { regExp: linearRegExp } }));
const checkStructure = ajv.compile(DEFINITION_SCHEMA);

function ajvIssue(e: ErrorObject, prefix = ''): ValidationIssue {
  const extra = e.keyword === 'additionalProperties' ? ` ("${String(e.params.additionalProperty)}")` : e.keyword === 'required' ? ` ("${String(e.params.missingProperty)}")` : '';
  return { path: `${prefix}${e.instancePath}` || '/', message: `${e.message ?? 'is invalid'}${extra}` };
}

/**
 * Regular expressions a built workflow carries (`pattern`, `patternProperties` in its schemas, a
 * recipe field's `pattern`) run in the API and the worker on other people's input, always on RE2's
 * linear-time engine (shared/regex.ts: no catastrophic backtracking, whatever the pattern). A pattern
 * that engine cannot run (lookaround, backreferences) is refused here, at any depth: a definition
 * nested deeper than this walk goes is refused as a whole.
 */
const MAX_PATTERN_DEPTH = 64;

/** How deep a definition may nest anywhere (examples included): far beyond any real one, far below the stack's limit. */
const MAX_DEFINITION_DEPTH = 256;

/** Whether objects and arrays nest more than `limit` levels deep (without recursion: any depth is safe to ask about). */
function nestedDeeper(value: unknown, limit: number): boolean {
  const stack: Array<[unknown, number]> = [[value, 0]];
  while (stack.length > 0) {
    const [v, depth] = stack.pop()!;
    if (!v || typeof v !== 'object') continue;
    if (depth >= limit) return true;
    for (const child of Object.values(v)) if (child && typeof child === 'object') stack.push([child, depth + 1]);
  }
  return false;
}
function unsafePatterns(value: unknown, at: string, issues: ValidationIssue[], depth = 0): void {
  if (!value || typeof value !== 'object') return;
  if (depth > MAX_PATTERN_DEPTH) {
    issues.push({ path: at, message: `nested more than ${MAX_PATTERN_DEPTH} levels deep` });
    return;
  }
  for (const [k, v] of Object.entries(value)) {
    const here = `${at}/${k.replace(/~/g, '~0').replace(/\//g, '~1')}`;
    if (k === 'pattern' && typeof v === 'string') {
      const problem = patternProblem(v);
      if (problem) issues.push({ path: here, message: problem });
    }
    if (k === 'patternProperties' && v && typeof v === 'object' && !Array.isArray(v)) {
      for (const p of Object.keys(v)) {
        const problem = patternProblem(p);
        if (problem) issues.push({ path: `${here}/${p.replace(/~/g, '~0').replace(/\//g, '~1')}`, message: problem });
      }
    }
    unsafePatterns(v, here, issues, depth + 1);
  }
}

/** "steps[0].url" (the recipe parser's path) or "steps/0/action" (the catalog check's) as a JSON Pointer under `base`. */
function recipePointer(base: string, path: string): string {
  const segs = path.replace(/\[(\d+)\]/g, '.$1').split(/[./]/).filter(Boolean);
  return [base, ...segs.map((s) => s.replace(/~/g, '~0').replace(/\//g, '~1'))].join('/');
}

/** Compile a user's JSON Schema; undefined with an issue when it is not one. */
function compileSchema(schema: JsonSchema, at: string, issues: ValidationIssue[]) {
  try {
    // Not the definition format's ajv: an organization's `$id` must not stay registered (shared/org-schemas.ts).
    return compileOrgSchema(schema);
  } catch (err) {
    issues.push({ path: at, message: `is not a valid JSON Schema: ${err instanceof Error ? err.message : 'unknown error'}` });
    return undefined;
  }
}

/**
 * Text people read in the catalog, the console and agents' tool lists follows the rule of every
 * other name the service shows (display-text.ts): no control, direction or invisible character. A
 * description may break lines and hold tabs.
 */
function readableIssues(def: BuilderDefinition): ValidationIssue[] {
  const issues: ValidationIssue[] = [];
  const check = (value: string | undefined, path: string, multiline = false) => {
    const problem = value === undefined ? null : displayTextProblem(multiline ? value.replace(/[\n\t]/g, ' ') : value);
    if (problem) issues.push({ path, message: problem });
  };
  check(def.name, '/name');
  check(def.description, '/description', true);
  def.sites.forEach((site, i) => check(site.name, `/sites/${i}/name`));
  def.operations.forEach((op, i) => {
    check(op.label, `/operations/${i}/label`);
    check(op.description, `/operations/${i}/description`, true);
    op.examples.forEach((ex, j) => check(ex.title, `/operations/${i}/examples/${j}/title`));
  });
  return issues;
}

/** The definition's problems; empty when it can be test-run and published. */
export function definitionIssues(json: unknown): ValidationIssue[] {
  // Depth first: serializing a value nested thousands deep (a 10 KB console form can be) overflows
  // the stack; no definition comes near this (its schemas are held to 64 levels below).
  if (nestedDeeper(json, MAX_DEFINITION_DEPTH)) return [{ path: '/', message: `is nested more than ${MAX_DEFINITION_DEPTH} levels deep` }];
  // Bounded before anything else: the whole definition travels in a test run's workflow input.
  const bytes = Buffer.byteLength(JSON.stringify(json) ?? '');
  if (bytes > MAX_DEFINITION_BYTES) return [{ path: '/', message: `is ${bytes} bytes of JSON; at most ${MAX_DEFINITION_BYTES} are accepted` }];
  if (!checkStructure(json)) return (checkStructure.errors ?? []).map((e) => ajvIssue(e));
  const def = json as unknown as BuilderDefinition;
  const issues: ValidationIssue[] = readableIssues(def);
  const hosts = new Set(def.sites.map((s) => s.host));
  const seen = new Set<string>();
  def.operations.forEach((op, i) => {
    const at = `/operations/${i}`;
    if (seen.has(op.name)) issues.push({ path: `${at}/name`, message: `operation "${op.name}" is defined twice` });
    seen.add(op.name);
    if (op.input_schema.type !== 'object') issues.push({ path: `${at}/input_schema/type`, message: 'must be "object": a query input is a JSON object' });
    const parsed = safeParseRecipe(op.recipe);
    if (!parsed.ok) {
      for (const p of parsed.issues) issues.push({ path: recipePointer(`${at}/recipe`, p.path), message: p.message });
    } else {
      parsed.recipe.hosts.forEach((h, j) => {
        if (!hosts.has(h)) issues.push({ path: `${at}/recipe/hosts/${j}`, message: `host "${h}" is not one of the definition's sites` });
      });
      // performs_actions follows the recipe; a declared value must agree (the catalog's own check).
      const derived = recipeActions(parsed.recipe).performsActions;
      try {
        validateOperationVersion(op.recipe, toOperation(op, 1, derived, op.performs_actions));
      } catch (err) {
        if (!(err instanceof RecipeValidationError)) throw err;
        for (const p of err.issues) issues.push({ path: p.path === 'performs_actions' ? `${at}/performs_actions` : recipePointer(`${at}/recipe`, p.path), message: p.message });
      }
    }
    (op.access ?? []).forEach((a, j) => {
      if (!hosts.has(a.site)) issues.push({ path: `${at}/access/${j}/site`, message: `site "${a.site}" is not one of the definition's sites` });
    });
    // (A recipe field's pattern is the recipe parser's to check: shared/recipes/schema.ts.)
    const before = issues.length;
    unsafePatterns({ input_schema: op.input_schema, output_schema: op.output_schema }, at, issues);
    // A pattern already refused above would only be refused again as a schema that does not compile.
    if (issues.length > before) return;
    const input = compileSchema(op.input_schema, `${at}/input_schema`, issues);
    const output = compileSchema(op.output_schema, `${at}/output_schema`, issues);
    // Catalog detail and svc_get_workflow list every field path in full (selectable_fields).
    const fields = selectableFields(op.output_schema, MAX_SELECTABLE_FIELDS + 1);
    const chars = fields.reduce((n, f) => n + f.length, 0);
    if (fields.length > MAX_SELECTABLE_FIELDS) {
      issues.push({ path: `${at}/output_schema`, message: `declares more than ${MAX_SELECTABLE_FIELDS} fields (counting every nested one); at most ${MAX_SELECTABLE_FIELDS} are accepted` });
    } else if (chars > MAX_SELECTABLE_FIELDS_CHARS) {
      issues.push({ path: `${at}/output_schema`, message: `has field paths of ${chars} characters in all (each nested field's path written out in full); at most ${MAX_SELECTABLE_FIELDS_CHARS} are accepted` });
    }
    op.examples.forEach((ex, j) => {
      if (input && !input(ex.input)) for (const e of input.errors ?? []) issues.push(ajvIssue(e, `${at}/examples/${j}/input`));
      if (output && !output(ex.output)) for (const e of output.errors ?? []) issues.push(ajvIssue(e, `${at}/examples/${j}/output`));
    });
  });
  return issues;
}

/**
 * What stops a valid definition from being shared. A shared workflow runs with the CALLING
 * organization's connections, so its recipe may reach only the sites those connections are for:
 * otherwise its author could send another organization's key or session to a host of their own.
 */
export function shareIssues(def: BuilderDefinition): ValidationIssue[] {
  const issues: ValidationIssue[] = [];
  def.operations.forEach((op, i) => {
    const access = op.access ?? [];
    if (access.length === 0) return;
    const allowed = new Set(access.map((a) => a.site));
    const parsed = safeParseRecipe(op.recipe);
    if (!parsed.ok) return;
    parsed.recipe.hosts.forEach((h, j) => {
      if (!allowed.has(h)) {
        issues.push({ path: `/operations/${i}/recipe/hosts/${j}`, message: `a shared workflow sends callers' connections only to their sites: "${h}" is not the site of an access requirement` });
      }
    });
  });
  return issues;
}

/** A valid definition, or `invalid_input` (400) whose details.issues point into it. */
export function parseDefinition(json: unknown): BuilderDefinition {
  const issues = definitionIssues(json);
  if (issues.length) {
    const shown = issues.slice(0, 50);
    throw new ServiceError('invalid_input', `The workflow definition is invalid: ${shown[0]!.path}: ${shown[0]!.message}${issues.length > 1 ? ` (and ${issues.length - 1} more)` : ''}`, {
      param: 'definition',
      details: { issues: shown },
    });
  }
  return json as BuilderDefinition;
}

/** Whether the operation's recipe has action steps (the definition is valid). */
export function performsActions(op: BuilderOperation): boolean {
  const parsed = safeParseRecipe(op.recipe);
  return parsed.ok && recipeActions(parsed.recipe).performsActions;
}

/** The operation as the catalog stores it, at one version. */
export function toOperation(op: BuilderOperation, version: number, derived = performsActions(op), declared = derived): OperationDefinition {
  return {
    name: op.name,
    label: op.label,
    description: op.description,
    cost_credits: op.cost_credits ?? 1,
    performs_actions: declared,
    default_version: version,
    access: op.access ?? [],
    versions: [{ version, input_schema: op.input_schema, output_schema: op.output_schema, examples: op.examples, recipe: op.recipe }],
  };
}

/** The catalog's view of the whole definition (no icons: a built workflow has none yet). */
export function toApiDefinition(def: BuilderDefinition, version: number): ApiDefinition {
  return {
    handle: def.handle,
    name: def.name,
    description: def.description,
    category: def.category,
    website_url: def.website_url ?? null,
    sites: def.sites.map((s) => ({ name: s.name, host: s.host })),
    operations: def.operations.map((op) => toOperation(op, version)),
  };
}

/** The definition's identity: SHA-256 of its canonical JSON (key order and whitespace do not count). */
export const definitionHash = (def: BuilderDefinition): string => canonicalHash(def);
