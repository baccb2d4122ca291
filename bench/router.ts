// The prompt router's quality and speed (issue 10): the labelled evaluation set
// (test/router-eval/cases.jsonl) on the demo catalog — top-1 accuracy, top-3 recall, correct
// abstention, exact filled input — then the same prompts with 10,000 synthetic workflows beside
// the demo catalog (bench/catalog.ts's seed), for the router's p50/p95 latency at that size.
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
import { createRouter } from '../shared/router/index.ts';
import { DEFAULT_NOW, evaluate, loadCases, TARGETS, type EvalReport } from '../test/router-eval/evaluate.ts';
import { seedSyntheticCatalog } from './catalog.ts';

const brief = ({ failures, ...r }: EvalReport) => ({ ...r, failures: failures.length });

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
    const router = createRouter({ db, now: () => new Date(DEFAULT_NOW) });
    const cases = loadCases();
    router.warmUp();
    const dense = await router.ready();
    log(`router bench: embeddings ${dense ? 'on' : 'off (lexical)'}`);
    const demo = await evaluate(router, db, org.org_id, cases);
    const heldout = await evaluate(router, db, org.org_id, cases.filter((c) => c.split === 'heldout'));
    log(`router bench: demo catalog top-1 ${demo.top1}, abstention ${demo.abstention}, fill exact ${demo.fill_exact}`);

    // bench/catalog.ts's seed predates owners (migration 500 made apis.owner_org_id NOT NULL):
    // in this throwaway database its workflows belong to the platform, as published ones do.
    await db.query(`ALTER TABLE apis ALTER COLUMN owner_org_id SET DEFAULT '${PLATFORM_ORG_ID}'`);
    await seedSyntheticCatalog(db, n);
    // The synthetic seed loads without triggers: build its routing documents once.
    await db.query(`SELECT router_document_refresh(o.id) FROM operations o JOIN apis a ON a.id = o.api_id WHERE a.handle LIKE '@bench-%'`);
    await db.query('VACUUM ANALYZE router_documents, router_keywords');
    // As at a start with this catalog: the background warming embeds every operation first.
    const warm0 = performance.now();
    const largeRouter = createRouter({ db, now: () => new Date(DEFAULT_NOW) });
    largeRouter.warmUp();
    await largeRouter.ready();
    const warmMs = Math.round(performance.now() - warm0);
    log(`router bench: start-up warming at ${n} workflows took ${warmMs} ms (background; ranking is lexical meanwhile)`);
    const loadBefore = loadavg().map((x) => Math.round(x * 100) / 100);
    const large = await evaluate(largeRouter, db, org.org_id, cases);
    log(`router bench: at ${n} workflows p50 ${large.latency.p50_ms} ms, p95 ${large.latency.p95_ms} ms`);
    return {
      cases: cases.length,
      demo_catalog: brief(demo),
      demo_catalog_heldout: brief(heldout),
      workflows: n,
      embeddings: dense,
      warm_up_ms: warmMs,
      at_workflows: brief(large),
      load_average: { before: loadBefore, after: loadavg().map((x) => Math.round(x * 100) / 100) },
      targets: TARGETS,
      met: {
        top1: demo.top1 >= TARGETS.top1,
        abstention: demo.abstention >= TARGETS.abstention,
        fill_exact: demo.fill_exact >= TARGETS.fill_exact,
        actions_chosen_out_of_scope: demo.actions_chosen_out_of_scope === 0 && large.actions_chosen_out_of_scope === 0,
        p95_ms: large.latency.p95_ms <= TARGETS.p95_ms,
      },
    };
  } finally {
    await db.end();
    await admin(`DROP DATABASE IF EXISTS ${dbName} WITH (FORCE)`).catch((err) => log(`router bench: could not drop ${dbName}: ${(err as Error).message}`));
    await stopPg?.();
    if (tmp) await rm(tmp, { recursive: true, force: true });
  }
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
