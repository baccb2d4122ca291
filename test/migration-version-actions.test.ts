// Migration 1700000002600_version_actions_access on a database holding what earlier releases wrote:
// each operation version gets the performs_actions and access it was published with (a builder
// version from its stored definition, a catalog version from its operation), so a query pinned to
// an acting version keeps running as an action once a read-only version became the default.
import { afterAll, describe, expect, it } from 'vitest';
import { workflowTemplate } from '../shared/builder/index.ts';
import { databaseBefore, dropAll } from './helpers/migration-db.ts';
import { closeDb } from './helpers/stack.ts';

const TARGET = '1700000002600_version_actions_access';

afterAll(async () => {
  await dropAll();
  await closeDb();
});

describe(TARGET, () => {
  it('gives each version the actions and access it was published with', async () => {
    const { query: q, migrateNext } = await databaseBefore(TARGET);

    await q(`INSERT INTO organizations (id, name) VALUES ('org_mig', 'Migrating')`);
    const api = async (handle: string, visibility: 'public' | 'private') =>
      Number((await q(`INSERT INTO apis (handle, visibility, owner_org_id, name, category) VALUES ($1, $2, $3, 'x', 'commerce') RETURNING id`, [handle, visibility, 'org_mig'])).rows[0].id);
    const operation = async (apiId: number, performs: boolean, access: unknown[], defaultVersion: number) =>
      Number((await q(`INSERT INTO operations (api_id, name, label, cost_credits, performs_actions, default_version, access) VALUES ($1, 'book_price', 'x', 1, $2, $3, $4) RETURNING id`, [apiId, performs, defaultVersion, JSON.stringify(access)])).rows[0].id);
    const version = (opId: number, v: number, recipe: unknown) =>
      q(`INSERT INTO operation_versions (operation_id, version, input_schema, output_schema, recipe) VALUES ($1, $2, '{}', '{}', $3)`, [opId, v, JSON.stringify(recipe)]);

    // A builder workflow: version 1 acted and needed a key; version 2 (the default) does neither,
    // and the operation row says what version 2 said.
    const key = { kind: 'access_key', name: 'SHOP_KEY', site: 'books.example.test' };
    const acting = workflowTemplate('@built');
    (acting.operations[0]!.recipe.steps as unknown[]).unshift({ type: 'request', method: 'POST', url: 'http://books.example.test/basket', action: true });
    acting.operations[0]!.access = [key as never];
    const reading = workflowTemplate('@built');
    const built = await api('@built', 'private');
    const builtOp = await operation(built, false, [], 2);
    for (const [v, def] of [[1, acting], [2, reading]] as const) {
      await version(builtOp, v, def.operations[0]!.recipe);
      await q(`INSERT INTO builder_versions (api_id, version, org_id, definition, definition_hash, visibility, charged_credits) VALUES ($1, $2, 'org_mig', $3, 'h', 'private', 0)`, [built, v, JSON.stringify(def)]);
    }
    // A catalog workflow: the operation's flag and access hold for each version.
    const catalog = await api('@catalog', 'public');
    const catalogOp = await operation(catalog, true, [key], 1);
    await version(catalogOp, 1, reading.operations[0]!.recipe);

    await migrateNext();
    const rows = await q(`SELECT operation_id, version, performs_actions, access FROM operation_versions ORDER BY operation_id, version`);
    expect(rows.rows.map((r) => [Number(r.operation_id), r.version, r.performs_actions, r.access])).toEqual([
      [builtOp, 1, true, [key]],
      [builtOp, 2, false, []],
      [catalogOp, 1, true, [key]],
    ]);
  });
});
