// Everything on embedded defaults in one process: what `npm start` runs and `npm run bench` measures.
import fs from 'node:fs/promises';
import { Runtime, type NativeConnection } from '@temporalio/worker';
import type { Config } from '../../shared/config.ts';
import { createPool } from '../../shared/db/pool.ts';
import { ensureDevOrg, prepareDatabase } from '../../shared/db/seed.ts';
import { startEmbeddedPostgres } from '../../shared/infra/embedded-postgres.ts';
import { startTemporalDevServer } from '../../shared/infra/temporal-dev-server.ts';
import { startDemoSites, type DemoSites } from '../demo-sites/server.ts';
import { startWorker } from '../worker/worker.ts';
import { runtimeOptions } from '../worker/telemetry.ts';
import { startApi } from '../api/server.ts';
import { LocalResults } from '../../shared/local-results.ts';
import { ensureDevUser } from './dev-user.ts';
import { startTracing } from '../../shared/telemetry/tracing.ts';

export interface DevStack {
  url: string;
  apiKey: string;
  orgId: string;
  /** The dev organization's console Owner (apps/dev/dev-user.ts). */
  consoleUser: { email: string; password: string; passwordFile: string };
  databaseUrl: string;
  temporalAddress: string;
  /** The Temporal Web UI (embedded dev server started with `temporalUi`), else undefined. */
  temporalUiUrl: string | undefined;
  sites: DemoSites;
  /** Stops what was started, in reverse order: the API drains before the worker stops. */
  stop(): Promise<void>;
  /** Rejects if the worker dies. */
  workerDone: Promise<void>;
  /** The in-process worker's Temporal connection (the API starts workflows eagerly through it). */
  workerConnection: NativeConnection;
  /** The configuration the API and worker run with (the bench starts a second API from it). */
  config: Config & { DATABASE_URL: string; TEMPORAL_ADDRESS: string };
}

export interface DevStackOptions {
  /** Start the embedded Temporal dev server with its Web UI (`npm start`); benchmarks leave it off. */
  temporalUi?: boolean;
}

let runtimeInstalled = false;

export async function startDevStack(config: Config, onStop: Array<() => Promise<void>> = [], options: DevStackOptions = {}): Promise<DevStack> {
  const stops = onStop;
  const stopAll = async () => {
    for (const stop of stops.splice(0).reverse()) await stop().catch(() => {});
  };
  try {
    await fs.mkdir(config.dataDir, { recursive: true });
    if (!runtimeInstalled) {
      Runtime.install(runtimeOptions(config));
      runtimeInstalled = true;
    }
    const [pg, temporal] = await Promise.all([
      config.DATABASE_URL ? null : startEmbeddedPostgres({ dataDir: config.dataDir }),
      config.TEMPORAL_ADDRESS ? null : startTemporalDevServer({ dataDir: config.dataDir, ui: options.temporalUi === true }),
    ]);
    if (pg) stops.push(() => pg.stop());
    if (temporal) stops.push(() => temporal.stop());
    const databaseUrl = config.DATABASE_URL ?? pg!.databaseUrl;
    const temporalAddress = config.TEMPORAL_ADDRESS ?? temporal!.address;

    const db = createPool(databaseUrl, 2);
    stops.push(() => db.end());
    await prepareDatabase(databaseUrl, db);
    const dev = await ensureDevOrg(db, config.dataDir);
    const consoleUser = await ensureDevUser(db, config.dataDir, dev.orgId);

    // The demo sites stand in for the web: recipes' real-looking hosts are routed to them.
    const sites = await startDemoSites({ port: 0 });
    stops.push(() => sites.close());
    const full = {
      ...config,
      DATABASE_URL: databaseUrl,
      TEMPORAL_ADDRESS: temporalAddress,
      siteHostMap: Object.keys(config.siteHostMap).length ? config.siteHostMap : sites.hostMap,
    };
    await startTracing('workflow-query-service'); // one process, one service name (else the worker's)
    // One process: the API starts workflows eagerly through the worker's connection, and the worker
    // hands each envelope it commits straight to the API waiting for it (shared/local-results.ts).
    const localResults = new LocalResults();
    const worker = await startWorker(full, { localResults });
    stops.push(() => worker.shutdown());
    const api = await startApi(full, { workerConnection: worker.connection, localResults });
    stops.push(() => api.close());
    return { url: api.url, workerConnection: worker.connection, apiKey: dev.apiKey, orgId: dev.orgId, consoleUser, databaseUrl, temporalAddress, temporalUiUrl: temporal?.uiUrl, sites, stop: stopAll, workerDone: worker.done, config: full };
  } catch (err) {
    await stopAll();
    throw err;
  }
}
