// Runs the labelled prompts (cases.jsonl) against a real router on a database holding the demo
// catalog, and measures what issue 10 targets: top-1 accuracy and top-3 recall on prompts an
// operation serves, correct abstention on those none serves (and no action chosen for an
// out-of-scope action prompt), exact match of the filled input, and rank latency.
// Shared by test/router-eval.test.ts (enforces the targets) and bench/router.ts (reports them).
import { readFileSync } from 'node:fs';
import { isDeepStrictEqual } from 'node:util';
import type { Db } from '../../shared/db/pool.ts';
import type { PromptRouter } from '../../shared/router/index.ts';

export interface EvalCase {
  id: string;
  split: 'dev' | 'heldout';
  prompt: string;
  /** null: no operation may be chosen. */
  expect: { api: string; operation: string; input: Record<string, unknown> } | null;
  kind?: 'out_of_scope' | 'out_of_scope_action' | 'action_incomplete';
  /** Reference time for relative dates; 2026-11-23T12:00:00Z (a Monday) when absent. */
  now?: string;
  time_zone?: string;
}

export const DEFAULT_NOW = '2026-11-23T12:00:00Z';

export function loadCases(): EvalCase[] {
  const text = readFileSync(new URL('./cases.jsonl', import.meta.url), 'utf8');
  return text
    .split('\n')
    .filter((l) => l.trim())
    .map((l) => JSON.parse(l) as EvalCase);
}

export interface EvalFailure {
  id: string;
  prompt: string;
  what: 'top1' | 'abstain' | 'fill';
  expected: unknown;
  got: unknown;
}

export interface EvalReport {
  cases: number;
  in_scope: number;
  out_of_scope: number;
  top1: number;
  top3: number;
  abstention: number;
  /** Out-of-scope prompts asking for an action for which an operation was chosen (must be 0). */
  actions_chosen_out_of_scope: number;
  fill_exact: number;
  latency: { p50_ms: number; p95_ms: number };
  failures: EvalFailure[];
}

const pct = (n: number, d: number) => (d === 0 ? 1 : Math.round((n / d) * 10_000) / 10_000);
function percentile(xs: number[], p: number): number {
  const s = [...xs].sort((a, b) => a - b);
  if (s.length === 0) return NaN;
  return Math.round(s[Math.min(s.length - 1, Math.max(0, Math.ceil((p / 100) * s.length) - 1))]! * 100) / 100;
}

interface TargetRow {
  label: string;
  labels: string[];
  input_schema: Record<string, unknown>;
  performs_actions: boolean;
}

/** The operation's default version as the query service would hand it to `fill`. */
async function target(db: Db, api: string, operation: string): Promise<TargetRow | undefined> {
  const r = await db.query<TargetRow>(
    `SELECT o.label, o.labels, v.input_schema, o.performs_actions
       FROM operations o JOIN apis a ON a.id = o.api_id
       JOIN operation_versions v ON v.operation_id = o.id AND v.version = o.default_version
      WHERE a.handle = $1 AND a.visibility = 'public' AND o.name = $2`,
    [api, operation],
  );
  return r.rows[0];
}

export async function evaluate(router: PromptRouter, db: Db, orgId: string, cases: EvalCase[]): Promise<EvalReport> {
  const failures: EvalFailure[] = [];
  const times: number[] = [];
  let inScope = 0;
  let top1 = 0;
  let top3 = 0;
  let oos = 0;
  let abstained = 0;
  let actionsChosen = 0;
  let fillExact = 0;
  for (const c of cases) {
    const t0 = performance.now();
    const r = await router.rank(c.prompt, { orgId });
    times.push(performance.now() - t0);
    const chosen = r.chosen ? `${r.chosen.api}.${r.chosen.operation}` : null;
    if (!c.expect) {
      oos++;
      if (!chosen) abstained++;
      else {
        if (c.kind === 'out_of_scope_action') actionsChosen++;
        failures.push({ id: c.id, prompt: c.prompt, what: 'abstain', expected: null, got: { chosen, reason: r.reason, candidates: r.candidates.slice(0, 3) } });
      }
      continue;
    }
    inScope++;
    const want = `${c.expect.api}.${c.expect.operation}`;
    if (chosen === want) top1++;
    else failures.push({ id: c.id, prompt: c.prompt, what: 'top1', expected: want, got: { chosen, reason: r.reason, candidates: r.candidates.slice(0, 3).map((x) => `${x.operation}:${x.score}`) } });
    if (r.candidates.slice(0, 3).some((x) => `${x.api}.${x.operation}` === want)) top3++;
    // Filling is measured against the expected operation, apart from ranking.
    const t = await target(db, c.expect.api, c.expect.operation);
    if (!t) throw new Error(`${c.id}: ${want} is not in the catalog`);
    const filled = await router.fill(
      { api: c.expect.api, operation: c.expect.operation, label: t.label, labels: t.labels, input_schema: t.input_schema, performs_actions: t.performs_actions, examples: [] },
      c.prompt,
      [],
      { now: new Date(c.now ?? DEFAULT_NOW), timeZone: c.time_zone },
    );
    if (isDeepStrictEqual(filled.input, c.expect.input)) fillExact++;
    else failures.push({ id: c.id, prompt: c.prompt, what: 'fill', expected: c.expect.input, got: filled.input });
  }
  return {
    cases: cases.length,
    in_scope: inScope,
    out_of_scope: oos,
    top1: pct(top1, inScope),
    top3: pct(top3, inScope),
    abstention: pct(abstained, oos),
    actions_chosen_out_of_scope: actionsChosen,
    fill_exact: pct(fillExact, inScope),
    latency: { p50_ms: percentile(times, 50), p95_ms: percentile(times, 95) },
    failures,
  };
}

/** Issue 10's targets. */
export const TARGETS = { top1: 0.95, abstention: 0.95, fill_exact: 0.9, p95_ms: 30, actions_chosen_out_of_scope: 0 };
