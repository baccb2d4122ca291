// A builder test run: every verified example of a draft definition runs on the real engines, one
// after another (an action example acts on the site, so never two at once and never retried), and
// the outcome is recorded for publish to check. A failing example is a result, not a failure.
import { proxyActivities, proxyLocalActivities } from '@temporalio/workflow';
import type { BuilderActivities, DraftExample, DraftExampleResult } from '../activities/types.ts';

export interface BuilderTestRunInput {
  orgId: string;
  testRunId: string;
  examples: DraftExample[];
  /**
   * Task queue of browser work: a browser recipe's examples run there, on the workers that run
   * Chromium, never on an `http` worker. Unset (runs started before this field): this queue.
   */
  browserTaskQueue?: string;
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

const isBrowserRecipe = (recipe: unknown) => typeof recipe === 'object' && recipe !== null && (recipe as { engine?: unknown }).engine === 'browser';

const store = proxyLocalActivities<BuilderActivities>({
  startToCloseTimeout: '10 seconds',
  retry: { initialInterval: '200 milliseconds', backoffCoefficient: 2, maximumInterval: '5 seconds', maximumAttempts: 20 },
});

export async function builderTestRunWorkflow(input: BuilderTestRunInput): Promise<BuilderTestRunOutcome> {
  const results: DraftExampleResult[] = [];
  // Replay-safe without a patch marker: only runs started with browserTaskQueue in their input take it.
  const browserSite = input.browserTaskQueue ? proxyActivities<BuilderActivities>({ ...SITE_OPTIONS, taskQueue: input.browserTaskQueue }) : site;
  for (const example of input.examples) {
    try {
      const runner = isBrowserRecipe(example.recipe) ? browserSite : site;
      results.push(await runner.runDraftExample({ orgId: input.orgId, testRunId: input.testRunId, example }));
    } catch {
      // The worker was lost or the run timed out: shown as this example's failure.
      results.push({
        operation: example.operation,
        index: example.index,
        title: example.title,
        input: example.input,
        expected: example.expected,
        output: null,
        equal: false,
        schema_ok: null,
        schema_errors: [],
        error: { code: 'execution_timeout', message: 'The example did not finish within its time limit' },
        passed: false,
        ms: 0,
      });
    }
  }
  const status = results.length > 0 && results.every((r) => r.passed) ? 'passed' : 'failed';
  await store.recordTestRun({ testRunId: input.testRunId, status, results });
  return { status, results };
}
