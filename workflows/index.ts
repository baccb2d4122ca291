// Entry point of the workflow bundle: only workflow code, deterministic, no Node built-ins.
export { queryWorkflow } from './query-workflow.ts';
export { healthCheckWorkflow } from './health-check-workflow.ts';
export { maintenanceWorkflow } from './maintenance-workflow.ts';
export { builderTestRunWorkflow } from './builder-test-workflow.ts';
