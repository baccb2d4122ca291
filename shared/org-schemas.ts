// Compiling the JSON Schemas organizations write (a built workflow's input and output schemas) in
// processes every organization shares. Two things ajv does by default must not happen to them:
// - it registers a schema's `$id` on the instance and refuses any later schema with that id, the
//   same schema compiled again from a new object included ("schema with key or id … already
//   exists"): one organization's `$id` would refuse every other organization's schema with that id,
//   and the author's own next validation, test run or version, until the process restarts;
// - it keeps every compiled schema, keyed by the schema object, for the life of the instance: a
//   definition checked on every keystroke would grow the process without bound.
// So ids are not registered (`addUsedSchema: false`, as the LLM router's ajv), and the instance is
// replaced after a number of compilations (validators already handed out keep working).
// Patterns run on the linear-time engine (shared/regex.ts), all the matches of one value within one
// budget: a value holding a string too long to check against its pattern is invalid, with an error
// that says so at the string's path, instead of holding the thread.
import { Ajv2020, type ErrorObject, type ValidateFunction } from 'ajv/dist/2020.js';
import addFormatsModule from 'ajv-formats';
import { PATTERN_WORK_PER_VALUE, checkingPatterns, linearRegExp, type PatternRefusal } from './regex.ts';

const addFormats = addFormatsModule as unknown as (ajv: Ajv2020) => Ajv2020;

/** Compilations one ajv instance serves before a fresh one replaces it. */
const COMPILES_PER_INSTANCE = 256;

const fresh = () => addFormats(new Ajv2020({ allErrors: true, strict: false, addUsedSchema: false, code: { regExp: linearRegExp } }));

let ajv = fresh();
let compiles = 0;

/** A validator for a schema an organization wrote; throws when it is not a valid JSON Schema. */
export function compileOrgSchema(schema: object): ValidateFunction {
  if (++compiles > COMPILES_PER_INSTANCE) {
    ajv = fresh();
    compiles = 1;
  }
  const inner = ajv.compile(schema);
  const validate = ((data: unknown) => {
    const { result, refused } = checkingPatterns(() => inner(data));
    validate.errors = inner.errors;
    if (refused.length === 0) return result;
    validate.errors = withRefusals(inner.errors ?? [], refused, data);
    return false;
  }) as ValidateFunction;
  validate.schema = inner.schema;
  validate.schemaEnv = inner.schemaEnv;
  return validate;
}

const shown = (pattern: string) => JSON.stringify(pattern.length > 100 ? `${pattern.slice(0, 100)}…` : pattern);

/** Why `r` was not matched, as the message of an ajv error about it. */
export function refusalMessage(r: PatternRefusal, what = 'is'): string {
  const most = Math.max(0, Math.floor(PATTERN_WORK_PER_VALUE / r.instructions) - 1);
  return r.alone
    ? `${what} too long to check against pattern ${shown(r.pattern)}: ${r.text.length} characters, and this pattern (${r.instructions} instructions) is checked on at most ${most}`
    : `${what} too long to check against pattern ${shown(r.pattern)}: ${r.text.length} characters, and the strings checked before it in this value used the rest of the ${PATTERN_WORK_PER_VALUE} steps (characters × pattern instructions) one value may take`;
}

/** The value at a JSON Pointer (ajv's instancePath). */
function at(data: unknown, pointer: string): unknown {
  let cur = data;
  for (const raw of pointer.split('/').slice(1)) {
    const key = raw.replace(/~1/g, '/').replace(/~0/g, '~');
    if (cur === null || typeof cur !== 'object' || !Object.prototype.hasOwnProperty.call(cur, key)) return undefined;
    cur = (cur as Record<string, unknown>)[key];
  }
  return cur;
}

/**
 * ajv's errors, each `pattern` error about a string that was refused rather than matched saying so
 * (keyword `pattern`, `params.tooLongToCheck`); a refusal no error stands for (a property name
 * tested by `patternProperties`, a string under `not`, `if` or a branch of `anyOf` that another
 * branch satisfied) is added as an error of its own at the value's root.
 */
function withRefusals(errors: ErrorObject[], refused: PatternRefusal[], data: unknown): ErrorObject[] {
  const pending = new Set(refused);
  const out = errors.map((e) => {
    if (e.keyword !== 'pattern') return e;
    const value = at(data, e.instancePath);
    const r = [...pending].find((x) => x.pattern === e.params.pattern && x.text === value);
    if (!r) return e;
    pending.delete(r);
    return { ...e, params: { ...e.params, tooLongToCheck: true }, message: refusalMessage(r) };
  });
  for (const r of pending) {
    out.push({
      instancePath: '',
      schemaPath: '#',
      keyword: 'pattern',
      params: { pattern: r.pattern, tooLongToCheck: true },
      message: refusalMessage(r, 'holds a string or property name'),
    });
  }
  return out;
}
