// Migration 1700000002700_version_cost on a database holding what earlier releases wrote: each
// builder version gets the price its stored definition named (1 when none), so a call pinned to a
// version keeps the price it had once the owner republished at another; the platform catalog's
// versions keep reading their operation's price.
import { afterAll, describe, expect, it } from 'vitest';
import { workflowTemplate } from '../shared/builder/index.ts';
import { databaseBefore, dropAll } from './helpers/migration-db.ts';
import { closeDb } from './helpers/stack.ts';

const TARGET = '1700000002700_version_cost';

afterAll(async () => {
  await dropAll();
  await closeDb();
});

describe(TARGET, () => {
  it('gives each builder version the price it was published with; catalog versions keep their operation\'s', async () => {
    const { query: q, migrateNext } = await databaseBefore(TARGET);

    await q(`INSERT INTO organizations (id, name) VALUES ('org_mig', 'Migrating')`);
    const api = async (handle: string, visibility: 'public' | 'private') =>
      Number((await q(`INSERT INTO apis (handle, visibility, owner_org_id, name, category) VALUES ($1, $2, $3, 'x', 'commerce') RETURNING id`, [handle, visibility, 'org_mig'])).rows[0].id);
    const operation = async (apiId: number, cost: number, defaultVersion: number) =>
      Number((await q(`INSERT INTO operations (api_id, name, label, cost_credits, performs_actions, default_version, access) VALUES ($1, 'book_price', 'x', $2, false, $3, '[]') RETURNING id`, [apiId, cost, defaultVersion])).rows[0].id);
    const version = (opId: number, v: number, recipe: unknown) =>
      q(`INSERT INTO operation_versions (operation_id, version, input_schema, output_schema, recipe) VALUES ($1, $2, '{}', '{}', $3)`, [opId, v, JSON.stringify(recipe)]);

    // A shared builder workflow: version 1 named no price (1), version 2 cost 3, version 3 (the
    // default, whose price the operation row holds) 900.
    const plain = workflowTemplate('@built');
    delete plain.operations[0]!.cost_credits;
    const three = workflowTemplate('@built');
    three.operations[0]!.cost_credits = 3;
    const dear = workflowTemplate('@built');
    dear.operations[0]!.cost_credits = 900;
    const built = await api('@built', 'public');
    const builtOp = await operation(built, 900, 3);
    for (const [v, def] of [[1, plain], [2, three], [3, dear]] as const) {
      await version(builtOp, v, def.operations[0]!.recipe);
      await q(`INSERT INTO builder_versions (api_id, version, org_id, definition, definition_hash, visibility, charged_credits) VALUES ($1, $2, 'org_mig', $3, 'h', 'public', 0)`, [built, v, JSON.stringify(def)]);
    }
    // A catalog workflow: no price of its own per version.
    const catalog = await api('@catalog', 'public');
    const catalogOp = await operation(catalog, 2, 1);
    await version(catalogOp, 1, plain.operations[0]!.recipe);

    await migrateNext();
    const rows = await q(`SELECT operation_id, version, cost_credits FROM operation_versions ORDER BY operation_id, version`);
    expect(rows.rows.map((r) => [Number(r.operation_id), r.version, r.cost_credits])).toEqual([
      [builtOp, 1, 1],
      [builtOp, 2, 3],
      [builtOp, 3, 900],
      [catalogOp, 1, null],
    ]);
  });
});
