// The Temporal SDK runtime of a worker process: its log level, and its own Prometheus exporter
// (Core's HTTP server serving /metrics: workflow and activity task latencies, slots, polls, sticky
// cache) when WORKER_METRICS_ADDRESS is set. Runtime.install must run once, before any connection.
import { DefaultLogger, type RuntimeOptions } from '@temporalio/worker';
import type { Config } from '../../shared/config.ts';

export function runtimeOptions(config: Pick<Config, 'WORKER_METRICS_ADDRESS'>): RuntimeOptions {
  const options: RuntimeOptions = { logger: new DefaultLogger('WARN') };
  if (config.WORKER_METRICS_ADDRESS) {
    // Temporal's own names (temporal_ prefix, durations in milliseconds), as its dashboards expect.
    options.telemetryOptions = { metrics: { prometheus: { bindAddress: config.WORKER_METRICS_ADDRESS } } };
  }
  return options;
}
