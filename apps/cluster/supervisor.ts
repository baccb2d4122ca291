// A small process supervisor: starts named parts in order, restarts one that dies on its own (like
// a container's restart policy), and lets `npm run chaos` kill any one with SIGKILL and bring it
// back by name. Stops everything in reverse order.
import { spawn } from 'node:child_process';
import { createWriteStream } from 'node:fs';
import { readdirSync, readFileSync } from 'node:fs';
import { guardChild, isAlive, startWatchdog, terminate } from '../../shared/infra/process-guard.ts';

export interface Running {
  pid: number;
  /** Resolves once the part's process has exited, however it ended. */
  exited: Promise<void>;
  /** Graceful stop (SIGTERM and a drain, or the part's own stop). */
  stop(): Promise<void>;
}

export interface Part {
  name: string;
  /** Starts the part and resolves once it is ready to serve. */
  start(): Promise<Running>;
  /** Processes that die with the part when it is killed (PostgreSQL's backends), besides `pid`. */
  alsoKill?: (pid: number) => number[];
}

type Log = (event: string, fields?: Record<string, unknown>) => void;

export class Supervisor {
  private readonly parts: Part[] = [];
  private readonly running = new Map<string, Running>();
  /** Parts being killed or restarted on purpose: their exit is not a crash to react to. */
  private readonly handled = new Set<string>();
  private stopping = false;
  /** Exits nobody asked for, by part: what chaos reports beside its own kills. */
  readonly unexpectedExits: Record<string, number> = {};

  constructor(private readonly log: Log) {}

  names(): string[] {
    return this.parts.map((p) => p.name);
  }

  pidOf(name: string): number | undefined {
    return this.running.get(name)?.pid;
  }

  /** Starts the part now and keeps it running from then on. */
  async add(part: Part): Promise<void> {
    this.parts.push(part);
    await this.launch(part);
  }

  /** SIGKILL to the part (and its own children, where it has some), then waits for its exit. */
  async kill(name: string): Promise<void> {
    const run = this.running.get(name);
    if (!run) throw new Error(`no running part named ${name}`);
    const part = this.part(name);
    this.handled.add(name);
    const pids = [run.pid, ...(part.alsoKill?.(run.pid) ?? [])];
    for (const pid of pids) {
      try {
        process.kill(pid, 'SIGKILL');
      } catch {
        // already gone
      }
    }
    await run.exited;
    for (const pid of pids) while (isAlive(pid)) await new Promise((r) => setTimeout(r, 50));
    this.running.delete(name);
    this.log('killed', { part: name, pid: run.pid });
  }

  /** Starts a killed part again; resolves once it is ready. */
  async restart(name: string): Promise<void> {
    try {
      await this.launch(this.part(name));
    } finally {
      this.handled.delete(name);
    }
  }

  async stopAll(): Promise<void> {
    this.stopping = true;
    for (const part of [...this.parts].reverse()) {
      const run = this.running.get(part.name);
      if (!run) continue;
      await run.stop().catch((err) => this.log('stop_failed', { part: part.name, error: String(err) }));
      this.running.delete(part.name);
    }
  }

  private part(name: string): Part {
    const part = this.parts.find((p) => p.name === name);
    if (!part) throw new Error(`no part named ${name} (parts: ${this.names().join(', ')})`);
    return part;
  }

  private async launch(part: Part): Promise<void> {
    const started = Date.now();
    const run = await part.start();
    this.running.set(part.name, run);
    this.log('started', { part: part.name, pid: run.pid, seconds: (Date.now() - started) / 1000 });
    void run.exited.then(() => this.onExit(part, run));
  }

  /** A part that died on its own is started again after a second, with backoff while it keeps failing. */
  private async onExit(part: Part, run: Running): Promise<void> {
    if (this.stopping || this.handled.has(part.name) || this.running.get(part.name) !== run) return;
    this.running.delete(part.name);
    this.unexpectedExits[part.name] = (this.unexpectedExits[part.name] ?? 0) + 1;
    this.log('exited', { part: part.name, pid: run.pid });
    for (let delay = 1_000; !this.stopping && !this.handled.has(part.name); delay = Math.min(delay * 2, 30_000)) {
      await new Promise((r) => setTimeout(r, delay));
      if (this.stopping || this.handled.has(part.name)) return;
      try {
        await this.launch(part);
        return;
      } catch (err) {
        this.log('restart_failed', { part: part.name, error: err instanceof Error ? err.message.split('\n')[0] : String(err) });
      }
    }
  }
}

/**
 * A Node entry point of this repository as a child process: ready when it prints a JSON line with
 * `event: readyEvent`. Output goes to `logFile`. Dies with the supervisor (process-guard).
 */
export async function startNodeProcess(options: {
  entry: string;
  env: Record<string, string>;
  readyEvent: string;
  logFile: string;
  cwd: string;
  timeoutMs?: number;
}): Promise<Running & { ready: Record<string, unknown> }> {
  const log = createWriteStream(options.logFile, { flags: 'a' });
  const child = spawn(process.execPath, ['--import', 'tsx', options.entry], {
    cwd: options.cwd,
    env: { ...process.env, ...options.env },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
  const stopWatchdog = child.pid === undefined ? () => {} : startWatchdog(child.pid, 'TERM');
  let stopping: Promise<void> | undefined;
  const stop = () => {
    // The API drains queries up to their deadline; bounded here so a stop never hangs the cluster.
    stopping ??= (async () => {
      if (child.exitCode === null && child.signalCode === null && child.pid !== undefined) await terminate(child.pid, 'SIGTERM', 20_000);
      await exited;
      stopWatchdog();
      unguard();
    })();
    return stopping;
  };
  const unguard = guardChild({ killNow: () => child.kill('SIGTERM'), stop });
  void exited.then(() => {
    stopWatchdog();
    unguard();
  });
  let buffer = '';
  const ready = await new Promise<Record<string, unknown>>((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`${options.entry} not ready after ${options.timeoutMs ?? 120_000} ms (log: ${options.logFile})`)), options.timeoutMs ?? 120_000);
    child.stdout.on('data', (chunk: Buffer) => {
      log.write(chunk);
      buffer += chunk.toString('utf8');
      let nl: number;
      while ((nl = buffer.indexOf('\n')) >= 0) {
        const line = buffer.slice(0, nl);
        buffer = buffer.slice(nl + 1);
        if (!line.startsWith('{')) continue;
        try {
          const j = JSON.parse(line) as Record<string, unknown>;
          if (j.event === options.readyEvent) {
            clearTimeout(timer);
            resolve(j);
          }
        } catch {
          // not JSON after all
        }
      }
    });
    child.stderr.on('data', (chunk: Buffer) => log.write(chunk));
    void exited.then(() => {
      clearTimeout(timer);
      reject(new Error(`${options.entry} exited (code ${child.exitCode}, signal ${child.signalCode}) before it was ready (log: ${options.logFile})`));
    });
  });
  void exited.then(() => log.end());
  return { pid: child.pid!, exited, stop, ready };
}

/** Direct children of `pid` (from /proc): a PostgreSQL postmaster's backends and helpers. */
export function childrenOf(pid: number): number[] {
  const out: number[] = [];
  for (const entry of readdirSync('/proc')) {
    if (!/^\d+$/.test(entry)) continue;
    try {
      const stat = readFileSync(`/proc/${entry}/stat`, 'utf8');
      const ppid = Number(stat.slice(stat.lastIndexOf(')') + 2).split(' ')[1]);
      if (ppid === pid) out.push(Number(entry));
    } catch {
      // gone meanwhile
    }
  }
  return out;
}
