// The builder's interface: what the console's Workflows/Build pages and the admin CLI call
// (README.md in this folder documents each function and the definition format).
export { DEFINITION_SCHEMA, definitionHash, definitionIssues, parseDefinition, performsActions, shareIssues, type BuilderDefinition, type BuilderOperation } from './definition.ts';
export { testRun, testRunWorkflowId, TEST_RUN_BUDGET_MS, type TestRunDeps, type TestRunResult } from './test-run.ts';
export {
  PRIVATE_BUILD_CREDITS,
  TEST_RUN_VALID_HOURS,
  diffVersions,
  getTestRun,
  getVersion,
  listVersions,
  listWorkflows,
  publish,
  restore,
  type PublishResult,
} from './store.ts';
export { workflowTemplate } from './template.ts';
