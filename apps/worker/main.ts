// `npm run worker`: the worker alone, against configured PostgreSQL and Temporal.
import { Runtime } from '@temporalio/worker';
import { browserTaskQueue, loadConfig } from '../../shared/config.ts';
import { startWorker } from './worker.ts';
import { runtimeOptions } from './telemetry.ts';

const config = loadConfig();
if (!config.DATABASE_URL || !config.TEMPORAL_ADDRESS) {
  console.error('npm run worker needs DATABASE_URL and TEMPORAL_ADDRESS (use `npm start` for the embedded defaults).');
  process.exit(1);
}
Runtime.install(runtimeOptions(config));
const worker = await startWorker({ ...config, DATABASE_URL: config.DATABASE_URL, TEMPORAL_ADDRESS: config.TEMPORAL_ADDRESS });
console.log(
  JSON.stringify({ event: 'worker_started', role: config.WORKER_ROLE, task_queue: config.TEMPORAL_TASK_QUEUE, browser_task_queue: browserTaskQueue(config), pid: process.pid, ...(config.WORKER_METRICS_ADDRESS ? { metrics: `http://${config.WORKER_METRICS_ADDRESS}/metrics` } : {}) }),
);
for (const sig of ['SIGTERM', 'SIGINT'] as const) {
  process.once(sig, () => {
    void worker.shutdown().then(() => process.exit(0));
  });
}
await worker.done;
