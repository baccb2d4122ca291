// Migration 1700000002900_router_keywords_listed on a database holding what earlier releases wrote:
// the router's typo vocabulary loses the words only private (or inactive) workflows held, keeps
// those of listed workflows, and the routing documents themselves are untouched.
import { afterAll, describe, expect, it } from 'vitest';
import { databaseBefore, dropAll } from './helpers/migration-db.ts';
import { closeDb } from './helpers/stack.ts';

const TARGET = '1700000002900_router_keywords_listed';

afterAll(async () => {
  await dropAll();
  await closeDb();
});

describe(TARGET, () => {
  it("removes private workflows' words from router_keywords, keeps listed ones', leaves router_documents as they were", async () => {
    const { query: q, migrateNext } = await databaseBefore(TARGET);

    await q(`INSERT INTO organizations (id, name) VALUES ('org_mig', 'Migrating')`);
    const api = async (handle: string, visibility: 'public' | 'private', status = 'active') =>
      Number((await q(`INSERT INTO apis (handle, visibility, owner_org_id, name, category, status) VALUES ($1, $2, 'org_mig', 'x', 'other', $3) RETURNING id`, [handle, visibility, status])).rows[0].id);
    const operation = async (apiId: number, label: string, enumValue: string) => {
      const id = Number((await q(`INSERT INTO operations (api_id, name, label, cost_credits, performs_actions, default_version, access) VALUES ($1, 'op', $2, 1, false, 1, '[]') RETURNING id`, [apiId, label])).rows[0].id);
      await q(`INSERT INTO operation_versions (operation_id, version, input_schema, output_schema, recipe) VALUES ($1, 1, $2, '{}', '{}')`, [
        id,
        JSON.stringify({ type: 'object', properties: { team: { type: 'string', enum: [enumValue] } } }),
      ]);
      return id;
    };
    await operation(await api('@listed', 'public'), 'publicword sharedword', 'publicenumvalue');
    await operation(await api('@hidden', 'private'), 'privateword sharedword', 'secretenumvalue');
    await operation(await api('@retired', 'public', 'inactive'), 'retiredword', 'retiredenumvalue');
    const has = async (word: string) => (await q('SELECT 1 FROM router_keywords WHERE word = $1', [word])).rowCount;
    const words = ['publicword', 'sharedword', 'publicenumvalue', 'privateword', 'secretenumvalue', 'hidden', 'retiredword', 'listed'];
    // What earlier releases wrote: every workflow's words.
    expect(await Promise.all(words.map(has))).toEqual([1, 1, 1, 1, 1, 1, 1, 1]);
    const documents = (await q('SELECT operation_id, words FROM router_documents ORDER BY operation_id')).rows;

    await migrateNext();
    expect(await Promise.all(words.map(has))).toEqual([1, 1, 1, 0, 0, 0, 0, 1]);
    expect((await q('SELECT operation_id, words FROM router_documents ORDER BY operation_id')).rows).toEqual(documents);
    // A private workflow published now adds nothing.
    await operation(await api('@later', 'private'), 'laterword', 'laterenumvalue');
    expect(await Promise.all(['laterword', 'laterenumvalue'].map(has))).toEqual([0, 0]);
  });

  it('Down gives back the earlier vocabulary (every workflow\'s words) and the earlier refresh', async () => {
    const { query: q, migrateNext, migrateBack } = await databaseBefore(TARGET);
    await q(`INSERT INTO organizations (id, name) VALUES ('org_mig', 'Migrating')`);
    const api = async (handle: string, visibility: 'public' | 'private') =>
      Number((await q(`INSERT INTO apis (handle, visibility, owner_org_id, name, category) VALUES ($1, $2, 'org_mig', 'x', 'other') RETURNING id`, [handle, visibility])).rows[0].id);
    const operation = (apiId: number, label: string) =>
      q(`INSERT INTO operations (api_id, name, label, cost_credits, performs_actions, default_version, access) VALUES ($1, 'op', $2, 1, false, 1, '[]')`, [apiId, label]);
    const has = async (word: string) => (await q('SELECT 1 FROM router_keywords WHERE word = $1', [word])).rowCount;
    await operation(await api('@hidden', 'private'), 'privateword');
    await migrateNext();
    expect(await has('privateword')).toBe(0);
    await migrateBack();
    expect(await has('privateword')).toBe(1);
    await operation(await api('@later', 'private'), 'laterword');
    expect(await has('laterword')).toBe(1);
    expect((await q(`SELECT count(*)::int AS n FROM pg_proc WHERE proname LIKE 'router_keywords_%'`)).rows[0].n).toBe(0);
    // And up again.
    await migrateNext();
    expect(await Promise.all(['privateword', 'laterword'].map(has))).toEqual([0, 0]);
  });
});
