// Health check, run by a Temporal Schedule (apps/worker/health-schedule.ts): every read-only
// operation's default version runs its verified examples against the website, and the outcome is
// recorded per operation (operations.health_status, verified_at, health_checked_at, health_detail).
//
// Status (see activities/types.ts HealthStatus): `healthy` when every example returned its
// documented output, `degraded` when some did, `failing` when none did, `unverifiable` for
// operations that perform actions or need a connection (never run) or have no examples.
// verified_at moves only on a fully successful check. A website failure is a result, never a
// workflow failure: one broken site or operation does not stop the others. An example the website
// rate-limited (`source_rate_limited`, after the retries) says nothing about the operation: it is
// left out of the count, and an operation with no other result keeps its status (checked, not verified).
//
// One run checks at most `batchSize` operations, then continues as new with the summary so far,
// listing only operations not checked since the chain began: no history, activity result or
// summary grows with the catalog (every organization's workflows are checked here). Runs started
// before batches (`patched('health-batches')`) replay as they ran: one list, one run.
import { ActivityFailure, ApplicationFailure, TimeoutFailure, continueAsNew, patched, proxyActivities, proxyLocalActivities } from '@temporalio/workflow';
import type { HealthActivities, HealthExampleResult, HealthStatus, HealthTarget } from '../activities/types.ts';

export interface HealthCheckInput {
  /** Only these API handles (default: every active, available API). */
  apis?: string[];
  /** Operations checked at once (default 2). Examples of one operation run one after another. */
  concurrency?: number;
  /** Time limit of one example run (default 60 s). */
  exampleTimeoutMs?: number;
  /**
   * Task queue of browser work (the Schedule passes it): a browser operation's examples run there,
   * on the workers that run Chromium, never on an `http` worker. Unset: every example on this queue.
   */
  browserTaskQueue?: string;
  /** Operations per run of the chain (default 100, at most 500). */
  batchSize?: number;
  /** Set by the chain itself when it continues as new: when its first run began, and the summary so far. */
  chain?: { startedAt: number; summary: HealthCheckSummary };
}

export interface HealthCheckSummary {
  checked: number;
  /** `unknown` here: checked, but nothing was conclusive (the status stored before stands). */
  counts: Record<HealthStatus, number>;
  /** At most OPERATIONS_LISTED, the ones not healthy first; `omitted` counts the others. */
  operations: Array<{ api: string; operation: string; version: number; status: HealthStatus; detail: string; recorded: boolean }>;
  omitted?: number;
}

/** patched() id of checking the catalog in batches, continuing as new between them. */
export const HEALTH_BATCHES = 'health-batches';
const DEFAULT_BATCH = 100;
const MAX_BATCH = 500;
/** Operations a summary names (an operator reads it in the history; it is carried from run to run). */
export const OPERATIONS_LISTED = 200;
/** A website rate-limiting the health check's own requests says nothing about the operation. */
const INCONCLUSIVE = new Set(['source_rate_limited']);

/** Attempts per example when the site answers with a retryable failure (a flaky endpoint). */
const EXAMPLE_ATTEMPTS = 3;

// Database steps: local activities, retried for a while; a lost write is logged in the summary, not fatal.
const store = proxyLocalActivities<HealthActivities>({
  startToCloseTimeout: '10 seconds',
  retry: { initialInterval: '200 milliseconds', backoffCoefficient: 2, maximumInterval: '5 seconds', maximumAttempts: 10 },
});

function failureOf(err: unknown): { code: string; detail: string } {
  const cause = err instanceof ActivityFailure ? err.cause : err;
  if (cause instanceof TimeoutFailure) return { code: 'execution_timeout', detail: 'The example did not finish within its time limit' };
  if (cause instanceof ApplicationFailure) return { code: cause.type ?? 'internal_error', detail: cause.message };
  return { code: 'internal_error', detail: 'The example could not be run' };
}

/**
 * An operation's status from its examples' results; `null` when none was conclusive (the website
 * rate-limited every one), so the status it had stands. `verified`: every example returned its
 * documented output (one set aside was not verified).
 */
export function summarize(target: HealthTarget, results: HealthExampleResult[]): { status: HealthStatus | null; detail: string; verified: boolean } {
  const inconclusive = (r: HealthExampleResult) => !r.ok && INCONCLUSIVE.has(r.code ?? '');
  const conclusive = results.filter((r) => !inconclusive(r));
  const passed = conclusive.filter((r) => r.ok).length;
  const total = conclusive.length;
  const setAside = results.length - total;
  const aside = setAside > 0 ? `; ${setAside} rate-limited by the website, not counted` : '';
  if (total === 0) return { status: null, detail: `Not verified: the website rate-limited all ${results.length} examples; the previous status stands`, verified: false };
  const status: HealthStatus = passed === total ? 'healthy' : passed === 0 ? 'failing' : 'degraded';
  if (status === 'healthy') return { status, detail: `${passed}/${total} examples returned their documented output${aside}`, verified: setAside === 0 };
  const failures = results
    .map((r, i) => (r.ok || inconclusive(r) ? null : `"${target.exampleTitles[i]}": ${r.code}${r.detail ? ` (${r.detail})` : ''}`))
    .filter((s): s is string => s !== null);
  return { status, detail: `${passed}/${total} examples passed; ${failures.join('; ')}${aside}`, verified: false };
}

type Listed = HealthCheckSummary['operations'][number];

/** Adds an operation to the summary's bounded list: past OPERATIONS_LISTED, one not healthy takes a healthy one's place. */
export function listInSummary(summary: HealthCheckSummary, entry: Listed): void {
  const quiet = (o: Listed) => o.status === 'healthy' || o.status === 'unverifiable';
  if (summary.operations.length < OPERATIONS_LISTED) {
    summary.operations.push(entry);
    return;
  }
  summary.omitted = (summary.omitted ?? 0) + 1;
  if (quiet(entry)) return;
  const i = summary.operations.findIndex(quiet);
  if (i >= 0) summary.operations[i] = entry;
}

export async function healthCheckWorkflow(input: HealthCheckInput = {}): Promise<HealthCheckSummary> {
  const exampleTimeoutMs = Math.max(1_000, input.exampleTimeoutMs ?? 60_000);
  const concurrency = Math.max(1, Math.floor(input.concurrency ?? 2));
  const siteOptions = {
    startToCloseTimeout: exampleTimeoutMs + 5_000,
    retry: { initialInterval: '1 second', backoffCoefficient: 2, maximumInterval: '5 seconds', maximumAttempts: EXAMPLE_ATTEMPTS },
  };
  const site = proxyActivities<HealthActivities>(siteOptions);
  // A browser example may first wait for a page: health checks never hold every page, and queries
  // come first, so with the defaults one browser example waits behind another. Its time limit starts
  // once it has its page; the wait has its own bound, long enough to wait behind every other lane.
  const pageWaitMs = exampleTimeoutMs * concurrency;
  // Replay-safe without a patch marker: only runs started with browserTaskQueue in their input, and
  // targets listed with an engine, take this path; recorded histories have neither. (An activity's
  // timeouts and arguments are not compared on replay.)
  const browserSite = proxyActivities<HealthActivities>({
    ...siteOptions,
    startToCloseTimeout: exampleTimeoutMs + pageWaitMs + 5_000,
    ...(input.browserTaskQueue ? { taskQueue: input.browserTaskQueue } : {}),
  });

  const batched = patched(HEALTH_BATCHES);
  const batchSize = Math.min(MAX_BATCH, Math.max(1, Math.floor(input.batchSize ?? DEFAULT_BATCH)));
  const startedAt = input.chain?.startedAt ?? Date.now();
  const targets = await store.listHealthTargets(batched ? { apis: input.apis, limit: batchSize, checkedBefore: startedAt } : { apis: input.apis });
  const summary: HealthCheckSummary = input.chain?.summary ?? {
    checked: 0,
    counts: { unknown: 0, healthy: 0, degraded: 0, failing: 0, unverifiable: 0 },
    operations: [],
  };
  let recordedAny = false;

  const checkOne = async (t: HealthTarget) => {
    const checkedAt = Date.now();
    let status: HealthStatus | null;
    let detail: string;
    let verified = false;
    if (t.skipReason) {
      status = 'unverifiable';
      detail = t.skipReason;
    } else {
      const results: HealthExampleResult[] = [];
      for (let index = 0; index < t.exampleTitles.length; index++) {
        try {
          const browser = t.engine === 'browser';
          const runner = browser ? browserSite : site;
          results.push(
            await runner.runHealthExample({ operationId: t.operationId, version: t.version, index, timeoutMs: exampleTimeoutMs, attempts: EXAMPLE_ATTEMPTS, ...(browser ? { pageWaitMs } : {}) }),
          );
        } catch (err) {
          results.push({ ok: false, ms: 0, ...failureOf(err) });
        }
      }
      ({ status, detail, verified } = summarize(t, results));
    }
    let recorded = false;
    try {
      // Without a status (nothing conclusive), only the check's time and detail are written.
      ({ recorded } = await store.recordHealth({ operationId: t.operationId, version: t.version, status, detail, checkedAt, verified }));
    } catch {
      // The database stayed unreachable: this operation keeps its previous health until the next run.
    }
    recordedAny ||= recorded;
    summary.checked += 1;
    summary.counts[status ?? 'unknown'] += 1;
    listInSummary(summary, { api: t.api, operation: t.operation, version: t.version, status: status ?? 'unknown', detail, recorded });
  };

  // Bounded concurrency: `concurrency` lanes take the next operation until none is left.
  let next = 0;
  const lane = async () => {
    while (next < targets.length) await checkOne(targets[next++]!);
  };
  await Promise.all(Array.from({ length: Math.min(concurrency, targets.length) }, lane));
  // A full batch: more may be left. A batch that recorded nothing (the database refusing every
  // write) ends the chain rather than listing the same operations again.
  if (batched && targets.length >= batchSize && recordedAny) {
    await continueAsNew<typeof healthCheckWorkflow>({ ...input, chain: { startedAt, summary } });
  }
  const key = (o: { api: string; operation: string }) => `${o.api} ${o.operation}`;
  summary.operations.sort((a, b) => (key(a) < key(b) ? -1 : key(a) > key(b) ? 1 : 0));
  return summary;
}
