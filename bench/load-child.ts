// The load generator of bench/load-process.ts, run as a process of its own: callers of the service
// are other processes, so their HTTP work must not share the service's event loop (in the bench
// process, it did: the c=16 figure then measured the client too). Reads one JSON spec from argv,
// keeps `concurrency` requests in flight over a keep-alive pool, and prints one JSON line: the
// latency summary, this process's CPU while measuring, and over its whole life (start-up and
// warm-up too: what the caller takes out of the CPU it reads for its own process tree).
import { Pool } from 'undici';
import { load } from './stats.ts';
import type { LoadSpec } from './load-process.ts';

const spec = JSON.parse(process.argv[2]!) as LoadSpec;
const url = new URL(spec.url);
const pool = new Pool(url.origin, { connections: spec.concurrency });
const one = async () => {
  const res = await pool.request({ path: url.pathname + url.search, method: spec.method, headers: spec.headers, body: spec.body });
  await res.body.arrayBuffer();
  return res.statusCode === spec.expectStatus;
};
for (let i = 0; i < spec.warmup; i++) await one().catch(() => false);
const cpu = process.cpuUsage();
const summary = await load(one, { total: spec.total, concurrency: spec.concurrency });
const used = process.cpuUsage(cpu);
await pool.close();
const life = process.cpuUsage();
process.stdout.write(
  `${JSON.stringify({ ...summary, cpu_ms: Math.round((used.user + used.system) / 1000), life_cpu_ms: Math.round((life.user + life.system) / 1000) })}\n`,
);
