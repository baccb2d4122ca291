// JSON Schemas organizations write are compiled in processes every organization shares (the API's
// definition checks and input validation, the worker's test runs). A schema's `$id` must not stay
// registered there: ajv refuses a second schema with an id it holds, even the same schema compiled
// again, so one validation of a definition with `$id` refused that definition ever after (and every
// other organization's schema with that id) until the process restarted.
import { randomBytes } from 'node:crypto';
import { Client, Connection } from '@temporalio/client';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { definitionIssues, publish, testRun, workflowTemplate, type BuilderDefinition } from '../shared/builder/index.ts';
import { closeDb, dataConverter, db, newOrg, query, stack } from './helpers/stack.ts';

let connection: Connection;
let temporal: Client;
const deps = () => ({ db: db(), temporal, taskQueue: stack().taskQueue, browserTaskQueue: `${stack().taskQueue}-browser` });

beforeAll(async () => {
  connection = await Connection.connect({ address: stack().temporalAddress });
  temporal = new Client({ connection, dataConverter: await dataConverter() });
});
afterAll(async () => {
  await connection?.close();
  await closeDb();
});

const INPUT_ID = `https://schemas.example.com/${randomBytes(4).toString('hex')}/book-input`;
const OUTPUT_ID = `https://schemas.example.com/${randomBytes(4).toString('hex')}/book-price`;

function withIds(handle: string, inputDescription?: string): BuilderDefinition {
  const def = workflowTemplate(handle);
  const op = def.operations[0]!;
  op.input_schema = { $id: INPUT_ID, ...op.input_schema, ...(inputDescription ? { description: inputDescription } : {}) };
  op.output_schema = { $id: OUTPUT_ID, ...op.output_schema };
  return def;
}

describe('schemas with $id', () => {
  it('a definition is valid however often it is checked, and another organization may use the same $id', () => {
    expect(definitionIssues(withIds('@ids-a'))).toEqual([]);
    expect(definitionIssues(withIds('@ids-a'))).toEqual([]);
    expect(definitionIssues(withIds('@ids-b', 'another organization, another schema, the same $id'))).toEqual([]);
  });

  it('test-run twice, published, queried; a second version keeping the $id is queried too', async () => {
    const org = await newOrg(1000);
    const handle = `@ids-${randomBytes(4).toString('hex')}`;
    const v1 = withIds(handle);
    for (let i = 0; i < 2; i++) {
      const run = await testRun(deps(), org.org_id, v1);
      expect(run.results.map((r) => ({ passed: r.passed, error: r.error })), `test run ${i + 1}`).toEqual([{ passed: true, error: null }]);
    }
    expect(await publish(db(), org.org_id, v1)).toMatchObject({ api: handle, version: 1 });
    const input = v1.operations[0]!.examples[0]!.input;
    const first = await query(org.api_key, { api: handle, operation: 'book_price', input });
    expect(first.status, first.text).toBe(200);

    // Version 2: the input schema changes, its $id stays.
    const v2 = withIds(handle, 'version 2');
    expect((await testRun(deps(), org.org_id, v2)).passed).toBe(true);
    expect(await publish(db(), org.org_id, v2)).toMatchObject({ version: 2 });
    const second = await query(org.api_key, { api: handle, operation: 'book_price', version: 2, input });
    expect(second.status, second.text).toBe(200);
    // Version 3: the output schema changes, its $id stays; every version answers, in any order, on
    // the worker that already compiled the others' output schemas.
    const v3 = withIds(handle, 'version 3');
    v3.operations[0]!.output_schema = { ...v3.operations[0]!.output_schema, description: 'version 3 output' };
    expect((await testRun(deps(), org.org_id, v3)).passed).toBe(true);
    expect(await publish(db(), org.org_id, v3)).toMatchObject({ version: 3 });
    for (const version of [3, 1, 2, 3]) {
      const again = await query(org.api_key, { api: handle, operation: 'book_price', version, input });
      expect(again.status, `version ${version}: ${again.text}`).toBe(200);
    }
    // And input that breaks it is the caller's 422, not the service's 500.
    const bad = await query(org.api_key, { api: handle, operation: 'book_price', version: 2, input: { isbn13: 'nope' } });
    expect(bad.status, bad.text).toBe(422);
    expect(bad.body.error).toMatchObject({ code: 'invalid_provider_input', param: 'input.isbn13' });
  });
});
