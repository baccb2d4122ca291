// Migrations as a deploy step (deploy/README.md): `npm run migrate` applies them once however many
// runners start together, and an API started with MIGRATE_ON_START=false leaves the schema alone.
// Each test gets a fresh database of its own on the stack's PostgreSQL.
import { execFile } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { promisify } from 'node:util';
import { afterAll, describe, expect, it } from 'vitest';
import { createPool } from '../shared/db/pool.ts';
import { freePort } from '../shared/infra/free-port.ts';
import { ROOT, startApiProcess, type ServiceProcess } from './helpers/processes.ts';
import { call, closeDb, db, ownPair } from './helpers/stack.ts';

const run = promisify(execFile);
const MIGRATIONS = fs
  .readdirSync(path.join(ROOT, 'shared/db/migrations'))
  .filter((f) => f.endsWith('.sql'))
  .map((f) => f.replace(/\.sql$/, ''))
  .sort();

const created: string[] = [];
const apis: ServiceProcess[] = [];

/** A new, empty database on the stack's server; its URL. */
async function freshDatabase(): Promise<string> {
  const name = `wqs_deploy_${Date.now()}_${Math.random().toString(36).slice(2, 8)}`;
  await db().query(`CREATE DATABASE ${name}`);
  created.push(name);
  const url = new URL(ownPair('deploy').databaseUrl);
  url.pathname = `/${name}`;
  return url.toString();
}

async function tablesOf(databaseUrl: string): Promise<{ migrations: string[] | null; organizations: boolean }> {
  const pool = createPool(databaseUrl, 1);
  try {
    const { rows } = await pool.query(
      "SELECT to_regclass('public.pgmigrations') IS NOT NULL AS m, to_regclass('public.organizations') IS NOT NULL AS o",
    );
    const migrations = rows[0].m ? (await pool.query('SELECT name FROM pgmigrations ORDER BY name')).rows.map((r) => String(r.name)) : null;
    return { migrations, organizations: Boolean(rows[0].o) };
  } finally {
    await pool.end();
  }
}

/** `npm run migrate` as the deploy runs it: exit code and output. */
async function migrateCommand(env: Record<string, string | undefined>) {
  const childEnv: NodeJS.ProcessEnv = { ...process.env, ...env };
  for (const [k, v] of Object.entries(env)) if (v === undefined) delete childEnv[k];
  try {
    const { stdout, stderr } = await run(process.execPath, ['--import', 'tsx', 'apps/migrate/main.ts'], { cwd: ROOT, env: childEnv, timeout: 120_000 });
    return { code: 0, stdout, stderr };
  } catch (err) {
    const e = err as { code?: number; stdout?: string; stderr?: string };
    return { code: e.code ?? -1, stdout: e.stdout ?? '', stderr: e.stderr ?? '' };
  }
}

afterAll(async () => {
  for (const api of apis) await api.kill('SIGKILL');
  for (const name of created) await db().query(`DROP DATABASE IF EXISTS ${name} WITH (FORCE)`);
  await closeDb();
});

describe('migrations as a deploy step', () => {
  it('three runners started together apply every migration exactly once, and a rerun changes nothing', async () => {
    const url = await freshDatabase();
    const results = await Promise.all([1, 2, 3].map(() => migrateCommand({ DATABASE_URL: url })));
    for (const r of results) {
      expect(r.code, r.stderr).toBe(0);
      expect(JSON.parse(r.stdout.trim().split('\n').at(-1)!)).toMatchObject({ event: 'migrations_applied' });
    }
    expect(await tablesOf(url)).toEqual({ migrations: MIGRATIONS, organizations: true });

    const again = await migrateCommand({ DATABASE_URL: url });
    expect(again.code, again.stderr).toBe(0);
    expect(await tablesOf(url)).toEqual({ migrations: MIGRATIONS, organizations: true });
  }, 240_000);

  it('an API with MIGRATE_ON_START=false starts and serves without touching the schema', async () => {
    const url = await freshDatabase();
    const api = await startApiProcess({ ...ownPair('deploy-nomigrate'), databaseUrl: url, env: { MIGRATE_ON_START: 'false' } });
    apis.push(api);
    expect((await call('GET', '/livez', { baseUrl: String(api.started.url) })).status).toBe(200);
    expect(await tablesOf(url)).toEqual({ migrations: null, organizations: false });
  }, 180_000);

  it('an API with the default setting migrates at start', async () => {
    const url = await freshDatabase();
    const api = await startApiProcess({ ...ownPair('deploy-migrate'), databaseUrl: url });
    apis.push(api);
    expect(await tablesOf(url)).toEqual({ migrations: MIGRATIONS, organizations: true });
  }, 180_000);

  it('fails with a plain message, and no credentials, when the database is missing or unreachable', async () => {
    const none = await migrateCommand({ DATABASE_URL: undefined });
    expect(none.code).toBe(1);
    expect(none.stderr).toContain('npm run migrate needs DATABASE_URL');

    const port = await freePort();
    const down = await migrateCommand({ DATABASE_URL: `postgres://deployer:hunter2-secret@127.0.0.1:${port}/wqs` });
    expect(down.code).toBe(1);
    const line = JSON.parse(down.stderr.trim().split('\n').at(-1)!);
    expect(line.event).toBe('migrations_failed');
    expect(down.stderr + down.stdout).not.toContain('hunter2-secret');
  }, 120_000);
});
