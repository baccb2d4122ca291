import { spawn, type ChildProcess } from 'node:child_process';
import { readFileSync } from 'node:fs';
import fs from 'node:fs/promises';

/**
 * Keeps embedded servers (PostgreSQL, Temporal) from outliving the Node process that started them.
 *
 * Three layers, because no single one covers every way a process ends:
 * - `exit` event (normal end, `process.exit()`): signal every live child synchronously.
 * - SIGINT/SIGTERM/SIGHUP when nobody else listens: stop children, then die by the same signal,
 *   as Node would have. When the application has its own handler, we stay out of its way — it
 *   drains, calls `stop()` or exits, and the `exit` layer covers the rest.
 * - SIGKILL of Node cannot be caught: a detached `sh` watchdog per child polls the parent pid and
 *   signals the child once the parent is gone.
 */
export interface GuardedChild {
  /** Synchronous last resort used from the `exit` event: send a signal, do not wait. */
  killNow(): void;
  /** Graceful stop, used when an unhandled signal arrives. */
  stop(): Promise<void>;
}

const live = new Set<GuardedChild>();
let installed = false;
const SIGNALS = ['SIGINT', 'SIGTERM', 'SIGHUP'] as const;

function install(): void {
  if (installed) return;
  installed = true;
  process.on('exit', () => {
    for (const child of live) {
      try {
        child.killNow();
      } catch {
        // already gone
      }
    }
  });
  for (const signal of SIGNALS) {
    const onSignal = () => {
      // The application handles this signal itself: it owns shutdown order (drain first, then stop).
      if (process.listenerCount(signal) > 1) return;
      const all = Promise.allSettled([...live].map((child) => child.stop()));
      const timeout = new Promise((resolve) => setTimeout(resolve, 10_000).unref());
      void Promise.race([all, timeout]).finally(() => {
        process.removeListener(signal, onSignal);
        process.kill(process.pid, signal);
      });
    };
    process.on(signal, onSignal);
  }
}

/** Registers a child; returns the function that unregisters it (call it once the child has exited). */
export function guardChild(child: GuardedChild): () => void {
  install();
  live.add(child);
  return () => {
    live.delete(child);
  };
}

/**
 * Starts a detached watchdog that sends `signal` to `childPid` once this process is gone
 * (covers SIGKILL of Node, which runs no handler). Returns a function that stops the watchdog.
 */
export function startWatchdog(childPid: number, signal: 'INT' | 'TERM'): () => void {
  // A zombie still answers `kill -0`, and a container's pid 1 may never reap: read its state too.
  const script = [
    'alive() { kill -0 "$1" 2>/dev/null || return 1; [ -r "/proc/$1/status" ] || return 0; ! grep -q "^State:[[:space:]]*[ZX]" "/proc/$1/status"; }',
    'while alive "$1" && alive "$2"; do sleep 1; done',
    'alive "$2" && kill -"$3" "$2" 2>/dev/null',
    'exit 0',
  ].join('\n');
  const watchdog = spawn('sh', ['-c', script, 'wqs-watchdog', String(process.pid), String(childPid), signal], {
    detached: true,
    stdio: 'ignore',
  });
  watchdog.on('error', () => undefined);
  watchdog.unref();
  return () => {
    try {
      if (watchdog.exitCode === null) watchdog.kill('SIGKILL');
    } catch {
      // already gone
    }
  };
}

/** True when `pid` names a running (non-zombie) process. */
export function isAlive(pid: number): boolean {
  if (!Number.isInteger(pid) || pid <= 0) return false;
  try {
    process.kill(pid, 0);
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code !== 'EPERM') return false;
  }
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    const state = stat.slice(stat.lastIndexOf(')') + 2, stat.lastIndexOf(')') + 3);
    return state !== 'Z' && state !== 'X';
  } catch {
    return true; // no /proc: trust kill(0)
  }
}

/** The process's command line (NUL-separated args joined by spaces), or '' if unknown. */
export function commandLine(pid: number): string {
  try {
    return readFileSync(`/proc/${pid}/cmdline`, 'utf8').split('\0').join(' ').trim();
  } catch {
    return '';
  }
}

/** Sends `signal`, waits up to `timeoutMs` for the process to go, escalates to SIGKILL. */
export async function terminate(pid: number, signal: NodeJS.Signals, timeoutMs: number): Promise<void> {
  const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));
  try {
    process.kill(pid, signal);
  } catch {
    return;
  }
  const deadline = Date.now() + timeoutMs;
  while (Date.now() < deadline) {
    if (!isAlive(pid)) return;
    await sleep(50);
  }
  try {
    process.kill(pid, 'SIGKILL');
  } catch {
    return;
  }
  while (isAlive(pid)) await sleep(50);
}

/** A bounded buffer of the last lines a child printed, for error messages. */
export class LogTail {
  private lines: string[] = [];
  constructor(private readonly max = 40) {}
  push(chunk: string): void {
    for (const line of chunk.split(/\r?\n/)) {
      if (line.trim() === '') continue;
      this.lines.push(line);
      if (this.lines.length > this.max) this.lines.shift();
    }
  }
  clear(): void {
    this.lines = [];
  }
  toString(): string {
    return this.lines.join('\n');
  }
}

export type LogOption = boolean | ((line: string) => void) | undefined;

/** Turns the `log` option into a line sink; quiet (undefined) by default. */
export function logSink(log: LogOption, prefix: string): ((chunk: string) => void) | undefined {
  if (!log) return undefined;
  const write = log === true ? (line: string) => process.stderr.write(`${prefix} ${line}\n`) : log;
  return (chunk: string) => {
    for (const line of chunk.split(/\r?\n/)) if (line.trim() !== '') write(line);
  };
}

export interface SupervisedChild {
  child: ChildProcess;
  /** Resolves once the process has exited (or never started). */
  exited: Promise<void>;
  hasExited(): boolean;
  /** Why the spawn itself failed (binary missing, not executable), if it did. */
  spawnError(): Error | undefined;
  /** SIGTERM, then SIGKILL after `stopTimeoutMs`; unguards, stops the watchdog, removes the pid file. Idempotent. */
  stop(): Promise<void>;
}

/**
 * Spawns a server we own (a Temporal server, the dev server): its output goes to `tail` (and `sink`),
 * it is guarded (stopped when this process is signalled), watched (stopped when this process is
 * killed outright) and its pid is written to `pidFile` (`<child> <parent>`), so a later start can
 * clean up after a crash.
 */
export async function spawnSupervised(
  command: string,
  args: string[],
  o: { cwd?: string; tail: LogTail; sink?: (chunk: string) => void; pidFile: string; stopTimeoutMs: number },
): Promise<SupervisedChild> {
  const child = spawn(command, args, { cwd: o.cwd, stdio: ['ignore', 'pipe', 'pipe'] });
  const onOutput = (chunk: Buffer) => {
    const text = chunk.toString('utf8');
    o.tail.push(text);
    o.sink?.(text);
  };
  child.stdout!.on('data', onOutput);
  child.stderr!.on('data', onOutput);
  let spawnError: Error | undefined;
  child.once('error', (err) => {
    spawnError = err;
  });
  const exited = new Promise<void>((resolve) => {
    if (child.exitCode !== null || child.signalCode !== null) resolve();
    else child.once('close', () => resolve());
  });
  const hasExited = () => spawnError !== undefined || child.exitCode !== null || child.signalCode !== null;
  let stopWatchdog = () => {};
  let stopping: Promise<void> | undefined;
  const stop = () => {
    stopping ??= (async () => {
      if (!hasExited()) {
        child.kill('SIGTERM');
        const timer = setTimeout(() => child.kill('SIGKILL'), o.stopTimeoutMs);
        await exited;
        clearTimeout(timer);
      }
      stopWatchdog();
      unguard();
      await fs.rm(o.pidFile, { force: true });
    })();
    return stopping;
  };
  const unguard = guardChild({ killNow: () => child.kill('SIGTERM'), stop });
  if (child.pid !== undefined) {
    stopWatchdog = startWatchdog(child.pid, 'TERM');
    await fs.writeFile(o.pidFile, `${child.pid} ${process.pid}\n`);
  }
  return { child, exited, hasExited, spawnError: () => spawnError, stop };
}
