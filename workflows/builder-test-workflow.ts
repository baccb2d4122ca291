// A builder test run: every verified example of a draft definition runs on the real engines, one
// after another (an action example acts on the site, so never two at once and never retried), and
// the outcome is recorded for publish to check. A failing example is a result, not a failure.
// Test runs are free and share the engines' workers (the browser queue's few Chromium pages) with
// every organization's live queries, so a run has a total time budget: once spent, the remaining
// examples are reported as not run rather than holding those workers for up to 3 minutes each.
import { proxyActivities, proxyLocalActivities } from '@temporalio/workflow';
import { failedExample, type BuilderActivities, type DraftExample, type DraftExampleResult } from '../activities/types.ts';

export interface BuilderTestRunInput {
  orgId: string;
  testRunId: string;
  examples: DraftExample[];
  /**
   * Task queue of browser work: a browser recipe's examples run there, on the workers that run
   * Chromium, never on an `http` worker. Unset (runs started before this field): this queue.
   */
  browserTaskQueue?: string;
  /**
   * Total time all examples together may take (ms). Unset (runs started before this field): no
   * total, each example alone bounded by SITE_OPTIONS; their histories replay as they ran.
   */
  budgetMs?: number;
}

export interface BuilderTestRunOutcome {
  status: 'passed' | 'failed';
  results: DraftExampleResult[];
}

// One attempt: a test run shows what the draft does, and an action must not be repeated blindly.
const SITE_OPTIONS = {
  startToCloseTimeout: '3 minutes',
  heartbeatTimeout: '30 seconds',
  retry: { maximumAttempts: 1 },
} as const;
const site = proxyActivities<BuilderActivities>(SITE_OPTIONS);

/** Below this much budget left, an example is not started (it could not finish meaningfully). */
const MIN_EXAMPLE_MS = 5_000;
const PER_EXAMPLE_MS = 3 * 60_000;

const isBrowserRecipe = (recipe: unknown) => typeof recipe === 'object' && recipe !== null && (recipe as { engine?: unknown }).engine === 'browser';

const store = proxyLocalActivities<BuilderActivities>({
  startToCloseTimeout: '10 seconds',
  retry: { initialInterval: '200 milliseconds', backoffCoefficient: 2, maximumInterval: '5 seconds', maximumAttempts: 20 },
});

export async function builderTestRunWorkflow(input: BuilderTestRunInput): Promise<BuilderTestRunOutcome> {
  const results: DraftExampleResult[] = [];
  // Replay-safe without a patch marker: only runs started with browserTaskQueue in their input take it.
  const browserSite = input.browserTaskQueue ? proxyActivities<BuilderActivities>({ ...SITE_OPTIONS, taskQueue: input.browserTaskQueue }) : site;
  // Replay-safe the same way: only runs started with budgetMs in their input have a total budget
  // (workflow time, Date.now(), is the recorded time of each workflow task: deterministic).
  const deadline = input.budgetMs === undefined ? null : Date.now() + input.budgetMs;
  for (const example of input.examples) {
    const left = deadline === null ? PER_EXAMPLE_MS : Math.min(PER_EXAMPLE_MS, deadline - Date.now());
    if (left < MIN_EXAMPLE_MS) {
      // Catalog code of a time limit; the message says it never started.
      results.push(failedExample(example, 'execution_timeout', `Not run: the test run's total time budget (${Math.round(input.budgetMs! / 1000)} s) was spent on the examples before it`));
      continue;
    }
    try {
      const browser = isBrowserRecipe(example.recipe);
      // With a budget, an example gets at most what is left of it (timeouts are not part of what
      // replay compares, so a changed timeout is no nondeterminism).
      const runner =
        deadline === null
          ? browser ? browserSite : site
          : proxyActivities<BuilderActivities>({ ...SITE_OPTIONS, startToCloseTimeout: left, ...(browser && input.browserTaskQueue ? { taskQueue: input.browserTaskQueue } : {}) });
      results.push(await runner.runDraftExample({ orgId: input.orgId, testRunId: input.testRunId, example }));
    } catch {
      // The worker was lost or the run timed out: shown as this example's failure. An action cut
      // off mid-way may have happened on the website: the author is told so, not just "too slow".
      results.push(
        example.performsActions
          ? failedExample(example, 'action_unconfirmed', 'The example did not finish within its time limit, and its action may have happened on the website; check the website before running it again')
          : failedExample(example, 'execution_timeout', 'The example did not finish within its time limit'),
      );
    }
  }
  const status = results.length > 0 && results.every((r) => r.passed) ? 'passed' : 'failed';
  await store.recordTestRun({ testRunId: input.testRunId, status, results });
  return { status, results };
}
