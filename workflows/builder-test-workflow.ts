// A builder test run: every verified example of a draft definition runs on the real engines, one
// after another (an action example acts on the site, so never two at once and never retried), and
// the outcome is recorded for publish to check. A failing example is a result, not a failure.
import { proxyActivities, proxyLocalActivities } from '@temporalio/workflow';
import type { BuilderActivities, DraftExample, DraftExampleResult } from '../activities/types.ts';

export interface BuilderTestRunInput {
  orgId: string;
  testRunId: string;
  examples: DraftExample[];
}

export interface BuilderTestRunOutcome {
  status: 'passed' | 'failed';
  results: DraftExampleResult[];
}

// One attempt: a test run shows what the draft does, and an action must not be repeated blindly.
const site = proxyActivities<BuilderActivities>({
  startToCloseTimeout: '3 minutes',
  heartbeatTimeout: '30 seconds',
  retry: { maximumAttempts: 1 },
});

const store = proxyLocalActivities<BuilderActivities>({
  startToCloseTimeout: '10 seconds',
  retry: { initialInterval: '200 milliseconds', backoffCoefficient: 2, maximumInterval: '5 seconds', maximumAttempts: 20 },
});

export async function builderTestRunWorkflow(input: BuilderTestRunInput): Promise<BuilderTestRunOutcome> {
  const results: DraftExampleResult[] = [];
  for (const example of input.examples) {
    try {
      results.push(await site.runDraftExample({ orgId: input.orgId, testRunId: input.testRunId, example }));
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
