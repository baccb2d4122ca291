// The floor under every durable query: the stack's own Temporal server and connection running a
// workflow that does nothing but one local activity (bench/floor-workflow.ts), started eagerly as
// the API starts queries, at c=1 and c=16, with the server's CPU per workflow. Measured in the same
// run as the query bench, it says how much of a query's latency and CPU is Temporal's alone: the
// service cannot go faster than this on the same server.
import { fileURLToPath } from 'node:url';
import { Client } from '@temporalio/client';
import { Worker, type NativeConnection } from '@temporalio/worker';
import { load, print } from './stats.ts';
import { cpuBetween, snapshot } from './procs.ts';

export async function benchTemporalFloor({ workerConnection, total = 200 }: { workerConnection: NativeConnection; total?: number }) {
  const taskQueue = `bench-floor-${Date.now()}`;
  const worker = await Worker.create({
    connection: workerConnection,
    taskQueue,
    workflowsPath: fileURLToPath(new URL('./floor-workflow.ts', import.meta.url)),
    activities: { step: async () => 1 },
  });
  const running = worker.run();
  try {
    const client = new Client({ connection: workerConnection });
    let n = 0;
    const one = async () => {
      const handle = await client.workflow.start('floorWorkflow', { taskQueue, workflowId: `${taskQueue}-${n++}`, requestEagerStart: true });
      return (await handle.result()) === 1;
    };
    const figures: Record<string, unknown> = { floor_c1: await load(one, { total, concurrency: 1, warmup: 10 }) };
    const before = snapshot();
    figures.floor_c16 = await load(one, { total: total * 2, concurrency: 16, warmup: 16 });
    const cpu = cpuBetween(before, snapshot(), total * 2 + 16);
    print('Temporal floor: a workflow of one empty local activity, eager start, on the stack\'s server', figures as never);
    print('CPU by process during floor_c16', cpu);
    return { ...figures, cpu_c16: cpu };
  } finally {
    worker.shutdown();
    await running;
  }
}
