// The worker's kept operation versions (activities/version-cache.ts): bounded by entries and by
// bytes, least recently used first out, and never one version's definition for another's.
import { afterAll, describe, expect, it } from 'vitest';
import { UnusableVersion, createVersionLoader } from '../activities/version-cache.ts';
import { Lru } from '../shared/lru.ts';
import { parseRecipe } from '../shared/recipes/schema.ts';
import { closeDb, db } from './helpers/stack.ts';

afterAll(closeDb);

describe('Lru', () => {
  it('keeps at most maxEntries, forgetting the least recently used first', () => {
    const lru = new Lru<string, number>(3);
    for (const k of ['a', 'b', 'c']) lru.set(k, k.charCodeAt(0));
    expect(lru.get('a')).toBe(97); // a is now the most recent: b goes first
    lru.set('d', 100);
    expect(lru.size).toBe(3);
    expect(lru.get('b')).toBeUndefined();
    expect([lru.get('a'), lru.get('c'), lru.get('d')]).toEqual([97, 99, 100]);
    for (let i = 0; i < 1_000; i++) lru.set(`k${i}`, i);
    expect(lru.size).toBe(3);
    expect([lru.get('k997'), lru.get('k998'), lru.get('k999'), lru.get('a')]).toEqual([997, 998, 999, undefined]);
  });

  it('keeps at most maxWeight, and nothing heavier than the bound alone', () => {
    const lru = new Lru<string, string>(100, 10, (v) => v.length);
    lru.set('a', 'xxxx');
    lru.set('b', 'xxxx');
    expect(lru.weight).toBe(8);
    lru.set('c', 'xxxx'); // 12 > 10: a goes
    expect([lru.size, lru.weight, lru.get('a')]).toEqual([2, 8, undefined]);
    lru.set('b', 'x'); // replacing a value replaces its weight
    expect([lru.size, lru.weight]).toEqual([2, 5]);
    lru.set('huge', 'x'.repeat(11));
    expect([lru.get('huge'), lru.size, lru.weight]).toEqual([undefined, 0, 0]);
  });
});

describe('createVersionLoader', () => {
  async function storedVersions() {
    const r = await db().query<{ operation_id: string; version: number; recipe: unknown; output_schema: unknown }>(
      'SELECT operation_id, version, recipe, output_schema FROM operation_versions ORDER BY operation_id, version LIMIT 12',
    );
    // Weighed as the cache weighs them: the bytes of their JSON.
    const bytes = (v: unknown) => Buffer.byteLength(JSON.stringify(v));
    return r.rows.map((row) => ({ operationId: Number(row.operation_id), version: row.version, recipe: row.recipe, bytes: bytes(row.recipe) + bytes(row.output_schema) }));
  }

  it('stays within its entry bound while serving each version its own definition', async () => {
    const rows = await storedVersions();
    expect(rows.length).toBeGreaterThan(4);
    const loader = createVersionLoader(db(), { maxEntries: 3 });
    // Twice round, so later loads come both from the cache and from the database after eviction.
    for (const row of [...rows, ...rows.slice().reverse(), ...rows]) {
      const v = await loader.load(row.operationId, row.version);
      expect([v.operationId, v.version]).toEqual([row.operationId, row.version]);
      expect(v.recipe).toEqual(parseRecipe(row.recipe));
      expect(loader.cache.size).toBeLessThanOrEqual(3);
    }
    expect(loader.cache.size).toBe(3);
    // A hit is the kept object itself (parsed and compiled once), not a fresh load.
    const last = rows.at(-1)!;
    expect(await loader.load(last.operationId, last.version)).toBe(await loader.load(last.operationId, last.version));
  });

  it('stays within its byte bound', async () => {
    const rows = await storedVersions();
    const total = rows.reduce((n, r) => n + r.bytes, 0);
    const maxBytes = Math.max(Math.floor(total / 2), ...rows.map((r) => r.bytes));
    const loader = createVersionLoader(db(), { maxEntries: 1_000, maxBytes });
    for (const row of rows) await loader.load(row.operationId, row.version);
    expect(loader.cache.weight).toBeLessThanOrEqual(maxBytes);
    expect(loader.cache.size).toBeLessThan(rows.length);
    expect(loader.cache.size).toBeGreaterThan(0);
  });

  it('refuses a version that does not exist, keeping nothing', async () => {
    const loader = createVersionLoader(db());
    await expect(loader.load(2_000_000_000, 1)).rejects.toBeInstanceOf(UnusableVersion);
    expect(loader.cache.size).toBe(0);
  });
});
