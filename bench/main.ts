// `npm run bench`: benchmarks (never tests). Starts the whole service on embedded defaults in a
// fresh DATA_DIR, measures each surface beside a baseline taken in the same run, and ends with
// one line of JSON holding every figure and ratio.
import fs from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { loadConfig } from '../shared/config.ts';
import { createPool } from '../shared/db/pool.ts';
import { createOrg } from '../shared/db/orgs.ts';
import { startDevStack } from '../apps/dev/stack.ts';
import { benchQuery } from './query.ts';
import { benchBreakdown } from './breakdown.ts';
import { benchResultWait } from './result-wait.ts';
import { startApi } from '../apps/api/server.ts';
import { workerTuning } from '../apps/worker/worker.ts';
import { DEV_DYNAMIC_CONFIG } from '../shared/infra/temporal-dev-server.ts';

const dataDir = await fs.mkdtemp(path.join(os.tmpdir(), 'wqs-bench-'));
const config = loadConfig({
  ...process.env,
  DATA_DIR: dataDir,
  PORT: '0',
  // Quiet by default (the service's own default is info: `LOG_LEVEL=info npm run bench` measures that).
  LOG_LEVEL: process.env.LOG_LEVEL ?? 'warn',
  // The benchmark measures the engine, not the plan's limits.
  PLAN_REQUESTS_PER_MINUTE: '100000000',
  PLAN_CONCURRENCY: '100000',
  ORG_REQUESTS_PER_SECOND: '1000000',
  ORG_REQUEST_BURST: '1000000',
  // No background health checks competing with the measurement.
  HEALTH_CHECKS_ENABLED: 'false',
});
const stack = await startDevStack(config);
const db = createPool(stack.databaseUrl, 2);
const org = await createOrg(db, 'Benchmark', 1_000_000_000);
await db.end();
const results: Record<string, unknown> = {
  machine: { cores: os.cpus().length, node: process.version, loadavg_before: os.loadavg() },
  // What this run measured with: the API's result wait, the dev server's dynamic config, worker tuning.
  settings: {
    RESULT_WAIT: config.RESULT_WAIT,
    dynamic_config: { ...DEV_DYNAMIC_CONFIG, ...JSON.parse(process.env.TEMPORAL_DEV_DYNAMIC_CONFIG ?? '{}') },
    worker: Object.fromEntries(Object.entries(config).filter(([k]) => k.startsWith('WORKER_'))),
    // What Worker.create gets for the query task queue, the defaults worked out (apps/worker/worker.ts).
    worker_tuning: workerTuning(config),
  },
};
// BENCH_ONLY=query (comma-separated names) runs only those parts: a quicker loop while tuning.
const only = process.env.BENCH_ONLY?.split(',').map((s) => s.trim());
const wanted = (name: string) => !only || only.includes(name);
/** `fn` with a second API on the same stack (settings over the stack's), closed afterwards. */
async function withApi<T>(settings: Partial<typeof stack.config>, options: Parameters<typeof startApi>[1], fn: (url: string) => Promise<T>): Promise<T> {
  const api = await startApi({ ...stack.config, ...settings, PORT: 0 }, options);
  try {
    return await fn(api.url);
  } finally {
    await api.close();
  }
}
try {
  if (wanted('breakdown')) {
    results.breakdown = await benchBreakdown({ baseUrl: stack.url, apiKey: org.api_key, databaseUrl: stack.databaseUrl, temporalAddress: stack.temporalAddress });
  }
  if (wanted('breakdown_no_eager')) {
    // The same query through a second API that starts workflows without eager start, as an API in a
    // process of its own does (compose, Helm, `npm run cluster`): where the production path differs.
    results.breakdown_no_eager = await withApi({}, undefined, (url) =>
      benchBreakdown({ baseUrl: url, apiKey: org.api_key, databaseUrl: stack.databaseUrl, temporalAddress: stack.temporalAddress }),
    );
  }
  if (wanted('breakdown_browser')) {
    // The same for a browser operation (two workflow tasks around one activity on the browser queue).
    results.breakdown_browser = await benchBreakdown({
      baseUrl: stack.url,
      apiKey: org.api_key,
      databaseUrl: stack.databaseUrl,
      temporalAddress: stack.temporalAddress,
      samples: 15,
      pauseMs: Number(process.env.BENCH_PAUSE_MS ?? 300),
      query: { api: '@jobs', operation: 'search_jobs', input: { keywords: 'typescript', location: 'london' } },
    });
  }
  if (wanted('query')) {
    // A second API on the same stack and the same result wait, but starting workflows without eager
    // start (as an API in a process of its own does): what eager start gives, in the same run.
    results.query = await withApi({}, undefined, (url) =>
      benchQuery({
        baseUrl: stack.url,
        apiKey: org.api_key,
        siteOrigin: stack.sites.origin,
        label: `${stack.config.RESULT_WAIT}, eager start`,
        other: { baseUrl: url, label: 'no_eager' },
      }),
    );
  }
  if (wanted('temporal_floor')) {
    const { benchTemporalFloor } = await import('./temporal-floor.ts');
    results.temporal_floor = await benchTemporalFloor({ workerConnection: stack.workerConnection });
  }
  if (wanted('result_wait')) {
    const otherWait = stack.config.RESULT_WAIT === 'notify' ? 'history' : 'notify';
    // Both eager (the in-process worker's connection), so only the result wait differs.
    results.result_wait = await withApi({ RESULT_WAIT: otherWait }, { workerConnection: stack.workerConnection }, (url) =>
      benchResultWait({ apiKey: org.api_key, apis: { [stack.config.RESULT_WAIT]: stack.url, [otherWait]: url } }),
    );
  }
  // Benchmarks of the other surfaces, when present.
  for (const [name, file, fn] of [
    ['sse', './sse.ts', 'benchSse'],
    ['browser', './browser.ts', 'benchBrowser'],
    ['catalog', './catalog.ts', 'benchCatalog'],
    ['router', './router.ts', 'benchRouter'],
    // Last: three minutes at c=16, RSS before and after, the ledger checked.
    ['sustained', './sustained.ts', 'benchSustained'],
  ] as const) {
    if (!wanted(name)) continue;
    const mod = (await import(file).catch(() => null)) as Record<string, (i: unknown) => Promise<unknown>> | null;
    if (!mod?.[fn]) continue;
    results[name] = await mod[fn]({ baseUrl: stack.url, apiKey: org.api_key, siteOrigin: stack.sites.origin, hostMap: stack.sites.hostMap, databaseUrl: stack.databaseUrl, chromiumPath: config.CHROMIUM_PATH });
  }
} finally {
  await stack.stop();
  await fs.rm(dataDir, { recursive: true, force: true });
}
(results.machine as Record<string, unknown>).loadavg_after = os.loadavg();
console.log(JSON.stringify(results));
process.exit(0);
