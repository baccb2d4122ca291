// Every verified example of every read-only demo operation runs through the full service
// (API → Temporal → worker → site) and returns exactly its documented output.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { demoCatalog } from '../shared/catalog/demo/index.ts';
import { closeDb, demo, newOrg, query } from './helpers/stack.ts';

let key: string;
beforeAll(async () => {
  key = (await newOrg(10_000)).api_key;
  await demo('/__demo/reset');
});
afterAll(closeDb);

const cases = demoCatalog.flatMap((api) =>
  api.operations
    .filter((op) => !op.performs_actions && (op.access ?? []).length === 0)
    .flatMap((op) =>
      op.versions.flatMap((v) =>
        v.examples.map((ex, i) => ({ name: `${api.handle} ${op.name} v${v.version} #${i + 1} ${ex.title ?? ''}`, api: api.handle, op: op.name, version: v.version, ex })),
      ),
    ),
);

describe('verified examples', () => {
  it('the demo catalog has at least two APIs with two examples per operation', () => {
    expect(demoCatalog.length).toBeGreaterThanOrEqual(2);
    for (const api of demoCatalog) for (const op of api.operations) for (const v of op.versions) expect(v.examples.length, `${api.handle} ${op.name} v${v.version}`).toBeGreaterThanOrEqual(2);
    // One operation has two contract versions with the default on the older one.
    const versioned = demoCatalog.flatMap((a) => a.operations).filter((o) => o.versions.length >= 2);
    expect(versioned.some((o) => o.default_version === Math.min(...o.versions.map((v) => v.version)))).toBe(true);
  });

  for (const c of cases) {
    it(c.name, async () => {
      const res = await query(key, { api: c.api, operation: c.op, version: c.version, input: c.ex.input });
      expect(res.status, res.text).toBe(200);
      expect(res.body.data.output).toEqual(c.ex.output);
    });
  }
});
