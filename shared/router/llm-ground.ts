// "Never invent a required value" on the LLM path: a value the model filled is kept only when the
// prompt itself shows it (the same span, the same number) or the offline filler, which takes values
// only from evidence, found the same one. Anything else is dropped, and the offline filler's value
// for that field (if it has one) stands in; a required field left without a value is reported
// missing. Enum, date, pattern, number and boolean fields the offline filler filled keep its value.
import type { JsonSchema } from '../catalog/types.ts';
import type { FillResult, MissingField } from './types.ts';
import { setOwn } from './fill.ts';

type Prop = Record<string, unknown>;
const isObj = (v: unknown): v is Prop => v !== null && typeof v === 'object' && !Array.isArray(v);

const normalize = (s: string) =>
  s
    .normalize('NFKC')
    .toLowerCase()
    .replace(/[\s\u00a0]+/g, ' ')
    .trim();

/** Whether `value` appears in the prompt as whole words (so "a" or "lon" never ground on "London"). */
function inPrompt(prompt: string, value: string): boolean {
  const v = normalize(value).replace(/^["'“”‘’«»]+|["'“”‘’«».,;:!?]+$/g, '');
  if (!v) return false;
  const escaped = v.replace(/[.*+?^${}()|[\]\\]/g, '\\$&');
  return new RegExp(`(?:^|[^\\p{L}\\p{N}])${escaped}(?:$|[^\\p{L}\\p{N}])`, 'u').test(prompt);
}

function numbersIn(prompt: string): Set<number> {
  return new Set([...prompt.matchAll(/\d+(?:\.\d+)?/g)].map((m) => Number(m[0])));
}

const same = (a: unknown, b: unknown) => JSON.stringify(a) === JSON.stringify(b);

/** Fields whose value the offline filler decides from typed evidence; its value there wins. */
function checkable(p: Prop): boolean {
  return Array.isArray(p.enum) || typeof p.format === 'string' || typeof p.pattern === 'string' || ['integer', 'number', 'boolean'].includes(String(p.type));
}

/** Whether one value the model filled is shown by the prompt. */
function grounded(value: unknown, prompt: string, numbers: Set<number>): boolean {
  if (typeof value === 'string') return inPrompt(prompt, value);
  if (typeof value === 'number') return Number.isFinite(value) && numbers.has(Math.abs(value));
  return false; // booleans, objects, arrays: only the offline filler's evidence counts
}

export function groundFill(schema: JsonSchema, llmInput: Record<string, unknown>, offline: FillResult, prompt: string): FillResult & { dropped: string[] } {
  const props = isObj(schema.properties) ? schema.properties : {};
  const text = normalize(prompt);
  const numbers = numbersIn(text);
  const input: Record<string, unknown> = {};
  const dropped: string[] = [];
  for (const [name, raw] of Object.entries(props)) {
    const p = isObj(raw) ? raw : {};
    const theirs = llmInput[name];
    const ours = offline.input[name];
    if (theirs === undefined || theirs === null || theirs === '') {
      if (ours !== undefined) setOwn(input, name, ours);
      continue;
    }
    if (ours !== undefined && (same(theirs, ours) || checkable(p))) setOwn(input, name, ours);
    else if (grounded(theirs, text, numbers)) setOwn(input, name, theirs);
    else {
      dropped.push(name);
      if (ours !== undefined) setOwn(input, name, ours);
    }
  }
  // Names the schema does not have are not the model's to add.
  for (const name of Object.keys(llmInput)) if (!Object.hasOwn(props, name)) dropped.push(name);
  // Whatever the offline filler took from attachments or elsewhere beyond the schema's properties stays.
  for (const [name, v] of Object.entries(offline.input)) if (!Object.hasOwn(input, name) && !Object.hasOwn(props, name)) setOwn(input, name, v);
  const required = Array.isArray(schema.required) ? schema.required.filter((x): x is string => typeof x === 'string') : [];
  const missing: MissingField[] = required
    .filter((name) => !Object.hasOwn(input, name))
    .map((name) => {
      const known = offline.missing.find((m) => m.field === `/${name.replace(/~/g, '~0').replace(/\//g, '~1')}`);
      const p = props[name];
      return known ?? { field: `/${name.replace(/~/g, '~0').replace(/\//g, '~1')}`, description: isObj(p) && typeof p.description === 'string' ? p.description : name.replace(/_/g, ' ') };
    });
  return { input, missing, dropped };
}
