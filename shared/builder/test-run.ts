// Test run: every example of a draft definition runs through Temporal (builderTestRunWorkflow) on
// the real engines; the workflow records the outcome, which publish then requires.
//
// Test runs are free, and their examples run on the workers every organization's live queries use
// (the browser queue has a handful of Chromium pages). So an organization has at most one test run
// at a time, atomically: its workflow id is the organization's own, and Temporal refuses to start
// a second while one runs (conflict policy FAIL). And a run has a total time budget.
import { WorkflowExecutionAlreadyStartedError, WorkflowIdConflictPolicy, WorkflowIdReusePolicy, type Client } from '@temporalio/client';
import type { DraftExample, DraftExampleResult } from '../../activities/types.ts';
import type { builderTestRunWorkflow } from '../../workflows/builder-test-workflow.ts';
import type { Db } from '../db/pool.ts';
import { ServiceError } from '../errors.ts';
import { parseDefinition, performsActions, type BuilderDefinition } from './definition.ts';
import { createTestRun, discardTestRun, markTestRunError } from './store.ts';

/** Total time all examples of one test run may take; what is left then is reported as not run. */
export const TEST_RUN_BUDGET_MS = 5 * 60_000;

/** The workflow id of an organization's test run: one id per organization, so one run at a time. */
export const testRunWorkflowId = (orgId: string) => `builder-test-${orgId}`;

export interface TestRunDeps {
  db: Db;
  temporal: Client;
  taskQueue: string;
  /** Where a browser recipe's examples run (config: browserTaskQueue()), on the workers with Chromium. */
  browserTaskQueue: string;
  /** Total budget of the run's examples (default TEST_RUN_BUDGET_MS; tests make it short). */
  budgetMs?: number;
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
      performsActions: performsActions(op),
    })),
  );
}

/**
 * Run every example of the draft; free (never touches the ledger). Waits for the outcome. While
 * another test run of the organization runs: 429 organization_concurrency_limit, nothing recorded.
 */
export async function testRun(deps: TestRunDeps, orgId: string, json: unknown): Promise<TestRunResult> {
  const def = parseDefinition(json);
  const run = await createTestRun(deps.db, orgId, def);
  const budgetMs = deps.budgetMs ?? TEST_RUN_BUDGET_MS;
  let handle;
  try {
    handle = await deps.temporal.workflow.start<typeof builderTestRunWorkflow>('builderTestRunWorkflow', {
      taskQueue: deps.taskQueue,
      workflowId: testRunWorkflowId(orgId),
      args: [{ orgId, testRunId: run.id, examples: draftExamples(def), browserTaskQueue: deps.browserTaskQueue, budgetMs }],
      workflowIdConflictPolicy: WorkflowIdConflictPolicy.FAIL,
      // The same fairness key as the organization's queries (apps/api/services/dispatch.ts).
      priority: { fairnessKey: orgId },
      workflowIdReusePolicy: WorkflowIdReusePolicy.ALLOW_DUPLICATE,
      // The budget, plus room for recording the outcome and an example overrunning its timeout.
      workflowExecutionTimeout: budgetMs + 2 * 60_000,
    });
  } catch (err) {
    if (err instanceof WorkflowExecutionAlreadyStartedError) {
      await discardTestRun(deps.db, run.id);
      throw new ServiceError('organization_concurrency_limit', 'A test run of this organization is already running; wait for it to finish, then run this one', {
        details: { reason: 'test_run_running' },
      });
    }
    return failed(deps, run.id, err);
  }
  try {
    const outcome = await handle.result();
    return { test_run_id: run.id, api: def.handle, definition_hash: run.definition_hash, passed: outcome.status === 'passed', results: outcome.results };
  } catch (err) {
    return failed(deps, run.id, err);
  }
}

async function failed(deps: TestRunDeps, id: string, err: unknown): Promise<never> {
  await markTestRunError(deps.db, id).catch(() => {});
  throw new ServiceError('engine_unavailable', 'The test run could not be completed; nothing was recorded as passing', {
    details: { test_run_id: id, reason: err instanceof Error ? err.name : 'unknown' },
  });
}
