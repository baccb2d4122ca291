// max_chars bounds the whole answer of a tool, not only a run's output: the text content is the
// JSON of the structured content, so both stay within the bound together. What is dropped is
// marked `truncated` and the `message` says how to ask for less.
import { MAX_CHARS, type RunResult } from './schemas.ts';
import { shorten } from './shorten.ts';

export const size = (v: unknown): number => (v === undefined ? 0 : JSON.stringify(v).length);

const RAISE = `raise max_chars (up to ${MAX_CHARS.max})`;

/** A run's answer within maxChars: the output is shortened to what the rest of the answer leaves. */
export function boundRun(result: RunResult, maxChars: number = MAX_CHARS.default): RunResult {
  if (size(result) <= maxChars) return result;
  const { output, ...rest } = result;
  let out: RunResult = { ...rest };
  if (output !== undefined) {
    const fullChars = size(output);
    out.truncated = true;
    out.message =
      `The output has ${fullChars} characters, more than fits in max_chars (${maxChars}); it was shortened. ` +
      `Ask for fewer fields with include or exclude (paths from svc_get_workflow's selectable_fields), or ${RAISE}.`;
    // `"output":` plus a separating comma
    const budget = maxChars - size(out) - 10;
    if (budget > 2) {
      const short = shorten(output, budget);
      if (size(short.value) <= budget) out.output = short.value;
    }
  }
  if (size(out) <= maxChars) return out;
  // An error's details (e.g. a long list of input issues) go next, then long texts.
  if (out.error && 'details' in out.error) {
    const { details, ...error } = out.error as Record<string, unknown> & RunResult['error'] & object;
    const budget = maxChars - size({ ...out, error }) - 12;
    const short = budget > 2 ? shorten(details, budget) : undefined;
    out = { ...out, error: { ...error, ...(short && size(short.value) <= budget ? { details: short.value } : {}) } as RunResult['error'], truncated: true };
  }
  return size(out) <= maxChars ? out : capTexts(out, maxChars);
}

/** Last resort for any answer: cap every long string until the JSON fits (messages keep their start). */
function capTexts<T>(value: T, maxChars: number): T {
  let v = value;
  for (let cap = 2000; cap >= 20 && size(v) > maxChars; cap = Math.floor(cap / 2)) v = capStrings(v, cap) as T;
  return v;
}

function capStrings(v: unknown, cap: number): unknown {
  if (typeof v === 'string') return v.length > cap ? `${v.slice(0, cap)}…` : v;
  if (Array.isArray(v)) return v.map((x) => capStrings(x, cap));
  if (v !== null && typeof v === 'object') return Object.fromEntries(Object.entries(v).map(([k, x]) => [k, capStrings(x, cap)]));
  return v;
}

interface SearchResult {
  workflows: Array<{ operations: unknown[] } & Record<string, unknown>>;
  truncated: boolean;
  message?: string;
}

/** svc_search_workflows within maxChars: whole workflows are dropped from the end, then operations. */
export function boundSearch<T extends SearchResult>(result: T, maxChars: number = MAX_CHARS.default): T & { message?: string } {
  if (size(result) <= maxChars) return result;
  const total = result.workflows.length;
  const workflows = result.workflows.map((w) => ({ ...w, operations: [...w.operations] }));
  const out = { ...result, workflows, truncated: true } as T;
  const say = () => {
    out.message =
      `${workflows.length} of ${total} workflows (${workflows.reduce((n, w) => n + w.operations.length, 0)} operations shown) fit in max_chars (${maxChars}). ` +
      `Narrow with query or api, lower limit, or ${RAISE}; svc_get_workflow lists one workflow's operations.`;
  };
  say();
  const fits = () => size(out) <= maxChars;
  keepFirst(workflows, 1, fits, say);
  const last = workflows[0];
  if (last) keepFirst(last.operations, 0, fits, say);
  return fits() ? out : capTexts(out, maxChars);
}

interface WorkflowResult {
  operations?: unknown[];
  operation?: { examples: unknown[]; selectable_fields: string[]; input_schema: Record<string, unknown>; output_schema: Record<string, unknown>; description: string } & Record<string, unknown>;
  truncated?: boolean;
  message?: string;
}

/**
 * svc_get_workflow within maxChars: examples go first, then operations of the list, selectable
 * fields, the output schema and at last the input schema (each replaced by a note).
 */
export function boundWorkflow<T extends WorkflowResult>(result: T, maxChars: number = MAX_CHARS.default): T & { truncated?: boolean; message?: string } {
  if (size(result) <= maxChars) return result;
  const out = { ...result, truncated: true } as T;
  const dropped: string[] = [];
  const say = () => {
    out.message = `Shortened to fit max_chars (${maxChars}): ${dropped.join(', ')}. ${out.operation ? `Call again with a higher max_chars (up to ${MAX_CHARS.max}) for the rest.` : `Name one operation, or ${RAISE}.`}`;
  };
  const fits = () => size(out) <= maxChars;
  if (out.operations) {
    const ops = [...out.operations];
    out.operations = ops;
    const total = ops.length;
    keepFirst(ops, 1, fits, () => {
      dropped[0] = `${ops.length} of ${total} operations shown`;
      say();
    });
  }
  if (out.operation) {
    const op = { ...out.operation, examples: [...out.operation.examples], selectable_fields: [...out.operation.selectable_fields] };
    out.operation = op;
    const steps: Array<[string, () => void]> = [
      ['examples left out', () => keepFirst(op.examples, 0, fits, say)],
      ['selectable_fields cut short', () => keepFirst(op.selectable_fields, 0, fits, say)],
      ['output_schema left out', () => leaveOut(op, 'output_schema')],
      ['input_schema left out', () => leaveOut(op, 'input_schema')],
    ];
    for (const [note, shrink] of steps) {
      if (fits()) break;
      dropped.push(note);
      say();
      shrink();
    }
  }
  say();
  return fits() ? out : capTexts(out, maxChars);
}

/**
 * Shortens `items` in place to its longest prefix (at least `min` items) for which `fits()` holds,
 * or to `min` items when none does; `changed()` runs after every change (it rewrites the message).
 * A binary search: O(log n) measures of the answer, where dropping one item at a time measured it
 * once per item dropped (a schema of thousands of fields took seconds of the event loop).
 */
function keepFirst<T>(items: T[], min: number, fits: () => boolean, changed: () => void): void {
  if (fits() || items.length <= min) return;
  const all = items.slice();
  const keep = (n: number) => {
    items.length = 0;
    for (let i = 0; i < n; i++) items.push(all[i]!);
    changed();
  };
  // Largest n in [min, all.length - 1] that fits (all.length itself does not).
  let lo = min;
  let hi = all.length - 1;
  while (lo < hi) {
    const mid = Math.ceil((lo + hi) / 2);
    keep(mid);
    if (fits()) lo = mid;
    else hi = mid - 1;
  }
  keep(lo);
}

function leaveOut(op: Record<string, unknown>, key: 'input_schema' | 'output_schema'): void {
  op[key] = { description: `left out: larger than max_chars allows` };
}
