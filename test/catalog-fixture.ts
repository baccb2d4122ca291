// One embedded PostgreSQL per catalog test file, the API built in-process (app.inject), the
// demo catalog plus synthetic workflows. The shared stack's database is left untouched.
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import type { FastifyInstance } from 'fastify';
import { buildApp } from '../apps/api/app.ts';
import { loadConfig } from '../shared/config.ts';
import { publishApi } from '../shared/db/catalog.ts';
import { migrate } from '../shared/db/migrate.ts';
import { createOrg, type CreatedOrg } from '../shared/db/orgs.ts';
import { createPool, type Db } from '../shared/db/pool.ts';
import { foldAllRuns } from './helpers/run-counts.ts';
import { startEmbeddedPostgres, type EmbeddedPostgres } from '../shared/infra/embedded-postgres.ts';
import type { ApiDefinition, OperationDefinition } from '../shared/catalog/types.ts';

export const BASE = 'http://localhost';

export interface CatalogFixture {
  app: FastifyInstance;
  db: Db;
  pg: EmbeddedPostgres;
  orgA: CreatedOrg;
  orgB: CreatedOrg;
  close(): Promise<void>;
}

export function syntheticOp(name: string, extra: Partial<OperationDefinition> = {}): OperationDefinition {
  return {
    name,
    label: name.replace(/_/g, ' '),
    description: `Does ${name.replace(/_/g, ' ')}.`,
    cost_credits: 1,
    default_version: 1,
    versions: [
      {
        version: 1,
        input_schema: { type: 'object', additionalProperties: false, properties: { q: { type: 'string' } } },
        output_schema: {
          type: 'object',
          properties: { items: { type: 'array', items: { type: 'object', properties: { title: { type: 'string' }, price: { type: 'number' } } } }, total: { type: 'integer' } },
        },
        examples: [{ title: 'one', input: { q: 'x' }, output: { items: [], total: 0 } }],
        recipe: { engine: 'http', hosts: ['x.example.test'], steps: [], output: {} },
      },
    ],
    ...extra,
  };
}

export function syntheticApi(handle: string, extra: Partial<ApiDefinition> = {}): ApiDefinition {
  const word = handle.slice(1);
  return {
    handle,
    name: `${word} service`,
    description: `Synthetic workflow ${word}.`,
    category: 'other',
    website_url: `https://${word}.example.test`,
    sites: [{ name: word, host: `${word}.example.test` }],
    operations: [syntheticOp('lookup')],
    ...extra,
  };
}

export async function startCatalogFixture(defs: ApiDefinition[], opts: { demo?: boolean } = {}): Promise<CatalogFixture> {
  const dir = await mkdtemp(path.join(tmpdir(), 'wqs-catalog-'));
  const pg = await startEmbeddedPostgres({ dataDir: dir });
  await migrate(pg.databaseUrl);
  const db = createPool(pg.databaseUrl, 8);
  if (opts.demo !== false) {
    const { demoCatalog } = await import('../shared/catalog/demo/index.ts');
    for (const d of demoCatalog) await publishApi(db, d);
  }
  for (const d of defs) await publishApi(db, d);
  const orgA = await createOrg(db, 'Org A', 10);
  const orgB = await createOrg(db, 'Org B', 10);
  const app = await buildApp({
    config: loadConfig({ LOG_LEVEL: 'silent' } as NodeJS.ProcessEnv),
    db,
    temporal: async () => {
      throw new Error('not used');
    },
    temporalHealthy: async () => false,
    baseUrl: () => BASE,
  });
  await app.ready();
  return {
    app,
    db,
    pg,
    orgA,
    orgB,
    async close() {
      await app.close();
      await db.end();
      await pg.stop();
      await rm(dir, { recursive: true, force: true });
    },
  };
}

/** Record `n` succeeded runs of an API's first operation, completed `agoMs` in the past. */
export async function completeRuns(db: Db, orgId: string, handle: string, n: number, agoMs = 60_000) {
  const op = await db.query(
    `SELECT o.id FROM operations o JOIN apis a ON a.id = o.api_id WHERE a.handle = $1 AND a.visibility = 'public' ORDER BY o.id LIMIT 1`,
    [handle],
  );
  const opId = op.rows[0].id;
  const t0 = (await db.query('SELECT clock_timestamp() AS t')).rows[0].t as Date;
  for (let i = 0; i < n; i++) {
    const id = `req_${Math.random().toString(36).slice(2)}${Math.random().toString(36).slice(2)}`.slice(0, 30);
    await db.query(`INSERT INTO requests (id, org_id, workflow_id, api, operation_id, status) VALUES ($1, $2, $1, $3, $4, 'processing')`, [id, orgId, handle, opId]);
    await db.query(`UPDATE requests SET status = 'succeeded', completed_at = now() WHERE id = $1`, [id]);
  }
  await foldAllRuns(db);
  if (agoMs > 0) {
    // Moved back whole: the buckets folded since t0 go to the buckets agoMs earlier.
    const moved = await db.query(`DELETE FROM catalog_run_buckets WHERE at >= catalog_event_bucket($1) RETURNING api_id, at, n`, [t0]);
    for (const r of moved.rows) {
      await db.query(
        `INSERT INTO catalog_run_buckets AS b (api_id, at, n) VALUES ($1, catalog_event_bucket($2::timestamptz - make_interval(secs => $3::float8 / 1000)), $4)
         ON CONFLICT (api_id, at) DO UPDATE SET n = b.n + excluded.n`,
        [r.api_id, r.at, agoMs, r.n],
      );
    }
  }
}
