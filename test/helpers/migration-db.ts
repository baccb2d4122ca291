// A scratch database migrated up to just before one migration, for tests of what that migration does
// to rows earlier releases wrote: fill it through `query`, then `migrateNext()` applies the migration.
// Dropped by `dropAll()` (afterAll).
import fs from 'node:fs';
import path from 'node:path';
import { runner } from 'node-pg-migrate';
import pg from 'pg';
import { expect } from 'vitest';
import { createPool, type Db } from '../../shared/db/pool.ts';
import { ROOT } from './processes.ts';
import { db, stack } from './stack.ts';

const DIR = path.join(ROOT, 'shared/db/migrations');
const NAMES = fs.readdirSync(DIR).filter((f) => f.endsWith('.sql')).map((f) => f.replace(/\.sql$/, '')).sort();

const created: string[] = [];
const pools: Db[] = [];

/**
 * On a connection of our own, closed before this returns: the runner's own client is ended without
 * waiting, so `dropAll` right after a migration could terminate it (DROP … WITH (FORCE)) while it
 * closed, and its FATAL reached a client with no error listener (an uncaught exception).
 */
async function migrate(databaseUrl: string, count: number, direction: 'up' | 'down' = 'up') {
  const client = new pg.Client({ connectionString: databaseUrl });
  client.on('error', () => {});
  await client.connect();
  try {
    await runner({ dbClient: client, dir: DIR, direction, migrationsTable: 'pgmigrations', checkOrder: true, count, log: () => {} });
  } finally {
    await client.end();
  }
}

export async function databaseBefore(target: string) {
  const name = `wqs_mig_${Date.now()}_${Math.random().toString(36).slice(2, 8)}`;
  await db().query(`CREATE DATABASE ${name}`);
  created.push(name);
  const url = new URL(stack().databaseUrl);
  url.pathname = `/${name}`;
  const before = NAMES.indexOf(target);
  expect(before, `${target} is a migration`).toBeGreaterThan(0);
  await migrate(url.toString(), before);
  const pool = createPool(url.toString(), 1);
  pools.push(pool);
  return {
    query: pool.query.bind(pool),
    /** Applies `target` (and nothing after it); checks that it was the one applied. */
    async migrateNext() {
      await migrate(url.toString(), 1);
      expect((await pool.query('SELECT name FROM pgmigrations ORDER BY id DESC LIMIT 1')).rows[0].name).toBe(target);
    },
    /** Runs `target`'s Down migration (after `migrateNext`); checks that it was the one undone. */
    async migrateBack() {
      await migrate(url.toString(), 1, 'down');
      expect((await pool.query('SELECT 1 FROM pgmigrations WHERE name = $1', [target])).rowCount).toBe(0);
    },
  };
}

export async function dropAll() {
  for (const p of pools.splice(0)) await p.end();
  for (const name of created.splice(0)) await db().query(`DROP DATABASE IF EXISTS ${name} WITH (FORCE)`);
}
