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
// Patterns run on the linear-time engine (shared/regex.ts).
import { Ajv2020, type ValidateFunction } from 'ajv/dist/2020.js';
import addFormatsModule from 'ajv-formats';
import { linearRegExp } from './regex.ts';

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
  return ajv.compile(schema);
}
