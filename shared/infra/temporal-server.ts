// Temporal's own server (not the CLI dev server) on PostgreSQL: the production shape, runnable on
// one machine. Built by scripts/build-temporal-server.sh; used by `npm run cluster` and `npm run
// chaos`. Creates the `temporal` and `temporal_visibility` databases, sets up or updates their
// schema with the server's SQL tool, writes the server's config, starts it, waits for the frontend
// and registers the `default` namespace.
import { execFile } from 'node:child_process';
import { existsSync } from 'node:fs';
import fs from 'node:fs/promises';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { msToTs } from '@temporalio/common/lib/time.js';
import pg from 'pg';
import { createServer } from 'node:net';
import { isPortOpen } from './free-port.ts';
import { commandLine, isAlive, logSink, LogTail, spawnSupervised, terminate } from './process-guard.ts';
import type { LogOption } from './process-guard.ts';

const run = promisify(execFile);
const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../..');
/** The one dynamic config file, shared with docker-compose.yml and the Helm chart's documentation. */
export const DYNAMIC_CONFIG_FILE = path.join(ROOT, 'deploy/temporal/dynamic-config.yaml');
export const TEMPORAL_DATABASES = { default: 'temporal', visibility: 'temporal_visibility' } as const;
const NAMESPACE = 'default';
/** Closed workflows are kept this long (the spec keeps results 24 h; histories are for operators). */
const RETENTION_SECONDS = 3 * 86_400;
const STARTUP_TIMEOUT_MS = 120_000;
const STOP_TIMEOUT_MS = 15_000;

export interface PostgresTarget {
  host: string;
  port: number;
  user: string;
  password: string;
}

export interface TemporalServerOptions {
  /** State of this server: config, pid file and chosen ports in `${dataDir}/temporal-server`. */
  dataDir: string;
  postgres: PostgresTarget;
  /** `true` prints server output to stderr; a function receives each line. Quiet by default. */
  log?: LogOption;
}

export interface TemporalServer {
  /** host:port of the frontend gRPC service. */
  address: string;
  namespace: 'default';
  /** Prometheus metrics of the server. */
  metricsUrl: string;
  pid: number;
  /** Resolves when the process has exited (however it ended). */
  exited: Promise<void>;
  stop(): Promise<void>;
}

/** The folder with `temporal-server` and `temporal-sql-tool`: built once, then seconds. */
export async function temporalServerBinDir(): Promise<string> {
  const { stdout } = await run('bash', [path.join(ROOT, 'scripts/build-temporal-server.sh')], {
    cwd: ROOT,
    maxBuffer: 16 * 1024 * 1024,
    timeout: 60 * 60_000,
  });
  return stdout.trim().split('\n').pop()!;
}

/** The server module's source in the Go module cache: its schema files live there. */
async function schemaRoot(binDir: string): Promise<string> {
  const version = (await fs.readFile(path.join(binDir, '..', 'version'), 'utf8')).trim();
  const { stdout } = await run('go', ['mod', 'download', '-json', `go.temporal.io/server@${version}`], {
    cwd: ROOT,
    maxBuffer: 4 * 1024 * 1024,
  });
  const dir = (JSON.parse(stdout) as { Dir?: string }).Dir;
  if (!dir) throw new Error(`go mod download gave no folder for go.temporal.io/server@${version}`);
  return path.join(dir, 'schema/postgresql/v12');
}

/**
 * Creates Temporal's two databases when missing and brings their schema to the server's version
 * with its own SQL tool. Idempotent: versioning tables are set up only where none exist, and
 * update-schema applies only versions above the recorded one.
 */
export async function prepareTemporalDatabases(postgres: PostgresTarget, binDir: string): Promise<void> {
  const admin = new pg.Client({ ...postgres, database: 'postgres' });
  await admin.connect();
  const fresh: string[] = [];
  try {
    for (const name of Object.values(TEMPORAL_DATABASES)) {
      const found = await admin.query('SELECT 1 FROM pg_database WHERE datname = $1', [name]);
      if (found.rowCount === 0) {
        await admin.query(`CREATE DATABASE ${admin.escapeIdentifier(name)}`).catch((err: { code?: string }) => {
          if (err.code !== '42P04') throw err;
        });
      }
      const db = new pg.Client({ ...postgres, database: name });
      await db.connect();
      const versioned = await db.query(`SELECT to_regclass('public.schema_version') IS NOT NULL AS ok`);
      await db.end();
      if (!versioned.rows[0].ok) fresh.push(name);
    }
  } finally {
    await admin.end();
  }
  const schemas = await schemaRoot(binDir);
  const tool = path.join(binDir, 'temporal-sql-tool');
  // The password goes by SQL_PASSWORD, never on a command line other users can read.
  const env = { ...process.env, SQL_PASSWORD: postgres.password };
  const base = ['--plugin', 'postgres12', '--ep', postgres.host, '-p', String(postgres.port), '-u', postgres.user];
  for (const [dir, name] of [['temporal', TEMPORAL_DATABASES.default], ['visibility', TEMPORAL_DATABASES.visibility]] as const) {
    if (fresh.includes(name)) await run(tool, [...base, '--db', name, 'setup-schema', '-v', '0.0'], { env });
    await run(tool, [...base, '--db', name, 'update-schema', '-d', path.join(schemas, dir, 'versioned')], { env });
  }
}

interface Ports {
  frontend: number;
  metrics: number;
  membership: Record<'frontend' | 'history' | 'matching' | 'worker', number>;
  grpc: Record<'history' | 'matching' | 'worker', number>;
}

/**
 * Ports are chosen once and kept in the state folder: API and worker processes hold the frontend
 * address, and the cluster metadata in PostgreSQL records it, so a restart must come back on it.
 */
async function portsFor(stateDir: string): Promise<Ports> {
  const file = path.join(stateDir, 'ports.json');
  const saved = await fs.readFile(file, 'utf8').then((t) => JSON.parse(t) as Ports, () => undefined);
  if (saved && !(await Promise.all(allPorts(saved).map((p) => isPortOpen(p)))).some(Boolean)) return saved;
  const taken = new Set<number>();
  const next = async () => {
    for (;;) {
      const p = await freeLowPort();
      if (!taken.has(p)) {
        taken.add(p);
        return p;
      }
    }
  };
  const ports: Ports = {
    frontend: await next(),
    metrics: await next(),
    membership: { frontend: await next(), history: await next(), matching: await next(), worker: await next() },
    grpc: { history: await next(), matching: await next(), worker: await next() },
  };
  await fs.writeFile(file, JSON.stringify(ports, null, 2));
  return ports;
}

const allPorts = (p: Ports) => [p.frontend, p.metrics, ...Object.values(p.membership), ...Object.values(p.grpc)];

/**
 * A free port below 32768: Temporal stores membership ports in a PostgreSQL smallint, so the
 * kernel's ephemeral range (32768 and up) makes the server fail at start.
 */
async function freeLowPort(): Promise<number> {
  for (;;) {
    const port = 20_000 + Math.floor(Math.random() * 12_000);
    const free = await new Promise<boolean>((resolve) => {
      const server = createServer();
      server.once('error', () => resolve(false));
      server.listen({ port, host: '127.0.0.1', exclusive: true }, () => server.close(() => resolve(true)));
    });
    if (free) return port;
  }
}

function configYaml(ports: Ports, postgres: PostgresTarget): string {
  // JSON is YAML: no YAML writer needed, and every string is quoted correctly.
  const store = (database: string, maxConns: number) => ({
    sql: {
      pluginName: 'postgres12',
      databaseName: database,
      connectAddr: `${postgres.host}:${postgres.port}`,
      connectProtocol: 'tcp',
      user: postgres.user,
      password: postgres.password,
      maxConns,
      maxIdleConns: maxConns,
      maxConnLifetime: '1h',
    },
  });
  const service = (grpcPort: number, membershipPort: number) => ({ rpc: { grpcPort, membershipPort, bindOnLocalHost: true } });
  const config = {
    log: { stdout: true, level: 'warn' },
    persistence: {
      defaultStore: 'default',
      visibilityStore: 'visibility',
      numHistoryShards: 4,
      datastores: { default: store(TEMPORAL_DATABASES.default, 20), visibility: store(TEMPORAL_DATABASES.visibility, 4) },
    },
    global: {
      membership: { maxJoinDuration: '30s', broadcastAddress: '127.0.0.1' },
      metrics: { prometheus: { framework: 'tally', timerType: 'histogram', listenAddress: `127.0.0.1:${ports.metrics}` } },
    },
    services: {
      frontend: service(ports.frontend, ports.membership.frontend),
      history: service(ports.grpc.history, ports.membership.history),
      matching: service(ports.grpc.matching, ports.membership.matching),
      worker: service(ports.grpc.worker, ports.membership.worker),
    },
    clusterMetadata: {
      enableGlobalNamespace: false,
      failoverVersionIncrement: 10,
      masterClusterName: 'active',
      currentClusterName: 'active',
      clusterInformation: { active: { enabled: true, initialFailoverVersion: 1, rpcName: 'frontend', rpcAddress: `127.0.0.1:${ports.frontend}` } },
    },
    dcRedirectionPolicy: { policy: 'noop' },
    dynamicConfigClient: { filepath: DYNAMIC_CONFIG_FILE, pollInterval: '10s' },
  };
  return `${JSON.stringify(config, null, 2)}\n`;
}

/** Starts the server on prepared databases (see prepareTemporalDatabases) and registers `default`. */
export async function startTemporalServer(options: TemporalServerOptions, binDir: string): Promise<TemporalServer> {
  const stateDir = path.resolve(options.dataDir, 'temporal-server');
  await fs.mkdir(stateDir, { recursive: true });
  const pidFile = path.join(stateDir, 'server.pid');
  const configFile = path.join(stateDir, 'config.yaml');
  await clearStaleServer(pidFile, configFile);
  const ports = await portsFor(stateDir);
  // The config holds the database password: readable by this user only.
  await fs.writeFile(configFile, configYaml(ports, options.postgres), { mode: 0o600 });
  const address = `127.0.0.1:${ports.frontend}`;
  const sink = logSink(options.log, '[temporal-server]');
  const tail = new LogTail();
  const server = path.join(binDir, 'temporal-server');
  // --allow-no-auth: every port is on 127.0.0.1 and the namespace is this service's alone.
  const { child, exited, hasExited, spawnError, stop } = await spawnSupervised(server, ['--config-file', configFile, '--allow-no-auth', 'start'], {
    cwd: stateDir,
    tail,
    sink,
    pidFile,
    stopTimeoutMs: STOP_TIMEOUT_MS,
  });
  try {
    await waitForFrontendAndNamespace(address, hasExited);
  } catch (err) {
    await stop();
    const reason = spawnError() ?? err;
    throw new Error(`Temporal server (${server}) did not start on ${address}: ${reason instanceof Error ? reason.message : String(reason)}\n${brief(tail.toString())}`);
  }
  return { address, namespace: NAMESPACE, metricsUrl: `http://127.0.0.1:${ports.metrics}/metrics`, pid: child.pid!, exited, stop };
}

/** Ready: the frontend answers, `default` exists (registered here once) and is described by it. */
async function waitForFrontendAndNamespace(address: string, hasExited: () => boolean): Promise<void> {
  const { Connection } = await import('@temporalio/client');
  const port = Number(address.split(':')[1]);
  const deadline = Date.now() + STARTUP_TIMEOUT_MS;
  const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));
  let last: unknown;
  while (Date.now() < deadline) {
    if (hasExited()) throw new Error('the server process exited during startup');
    if (!(await isPortOpen(port))) {
      await sleep(200);
      continue;
    }
    let connection: Awaited<ReturnType<typeof Connection.connect>> | undefined;
    try {
      connection = await Connection.connect({ address, connectTimeout: 3_000 });
      const service = connection.workflowService;
      try {
        await service.describeNamespace({ namespace: NAMESPACE });
        return;
      } catch (err) {
        if ((err as { code?: number }).code !== 5) throw err; // 5 = NOT_FOUND: register it below
      }
      await service
        .registerNamespace({ namespace: NAMESPACE, workflowExecutionRetentionPeriod: msToTs(RETENTION_SECONDS * 1000) })
        .catch((err: { code?: number }) => {
          if (err.code !== 6) throw err; // 6 = ALREADY_EXISTS: a concurrent start registered it
        });
    } catch (err) {
      last = err;
    } finally {
      await connection?.close().catch(() => undefined);
    }
    await sleep(500);
  }
  throw new Error(`frontend or namespace not ready after ${STARTUP_TIMEOUT_MS} ms: ${String(last)}`);
}

/** A server left by a killed owner: stop it if the owner is gone, refuse if it is alive. */
async function clearStaleServer(pidFile: string, configFile: string): Promise<void> {
  const content = await fs.readFile(pidFile, 'utf8').catch(() => '');
  const [serverPid, ownerPid] = content.trim().split(/\s+/).map(Number);
  if (serverPid !== undefined && isAlive(serverPid) && commandLine(serverPid).includes(configFile)) {
    if (ownerPid !== undefined && ownerPid !== process.pid && isAlive(ownerPid)) {
      throw new Error(`${configFile} is in use by Temporal server pid ${serverPid}, started by live process ${ownerPid}`);
    }
    await terminate(serverPid, 'SIGTERM', STOP_TIMEOUT_MS);
  }
  if (existsSync(pidFile)) await fs.rm(pidFile, { force: true });
}

/** The server logs JSON lines with stack traces: keep level, message and error for a readable failure. */
function brief(output: string): string {
  return output
    .split('\n')
    .map((line) => {
      try {
        const j = JSON.parse(line) as { level?: string; msg?: string; error?: string };
        return `${j.level}: ${j.msg}${j.error ? `: ${j.error}` : ''}`;
      } catch {
        return line;
      }
    })
    .slice(-10)
    .join('\n');
}
