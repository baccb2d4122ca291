// Health check, run by a Temporal Schedule (apps/worker/health-schedule.ts): every read-only
// operation's default version runs its verified examples against the website, and the outcome is
// recorded per operation (operations.health_status, verified_at, health_checked_at, health_detail).
//
// Status (see activities/types.ts HealthStatus): `healthy` when every example returned its
// documented output, `degraded` when some did, `failing` when none did, `unverifiable` for
// operations that perform actions or need a connection (never run) or have no examples.
// verified_at moves only on a fully successful check. A website failure is a result, never a
// workflow failure: one broken site or operation does not stop the others.
import { ActivityFailure, ApplicationFailure, TimeoutFailure, proxyActivities, proxyLocalActivities } from '@temporalio/workflow';
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
}

export interface HealthCheckSummary {
  checked: number;
  counts: Record<HealthStatus, number>;
  operations: Array<{ api: string; operation: string; version: number; status: HealthStatus; detail: string; recorded: boolean }>;
}

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

function summarize(target: HealthTarget, results: HealthExampleResult[]): { status: HealthStatus; detail: string } {
  const passed = results.filter((r) => r.ok).length;
  const total = results.length;
  const status: HealthStatus = passed === total ? 'healthy' : passed === 0 ? 'failing' : 'degraded';
  if (status === 'healthy') return { status, detail: `${passed}/${total} examples returned their documented output` };
  const failures = results
    .map((r, i) => (r.ok ? null : `"${target.exampleTitles[i]}": ${r.code}${r.detail ? ` (${r.detail})` : ''}`))
    .filter((s): s is string => s !== null);
  return { status, detail: `${passed}/${total} examples passed; ${failures.join('; ')}` };
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

  const targets = await store.listHealthTargets({ apis: input.apis });
  const summary: HealthCheckSummary = {
    checked: 0,
    counts: { unknown: 0, healthy: 0, degraded: 0, failing: 0, unverifiable: 0 },
    operations: [],
  };

  const checkOne = async (t: HealthTarget) => {
    const checkedAt = Date.now();
    let status: HealthStatus;
    let detail: string;
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
      ({ status, detail } = summarize(t, results));
    }
    let recorded = false;
    try {
      ({ recorded } = await store.recordHealth({ operationId: t.operationId, status, detail, checkedAt, verified: status === 'healthy' }));
    } catch {
      // The database stayed unreachable: this operation keeps its previous health until the next run.
    }
    summary.checked += 1;
    summary.counts[status] += 1;
    summary.operations.push({ api: t.api, operation: t.operation, version: t.version, status, detail, recorded });
  };

  // Bounded concurrency: `concurrency` lanes take the next operation until none is left.
  let next = 0;
  const lane = async () => {
    while (next < targets.length) await checkOne(targets[next++]!);
  };
  await Promise.all(Array.from({ length: Math.min(concurrency, targets.length) }, lane));
  const key = (o: { api: string; operation: string }) => `${o.api} ${o.operation}`;
  summary.operations.sort((a, b) => (key(a) < key(b) ? -1 : key(a) > key(b) ? 1 : 0));
  return summary;
}
