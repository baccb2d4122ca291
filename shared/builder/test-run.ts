// Test run: every example of a draft definition runs through Temporal (builderTestRunWorkflow) on
// the real engines; the workflow records the outcome, which publish then requires.
import { WorkflowIdReusePolicy, type Client } from '@temporalio/client';
import type { DraftExample, DraftExampleResult } from '../../activities/types.ts';
import type { builderTestRunWorkflow } from '../../workflows/builder-test-workflow.ts';
import type { Db } from '../db/pool.ts';
import { ServiceError } from '../errors.ts';
import { parseDefinition, type BuilderDefinition } from './definition.ts';
import { createTestRun, markTestRunError } from './store.ts';

export interface TestRunDeps {
  db: Db;
  temporal: Client;
  taskQueue: string;
  /** Where a browser recipe's examples run (config: browserTaskQueue()), on the workers with Chromium. */
  browserTaskQueue: string;
}

export interface TestRunResult {
  test_run_id: string;
  api: string;
  definition_hash: string;
  /** true when every example returned its expected output and the output passed its schema. */
  passed: boolean;
  results: DraftExampleResult[];
}

/** The examples of a definition, in order, as the workflow runs them. */
export function draftExamples(def: BuilderDefinition): DraftExample[] {
  return def.operations.flatMap((op) =>
    op.examples.map((ex, index) => ({
      operation: op.name,
      index,
      title: ex.title ?? `example ${index + 1}`,
      recipe: op.recipe,
      outputSchema: op.output_schema,
      access: op.access ?? [],
      input: ex.input,
      expected: ex.output,
    })),
  );
}

/** Run every example of the draft; free (never touches the ledger). Waits for the outcome. */
export async function testRun(deps: TestRunDeps, orgId: string, json: unknown): Promise<TestRunResult> {
  const def = parseDefinition(json);
  const run = await createTestRun(deps.db, orgId, def);
  try {
    const outcome = await deps.temporal.workflow.execute<typeof builderTestRunWorkflow>('builderTestRunWorkflow', {
      taskQueue: deps.taskQueue,
      workflowId: `builder-test-${orgId}-${run.id}`,
      args: [{ orgId, testRunId: run.id, examples: draftExamples(def), browserTaskQueue: deps.browserTaskQueue }],
      workflowIdReusePolicy: WorkflowIdReusePolicy.REJECT_DUPLICATE,
      workflowExecutionTimeout: '30 minutes',
    });
    return { test_run_id: run.id, api: def.handle, definition_hash: run.definition_hash, passed: outcome.status === 'passed', results: outcome.results };
  } catch (err) {
    await markTestRunError(deps.db, run.id).catch(() => {});
    throw new ServiceError('engine_unavailable', 'The test run could not be completed; nothing was recorded as passing', {
      details: { test_run_id: run.id, reason: err instanceof Error ? err.name : 'unknown' },
    });
  }
}
