// `npm start`: the whole service on its embedded defaults — PostgreSQL, Temporal dev server,
// demo sites, worker and API in one command. With DATABASE_URL / TEMPORAL_ADDRESS set, those
// are used and nothing embedded is started.
import fs from 'node:fs/promises';
import { DefaultLogger, Runtime } from '@temporalio/worker';
import { loadConfig } from '../../shared/config.ts';
import { createPool } from '../../shared/db/pool.ts';
import { ensureDevOrg, prepareDatabase } from '../../shared/db/seed.ts';
import { startEmbeddedPostgres } from '../../shared/infra/embedded-postgres.ts';
import { startTemporalDevServer } from '../../shared/infra/temporal-dev-server.ts';
import { startDemoSites } from '../demo-sites/server.ts';
import { startWorker } from '../worker/worker.ts';
import { startApi } from '../api/server.ts';

const config = loadConfig();
const started = Date.now();
const log = (event: string, fields: Record<string, unknown> = {}) => console.error(JSON.stringify({ event, ...fields }));
const stops: Array<() => Promise<void>> = [];
let stopping = false;

async function shutdown(code: number) {
  if (stopping) return;
  stopping = true;
  log('stopping');
  await fs.rm(`${config.dataDir}/runtime.json`, { force: true });
  for (const stop of stops.reverse()) await stop().catch((err) => log('stop_failed', { error: String(err) }));
  log('stopped');
  process.exit(code);
}
for (const sig of ['SIGTERM', 'SIGINT', 'SIGHUP'] as const) process.once(sig, () => void shutdown(0));

try {
  await fs.mkdir(config.dataDir, { recursive: true });
  Runtime.install({ logger: new DefaultLogger('WARN') });
  const [pg, temporal] = await Promise.all([
    config.DATABASE_URL ? null : startEmbeddedPostgres({ dataDir: config.dataDir }),
    config.TEMPORAL_ADDRESS ? null : startTemporalDevServer({ dataDir: config.dataDir }),
  ]);
  if (pg) stops.push(() => pg.stop());
  if (temporal) stops.push(() => temporal.stop());
  const databaseUrl = config.DATABASE_URL ?? pg!.databaseUrl;
  const temporalAddress = config.TEMPORAL_ADDRESS ?? temporal!.address;

  const db = createPool(databaseUrl, 2);
  stops.push(() => db.end());
  await prepareDatabase(databaseUrl, db);
  const dev = await ensureDevOrg(db, config.dataDir);

  // The demo sites stand in for the web: recipes' real-looking hosts are routed to them.
  const sites = await startDemoSites({ port: 0 });
  stops.push(() => sites.close());
  const full = {
    ...config,
    DATABASE_URL: databaseUrl,
    TEMPORAL_ADDRESS: temporalAddress,
    siteHostMap: Object.keys(config.siteHostMap).length ? config.siteHostMap : sites.hostMap,
  };
  const worker = await startWorker(full);
  stops.push(() => worker.shutdown());
  const api = await startApi(full);
  stops.push(() => api.close()); // unwound first: the API drains before the worker stops

  const runtime = { base_url: api.url, database_url: databaseUrl, temporal_address: temporalAddress, demo_sites: sites.origin, pid: process.pid };
  await fs.writeFile(`${config.dataDir}/runtime.json`, JSON.stringify(runtime, null, 2));
  log('ready', { seconds: (Date.now() - started) / 1000 });
  console.log(`Workflow Query Service is running.

  Base URL:  ${api.url}
  API key:   ${dev.apiKey}   (also in ${config.dataDir}/dev-api-key)

  Try:
    curl -s ${api.url}/v1/query -H "Authorization: Bearer ${dev.apiKey}" -H 'Content-Type: application/json' \\
      -d '{"api":"@weather","operation":"current_weather","input":{"city":"London"}}'
`);
  void worker.done.catch((err) => {
    log('worker_failed', { error: String(err) });
    void shutdown(1);
  });
} catch (err) {
  log('start_failed', { error: err instanceof Error ? err.message : String(err) });
  await shutdown(1);
}
