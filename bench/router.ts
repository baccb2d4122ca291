// The prompt router's quality and speed (issue 10): the labelled evaluation set
// (test/router-eval/cases.jsonl) on the demo catalog — top-1 accuracy, top-3 recall, correct
// abstention, exact filled input — then the same prompts with 10,000 synthetic workflows beside
// the demo catalog (bench/catalog.ts's seed), for the router's p50/p95 latency at that size and
// where the time goes (embed, lexical SQL, dense scan, fill, rerank). Every figure is taken for
// the lexical baseline (embeddings off) and the hybrid router in the same run, the two passes
// alternated, each with the load average beside it (the machine is shared).
// Runs in a database of its own on the stack's server, dropped at the end.
import { mkdtemp, rm } from 'node:fs/promises';
import { loadavg, tmpdir } from 'node:os';
import path from 'node:path';
import { pathToFileURL } from 'node:url';
import pg from 'pg';
import { migrate } from '../shared/db/migrate.ts';
import { createOrg, PLATFORM_ORG_ID } from '../shared/db/orgs.ts';
import { createPool } from '../shared/db/pool.ts';
import { seedDemoCatalog } from '../shared/db/seed.ts';
import { startEmbeddedPostgres } from '../shared/infra/embedded-postgres.ts';
import { createRouter, type OfflineRouter, type StageTimes } from '../shared/router/index.ts';
import { DEFAULT_NOW, evaluate, loadCases, TARGETS, type EvalReport } from '../test/router-eval/evaluate.ts';
import { seedSyntheticCatalog } from './catalog.ts';
import { percentile } from './stats.ts';

const brief = ({ failures, ...r }: EvalReport) => ({ ...r, failures: failures.length });
const load = () => loadavg().map((x) => Math.round(x * 100) / 100);
const STAGES = ['embed_ms', 'lexical_ms', 'dense_ms', 'fill_ms', 'rerank_ms', 'total_ms'] as const;

/** p50 / p95 of each stage over a pass. */
function stageSummary(ts: StageTimes[]) {
  return Object.fromEntries(
    STAGES.map((k) => {
      const xs = ts.map((t) => t[k]).sort((a, b) => a - b);
      return [k, { p50: Math.round(percentile(xs, 50) * 100) / 100, p95: Math.round(percentile(xs, 95) * 100) / 100 }];
    }),
  );
}

/** Every router the bench made: each holds a model thread, closed before the process may exit. */
const opened: OfflineRouter[] = [];
function remember(r: OfflineRouter): OfflineRouter {
  opened.push(r);
  return r;
}

/** A router whose stage times go to `sink` (the bench reads and clears it per pass). */
function timedRouter(db: ReturnType<typeof createPool>, dense: boolean, sink: StageTimes[]): OfflineRouter {
  return remember(createRouter({ db, now: () => new Date(DEFAULT_NOW), embeddings: dense ? undefined : false, onStages: (t) => sink.push(t) }));
}

export async function runRouterBench(opts: { databaseUrl?: string; workflows?: number; log?: (l: string) => void } = {}) {
  const log = opts.log ?? (() => {});
  const n = opts.workflows ?? 10_000;
  let serverUrl = opts.databaseUrl;
  let stopPg: (() => Promise<void>) | undefined;
  let tmp: string | undefined;
  if (!serverUrl) {
    tmp = await mkdtemp(path.join(tmpdir(), 'wqs-bench-router-'));
    const embedded = await startEmbeddedPostgres({ dataDir: tmp });
    serverUrl = embedded.databaseUrl;
    stopPg = embedded.stop;
  }
  const dbName = `wqs_bench_router_${process.pid}_${Date.now()}`;
  const admin = async (sql: string) => {
    const c = new pg.Client({ connectionString: serverUrl });
    c.on('error', () => {});
    await c.connect();
    try {
      await c.query(sql);
    } finally {
      await c.end().catch(() => {});
    }
  };
  await admin(`CREATE DATABASE ${dbName}`);
  const url = new URL(serverUrl);
  url.pathname = `/${dbName}`;
  // Seeding 10,000 workflows on a busy machine outlasts the default 30 s statement timeout.
  const db = createPool(url.toString(), 4, { statementTimeoutMs: 900_000 });
  try {
    await migrate(url.toString());
    await seedDemoCatalog(db);
    const org = await createOrg(db, 'Router bench', 0);
    const cases = loadCases();
    const sink: StageTimes[] = [];
    const lexical = timedRouter(db, false, sink);
    const hybrid = timedRouter(db, true, sink);
    lexical.warmUp();
    hybrid.warmUp();
    const dense = await hybrid.ready();
    log(`router bench: embeddings ${dense ? 'on' : 'off (the model is not installed: both passes are lexical)'}`);
    const quality = async (router: OfflineRouter) => {
      const all = await evaluate(router, db, org.org_id, cases);
      const heldout = await evaluate(router, db, org.org_id, cases.filter((c) => c.split === 'heldout'));
      return { all: brief(all), heldout: brief(heldout), met: met(all) };
    };
    const demo = { lexical: await quality(lexical), hybrid: await quality(hybrid) };
    log(`router bench: demo catalog lexical ${JSON.stringify(demo.lexical.all)}`);
    log(`router bench: demo catalog hybrid ${JSON.stringify(demo.hybrid.all)}`);

    // bench/catalog.ts's seed predates owners (migration 500 made apis.owner_org_id NOT NULL):
    // in this throwaway database its workflows belong to the platform, as published ones do.
    await db.query(`ALTER TABLE apis ALTER COLUMN owner_org_id SET DEFAULT '${PLATFORM_ORG_ID}'`);
    await seedSyntheticCatalog(db, n);
    // The synthetic seed loads without triggers: build its routing documents once.
    await db.query(`SELECT router_document_refresh(o.id) FROM operations o JOIN apis a ON a.id = o.api_id WHERE a.handle LIKE '@bench-%'`);
    await db.query('VACUUM ANALYZE router_documents, router_keywords');
    // A first start with this catalog embeds every operation (in the background, stored in
    // PostgreSQL); a second start only reads the stored vectors.
    const startUp = async () => {
      const t0 = performance.now();
      const r = timedRouter(db, true, sink);
      r.warmUp();
      await r.ready();
      return { router: r, ms: Math.round(performance.now() - t0), load: load() };
    };
    const first = dense ? await startUp() : null;
    const second = dense ? await startUp() : null;
    if (first && second) log(`router bench: at ${n} workflows a first start embedded the catalog in ${first.ms} ms (load ${first.load}); a second start read the stored vectors in ${second.ms} ms`);
    const largeLexical = timedRouter(db, false, sink);
    largeLexical.warmUp();
    const largeHybrid = second?.router ?? largeLexical;
    // Alternated, so both variants see the same machine.
    const passes: Array<{ variant: 'lexical' | 'hybrid'; p50_ms: number; p95_ms: number; top1: number; abstention: number; stages: ReturnType<typeof stageSummary>; load_before: number[]; load_after: number[] }> = [];
    let largeReport: Record<'lexical' | 'hybrid', EvalReport | undefined> = { lexical: undefined, hybrid: undefined };
    for (let round = 0; round < 2; round++) {
      for (const [variant, router] of [['lexical', largeLexical], ['hybrid', largeHybrid]] as const) {
        sink.length = 0;
        const before = load();
        const r = await evaluate(router, db, org.org_id, cases);
        passes.push({ variant, p50_ms: r.latency.p50_ms, p95_ms: r.latency.p95_ms, top1: r.top1, abstention: r.abstention, stages: stageSummary(sink), load_before: before, load_after: load() });
        largeReport = { ...largeReport, [variant]: r };
        log(`router bench: at ${n} workflows ${variant} p50 ${r.latency.p50_ms} ms, p95 ${r.latency.p95_ms} ms (load ${before})`);
      }
    }
    const best95 = (v: 'lexical' | 'hybrid') => Math.min(...passes.filter((p) => p.variant === v).map((p) => p.p95_ms));
    const worst95 = (v: 'lexical' | 'hybrid') => Math.max(...passes.filter((p) => p.variant === v).map((p) => p.p95_ms));
    return {
      cases: cases.length,
      embeddings: dense,
      demo_catalog: demo,
      workflows: n,
      start_up: first && second ? { first_start_embed_ms: first.ms, first_start_load: first.load, second_start_read_ms: second.ms } : null,
      at_workflows: {
        passes,
        lexical: brief(largeReport.lexical!),
        hybrid: brief(largeReport.hybrid!),
        p95_ms: { lexical: { best: best95('lexical'), worst: worst95('lexical') }, hybrid: { best: best95('hybrid'), worst: worst95('hybrid') } },
      },
      targets: TARGETS,
      met: {
        ...demo.hybrid.met,
        actions_chosen_out_of_scope: demo.hybrid.met.actions_chosen_out_of_scope && largeReport.hybrid!.actions_chosen_out_of_scope === 0,
        p95_ms: worst95('hybrid') <= TARGETS.p95_ms,
      },
    };
  } finally {
    await Promise.all(opened.splice(0).map((r) => r.close()));
    await db.end();
    await admin(`DROP DATABASE IF EXISTS ${dbName} WITH (FORCE)`).catch((err) => log(`router bench: could not drop ${dbName}: ${(err as Error).message}`));
    await stopPg?.();
    if (tmp) await rm(tmp, { recursive: true, force: true });
  }
}

function met(r: EvalReport) {
  return {
    top1: r.top1 >= TARGETS.top1,
    abstention: r.abstention >= TARGETS.abstention,
    fill_exact: r.fill_exact >= TARGETS.fill_exact,
    actions_chosen_out_of_scope: r.actions_chosen_out_of_scope === 0,
  };
}

/** Entry for `npm run bench` (bench/main.ts). */
export async function benchRouter(input: { databaseUrl: string }) {
  return runRouterBench({ databaseUrl: input.databaseUrl, log: (l) => console.error(l) });
}

// `node --import tsx bench/router.ts` runs it alone (on an embedded PostgreSQL of its own).
if (import.meta.url === pathToFileURL(process.argv[1] ?? '').href) {
  runRouterBench({ log: (l) => console.error(l) }).then(
    (f) => console.log(JSON.stringify(f, null, 2)),
    (err) => {
      console.error(err);
      process.exitCode = 1;
    },
  );
}
