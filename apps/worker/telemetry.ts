// The Temporal SDK runtime of a worker process: its log level, and its own Prometheus exporter
// (Core's HTTP server serving /metrics: workflow and activity task latencies, slots, polls, sticky
// cache) when WORKER_METRICS_ADDRESS is set. Runtime.install must run once, before any connection.
import { ApplicationFailure } from '@temporalio/common';
import { DefaultLogger, type LogLevel, type LogMetadata, type Logger, type RuntimeOptions } from '@temporalio/worker';
import type { Config } from '../../shared/config.ts';

export function runtimeOptions(config: Pick<Config, 'WORKER_METRICS_ADDRESS'>): RuntimeOptions {
  const options: RuntimeOptions = { logger: new FailureTextlessLogger(new DefaultLogger('WARN')) };
  if (config.WORKER_METRICS_ADDRESS) {
    // Temporal's own names (temporal_ prefix, durations in milliseconds), as its dashboards expect.
    options.telemetryOptions = { metrics: { prometheus: { bindAddress: config.WORKER_METRICS_ADDRESS } } };
  }
  return options;
}

/**
 * The SDK logs every failed activity attempt at WARN with the failure itself. An ApplicationFailure
 * is the service's answer to a website failure: its message names the page asked for, with the
 * query's input in its path (`The website returned 500 for host/jobs/J4101`), its details the step,
 * host and path. The history keeps it encrypted (shared/temporal/failure-converter.cjs); the log
 * keeps its code (`type`), class and retryability beside the run's ids, not a plain-text copy.
 * Other errors (connections, the SDK's own) are logged as they are.
 */
export class FailureTextlessLogger implements Logger {
  constructor(private readonly inner: Logger) {}

  log(level: LogLevel, message: string, meta?: LogMetadata) {
    const error = meta?.error;
    if (!(error instanceof ApplicationFailure)) return this.inner.log(level, message, meta);
    return this.inner.log(level, message, { ...meta, error: { name: error.name, type: error.type, nonRetryable: error.nonRetryable } });
  }
  trace(message: string, meta?: LogMetadata) {
    return this.log('TRACE', message, meta);
  }
  debug(message: string, meta?: LogMetadata) {
    return this.log('DEBUG', message, meta);
  }
  info(message: string, meta?: LogMetadata) {
    return this.log('INFO', message, meta);
  }
  warn(message: string, meta?: LogMetadata) {
    return this.log('WARN', message, meta);
  }
  error(message: string, meta?: LogMetadata) {
    return this.log('ERROR', message, meta);
  }
}
