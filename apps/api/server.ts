// The API process wiring: pool, lazy Temporal client, listener, graceful drain.
import { Client, Connection } from '@temporalio/client';
import type { NativeConnection } from '@temporalio/worker';
import type { FastifyInstance } from 'fastify';
import { API_DB_POOL_SIZE, type Config } from '../../shared/config.ts';
import type { LocalResults } from '../../shared/local-results.ts';
import { createPool, poolTimeouts } from '../../shared/db/pool.ts';
import { createDataConverter } from '../../shared/temporal/data-converter.ts';
import { startTracing } from '../../shared/telemetry/tracing.ts';
import { buildApp } from './app.ts';
import { DEPENDENCY_CHECK_TIMEOUT_MS } from './routes/probes.ts';

export interface RunningApi {
  app: FastifyInstance;
  url: string;
  close(): Promise<void>;
}

export interface StartApiOptions {
  /**
   * A worker's connection in this same process (the embedded dev stack). Workflows then start
   * eagerly: Temporal hands the first workflow task back in the start response, to that worker,
   * instead of matching it through the task queue. The worker owns and closes the connection.
   */
  workerConnection?: NativeConnection;
  /** A worker in this same process hands terminal envelopes over here (shared/local-results.ts). */
  localResults?: LocalResults;
}

export async function startApi(config: Config & { DATABASE_URL: string; TEMPORAL_ADDRESS: string }, options: StartApiOptions = {}): Promise<RunningApi> {
  // The payload key first: a bad PAYLOAD_ENCRYPTION_KEY stops the process here, not at the first query.
  const dataConverter = await createDataConverter(config);
  const tracing = await startTracing('wqs-api'); // undefined unless OTEL_TRACES_EXPORTER is set (shared/telemetry)
  tracing?.traceIncomingHttp();
  const db = createPool(config.DATABASE_URL, API_DB_POOL_SIZE, poolTimeouts(config));
  const shared = options.workerConnection;
  let connection: Promise<Connection | NativeConnection> | undefined = shared && Promise.resolve(shared);
  const connect = () => {
    connection ??= Connection.connect({ address: config.TEMPORAL_ADDRESS, connectTimeout: '5 seconds' }).catch((err) => {
      connection = undefined; // try again on the next request
      throw err;
    });
    return connection;
  };
  let client: Client | undefined;
  const interceptors = tracing && { workflow: tracing.workflowClientInterceptors }; // the workflow start span
  const temporal = async () => (client ??= new Client({ connection: await connect(), namespace: config.TEMPORAL_NAMESPACE, dataConverter, interceptors }));
  // The health RPC has a deadline of its own (a hung Temporal must not hold GET /health and /readyz).
  const temporalHealthy = async () => {
    const c = await connect();
    const res = await c.withDeadline(Date.now() + DEPENDENCY_CHECK_TIMEOUT_MS, () => c.healthService.check({}));
    return res.status === 1; // SERVING
  };
  let url = config.PUBLIC_BASE_URL ?? '';
  const app = await buildApp({ config, db, temporal, temporalHealthy, baseUrl: () => url, eagerStart: shared !== undefined, localResults: options.localResults });
  await app.listen({ port: config.PORT, host: config.HOST });
  const address = app.server.address();
  const port = typeof address === 'object' && address ? address.port : config.PORT;
  if (!config.PUBLIC_BASE_URL) url = `http://${config.HOST === '0.0.0.0' ? '127.0.0.1' : config.HOST}:${port}`;
  return {
    app,
    url,
    async close() {
      // Out of rotation first (/readyz 503) while still serving, then stop accepting.
      app.markDraining();
      if (config.DRAIN_DELAY_MS > 0) await new Promise((r) => setTimeout(r, config.DRAIN_DELAY_MS));
      await app.close(); // stops accepting, drains in-flight requests
      if (connection && !shared) await (await connection.catch(() => undefined))?.close().catch(() => {});
      await db.end().catch(() => {});
      await tracing?.flush().catch(() => {});
    },
  };
}
