// The production topology on one machine: embedded PostgreSQL, Temporal's own server on it, the
// migration step once, two API processes, two workers for HTTP work and one for browser work, and
// the demo sites. Every part runs under the Supervisor, so `npm run chaos` can kill any one of them.
import { execFile } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { existsSync, readFileSync } from 'node:fs';
import fs from 'node:fs/promises';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { createPool } from '../../shared/db/pool.ts';
import { ensureDevOrg, seedDemoCatalog } from '../../shared/db/seed.ts';
import { startEmbeddedPostgres } from '../../shared/infra/embedded-postgres.ts';
import { freePort } from '../../shared/infra/free-port.ts';
import { isAlive } from '../../shared/infra/process-guard.ts';
import { prepareTemporalDatabases, startTemporalServer, temporalServerBinDir } from '../../shared/infra/temporal-server.ts';
import { writeWorkflowBundle } from '../../scripts/bundle-workflows.ts';
import { startDemoSites, type DemoSites } from '../demo-sites/server.ts';
import { childrenOf, startNodeProcess, Supervisor, type Running } from './supervisor.ts';

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../..');
const TASK_QUEUE = 'wqs-queries';
const BROWSER_TASK_QUEUE = `${TASK_QUEUE}-browser`;

export interface ClusterOptions {
  dataDir: string;
  /** Extra environment for every API and worker process (chaos shortens deadlines). */
  env?: Record<string, string>;
  log: (event: string, fields?: Record<string, unknown>) => void;
}

export interface Cluster {
  supervisor: Supervisor;
  apiUrls: string[];
  databaseUrl: string;
  temporalAddress: string;
  temporalMetricsUrl: string;
  sites: DemoSites;
  devApiKey: string;
  logDir: string;
  stop(): Promise<void>;
}

/** Secrets every API and worker must share: made once per data folder, kept with mode 0600. */
async function clusterKeys(dataDir: string): Promise<{ PAYLOAD_ENCRYPTION_KEY: string; CONNECTIONS_ENCRYPTION_KEY: string }> {
  const file = path.join(dataDir, 'cluster-keys.json');
  if (existsSync(file)) return JSON.parse(readFileSync(file, 'utf8'));
  const keys = { PAYLOAD_ENCRYPTION_KEY: randomBytes(32).toString('base64'), CONNECTIONS_ENCRYPTION_KEY: randomBytes(32).toString('base64') };
  await fs.writeFile(file, JSON.stringify(keys), { mode: 0o600 });
  return keys;
}

export async function startCluster(options: ClusterOptions): Promise<Cluster> {
  const dataDir = path.resolve(options.dataDir);
  const logDir = path.join(dataDir, 'logs');
  await fs.mkdir(logDir, { recursive: true });
  const supervisor = new Supervisor(options.log);
  const sitesRef: { current?: DemoSites } = {};
  const stop = async () => {
    await supervisor.stopAll();
    await sitesRef.current?.close();
  };
  try {
    // The Go build is the slow part on a fresh machine; overlap it with PostgreSQL and the bundle.
    const [binDir, workflowBundlePath, keys, sites] = await Promise.all([
      temporalServerBinDir(),
      writeWorkflowBundle(path.join(dataDir, 'workflow-bundle.js')),
      clusterKeys(dataDir),
      startDemoSites({ port: 0 }),
    ]);
    sitesRef.current = sites;

    // PostgreSQL keeps its port for the cluster's life: every process holds DATABASE_URL.
    const pgPort = await freePort();
    let databaseUrl = '';
    await supervisor.add({
      name: 'postgres',
      async start() {
        const pg = await startEmbeddedPostgres({ dataDir, port: pgPort });
        databaseUrl = pg.databaseUrl;
        const pid = Number(readFileSync(path.join(dataDir, 'postgres', 'postmaster.pid'), 'utf8').split('\n')[0]);
        return { pid, exited: untilGone(pid), stop: () => pg.stop() };
      },
      // Killing the postmaster alone leaves its backends serving until they notice: a crash of
      // the machine or container takes them all.
      alsoKill: (pid) => childrenOf(pid),
    });
    const postgres = { host: '127.0.0.1', port: pgPort, user: 'postgres', password: 'postgres' };

    await prepareTemporalDatabases(postgres, binDir);
    let temporal = { address: '', metricsUrl: '' };
    await supervisor.add({
      name: 'temporal',
      async start() {
        const server = await startTemporalServer({ dataDir, postgres, log: (line) => appendLog(logDir, 'temporal', line) }, binDir);
        temporal = server;
        return server;
      },
    });

    // The migration step, once, before any API or worker starts (they run MIGRATE_ON_START=false).
    // Asynchronously: the Temporal server's output keeps flowing to its log meanwhile.
    await promisify(execFile)(process.execPath, ['--import', 'tsx', 'apps/migrate/main.ts'], {
      cwd: ROOT,
      env: { ...process.env, DATABASE_URL: databaseUrl },
    });
    const db = createPool(databaseUrl, 2);
    let devApiKey: string;
    try {
      await seedDemoCatalog(db);
      devApiKey = (await ensureDevOrg(db, dataDir)).apiKey;
    } finally {
      await db.end();
    }

    const common: Record<string, string> = {
      DATABASE_URL: databaseUrl,
      TEMPORAL_ADDRESS: temporal.address,
      TEMPORAL_NAMESPACE: 'default',
      TEMPORAL_TASK_QUEUE: TASK_QUEUE,
      // Read by workers once the browser task queue is split off (WORKER_ROLE); ignored before.
      TEMPORAL_BROWSER_TASK_QUEUE: BROWSER_TASK_QUEUE,
      SITE_HOST_MAP: JSON.stringify(sites.hostMap),
      DATA_DIR: dataDir,
      MIGRATE_ON_START: 'false',
      WORKFLOW_BUNDLE_PATH: workflowBundlePath,
      LOG_LEVEL: 'warn',
      HOST: '127.0.0.1',
      ...keys,
      ...options.env,
    };
    const node = (name: string, entry: string, readyEvent: string, env: Record<string, string>) =>
      supervisor.add({
        name,
        start: (): Promise<Running> =>
          startNodeProcess({ entry, readyEvent, cwd: ROOT, logFile: path.join(logDir, `${name}.log`), env: { ...common, ...env } }),
      });

    // Workers first: a query accepted by an API then finds a poller at once.
    await Promise.all([
      node('worker-http-1', 'apps/worker/main.ts', 'worker_started', { WORKER_ROLE: 'http' }),
      node('worker-http-2', 'apps/worker/main.ts', 'worker_started', { WORKER_ROLE: 'http' }),
      node('worker-browser-1', 'apps/worker/main.ts', 'worker_started', { WORKER_ROLE: 'browser' }),
    ]);
    const apiPorts = [await freePort(), await freePort()];
    await Promise.all(apiPorts.map((port, i) => node(`api-${i + 1}`, 'apps/api/main.ts', 'api_started', { PORT: String(port) })));

    return {
      supervisor,
      apiUrls: apiPorts.map((p) => `http://127.0.0.1:${p}`),
      databaseUrl,
      temporalAddress: temporal.address,
      temporalMetricsUrl: temporal.metricsUrl,
      sites,
      devApiKey,
      logDir,
      stop,
    };
  } catch (err) {
    await stop();
    throw err;
  }
}

function untilGone(pid: number): Promise<void> {
  return new Promise((resolve) => {
    const timer = setInterval(() => {
      if (!isAlive(pid)) {
        clearInterval(timer);
        resolve();
      }
    }, 200);
  });
}

function appendLog(logDir: string, name: string, line: string): void {
  void fs.appendFile(path.join(logDir, `${name}.log`), `${line}\n`).catch(() => undefined);
}
