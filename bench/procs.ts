// Per-process CPU time and memory of the stack under measurement, read from /proc (Linux): this
// process and every process it started (PostgreSQL's backends, the Temporal server, workers),
// grouped by what they are. CPU per query is what bounds throughput on two cores, so the bench
// reports where it goes; RSS before and after a sustained run shows whether anything grows.
import fs from 'node:fs';

const TICK_MS = 1000 / 100; // USER_HZ is 100 on every Linux this runs on
const PAGE_KB = 4;

interface ProcStat {
  pid: number;
  ppid: number;
  comm: string;
  cpuMs: number;
  rssKb: number;
  /** Private (anonymous) resident memory: what grows when a process leaks. RSS also counts shared pages (PostgreSQL's shared buffers in every backend). */
  anonKb: number;
}

function readStat(pid: number): ProcStat | undefined {
  try {
    const raw = fs.readFileSync(`/proc/${pid}/stat`, 'utf8');
    // comm is parenthesised and may hold spaces: split after its closing parenthesis.
    const close = raw.lastIndexOf(')');
    const comm = raw.slice(raw.indexOf('(') + 1, close);
    const f = raw.slice(close + 2).split(' ');
    // Fields after comm, 0-based: 1 ppid, 11 utime, 12 stime, 13 cutime, 14 cstime, 21 rss (pages).
    // cutime/cstime hold the CPU of children that exited and were reaped: Chromium's renderers end
    // with their context, and without these a browser run's CPU was mostly not counted.
    const anon = /RssAnon:\s+(\d+)/.exec(fs.readFileSync(`/proc/${pid}/status`, 'utf8'));
    const cpuTicks = Number(f[11]) + Number(f[12]) + Number(f[13]) + Number(f[14]);
    return { pid, ppid: Number(f[1]), comm, cpuMs: cpuTicks * TICK_MS, rssKb: Number(f[21]) * PAGE_KB, anonKb: anon ? Number(anon[1]) : 0 };
  } catch {
    return undefined; // gone between listing and reading
  }
}

function cmdline(pid: number): string {
  try {
    return fs.readFileSync(`/proc/${pid}/cmdline`, 'utf8').replaceAll('\0', ' ');
  } catch {
    return '';
  }
}

/** A group name for a process: what a reader of the bench output recognises. */
function groupOf(p: ProcStat, root: number, names: Map<number, string>): string {
  if (p.pid === root) return names.get(p.pid) ?? 'bench process (node)';
  const named = names.get(p.pid);
  if (named) return named;
  const cmd = cmdline(p.pid);
  if (p.comm.startsWith('postgres') || cmd.includes('postgres')) return 'postgresql (all backends)';
  if (cmd.includes('temporal')) return 'temporal server';
  if (p.comm.includes('chrom') || cmd.includes('chromium')) return 'chromium';
  return p.comm;
}

export interface ProcSnapshot {
  at: number;
  groups: Record<string, { cpu_ms: number; rss_mb: number; anon_mb: number; processes: number }>;
}

/**
 * CPU and RSS of `root` (default: this process) and all its descendants, by group. `names` names
 * processes the caller knows (a child API or worker it spawned).
 */
export function snapshot(root = process.pid, names = new Map<number, string>()): ProcSnapshot {
  const all = new Map<number, ProcStat>();
  for (const d of fs.readdirSync('/proc')) {
    if (!/^\d+$/.test(d)) continue;
    const s = readStat(Number(d));
    if (s) all.set(s.pid, s);
  }
  const inTree = (pid: number): boolean => {
    for (let p = all.get(pid), hops = 0; p && hops < 64; p = all.get(p.ppid), hops++) if (p.pid === root) return true;
    return false;
  };
  const groups: ProcSnapshot['groups'] = {};
  for (const p of all.values()) {
    if (!inTree(p.pid)) continue;
    const g = (groups[groupOf(p, root, names)] ??= { cpu_ms: 0, rss_mb: 0, anon_mb: 0, processes: 0 });
    g.cpu_ms += p.cpuMs;
    g.rss_mb += p.rssKb / 1024;
    g.anon_mb += p.anonKb / 1024;
    g.processes += 1;
  }
  for (const g of Object.values(groups)) {
    g.rss_mb = Math.round(g.rss_mb * 10) / 10;
    g.anon_mb = Math.round(g.anon_mb * 10) / 10;
  }
  return { at: performance.now(), groups };
}

/** CPU each group spent between two snapshots, per query when `queries` is given. */
export function cpuBetween(a: ProcSnapshot, b: ProcSnapshot, queries?: number) {
  const out: Record<string, { cpu_ms: number; cpu_ms_per_query?: number; share_of_wall: number }> = {};
  const wall = b.at - a.at;
  for (const [name, g] of Object.entries(b.groups)) {
    // A process that started between the snapshots counts from zero.
    const spent = g.cpu_ms - (a.groups[name]?.cpu_ms ?? 0);
    out[name] = {
      cpu_ms: Math.round(spent),
      ...(queries ? { cpu_ms_per_query: Math.round((spent / queries) * 100) / 100 } : {}),
      share_of_wall: Math.round((spent / wall) * 100) / 100,
    };
  }
  return out;
}
