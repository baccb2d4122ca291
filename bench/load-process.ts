// Load from a process of its own (bench/load-child.ts), the way callers reach the service: the
// bench process hosts the whole stack (API, worker, demo sites), so a load generator inside it took
// event-loop time and CPU from the API and was counted as the service's own.
import { execFile } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import type { Summary } from './stats.ts';

export interface LoadSpec {
  url: string;
  method: 'GET' | 'POST';
  headers: Record<string, string>;
  body?: string;
  expectStatus: number;
  total: number;
  concurrency: number;
  warmup: number;
}

const CHILD = fileURLToPath(new URL('./load-child.ts', import.meta.url));

export interface ChildLoad {
  summary: Summary;
  /** CPU of the load generator while it measured. */
  cpuMs: number;
  /** Its CPU over its whole life: once it exits, the bench process's own figure (cutime) holds it. */
  lifeCpuMs: number;
}

/** Run `spec` in a child process. */
export async function loadInChild(spec: LoadSpec): Promise<ChildLoad> {
  const { stdout } = await promisify(execFile)(process.execPath, ['--import', 'tsx', CHILD, JSON.stringify(spec)], { maxBuffer: 1 << 20 });
  const { cpu_ms, life_cpu_ms, ...summary } = JSON.parse(stdout.trim().split('\n').at(-1)!) as Summary & { cpu_ms: number; life_cpu_ms: number };
  return { summary, cpuMs: cpu_ms, lifeCpuMs: life_cpu_ms };
}

/**
 * CPU by process group (procs.ts cpuBetween) with a load generator that ran and exited in between
 * taken out of the bench process's figure and shown as its own group.
 */
export function withoutLoadGenerator<T extends { cpu_ms: number; cpu_ms_per_query?: number; share_of_wall: number }>(
  groups: Record<string, T>,
  load: ChildLoad,
  queries: number,
  root = 'bench process (node)',
): Record<string, { cpu_ms: number; cpu_ms_per_query?: number; share_of_wall?: number }> {
  const out: Record<string, { cpu_ms: number; cpu_ms_per_query?: number; share_of_wall?: number }> = { ...groups };
  const own = groups[root];
  if (own) {
    const cpu = Math.max(0, own.cpu_ms - load.lifeCpuMs);
    const wall = own.share_of_wall > 0 ? own.cpu_ms / own.share_of_wall : 0;
    out[root] = { cpu_ms: cpu, cpu_ms_per_query: Math.round((cpu / queries) * 100) / 100, share_of_wall: wall ? Math.round((cpu / wall) * 100) / 100 : 0 };
  }
  out['load generator (own process, measuring)'] = { cpu_ms: load.cpuMs, cpu_ms_per_query: Math.round((load.cpuMs / queries) * 100) / 100 };
  return out;
}
