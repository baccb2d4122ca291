// The least a durable query can be on this Temporal server: a workflow with one local activity
// that does nothing, no patch marker, no payload codec. bench/temporal-floor.ts runs it.
import { proxyLocalActivities } from '@temporalio/workflow';

const { step } = proxyLocalActivities<{ step(): Promise<number> }>({ startToCloseTimeout: '5 seconds' });

export async function floorWorkflow(): Promise<number> {
  return await step();
}
