// The prompt router's typo vocabulary (migrations/1700000002900_router_keywords_listed.sql) on the
// real stack: a prompt word is taken as typed when it is a word of a listed (public, active)
// workflow or of the caller's own private one, else expanded to its near words. Another
// organization's private workflow never changes that, so a caller cannot test, one free 422 at a
// time, whether some private workflow uses a word.
import { afterAll, describe, expect, it } from 'vitest';
import { publishApi } from '../shared/db/catalog.ts';
import type { OperationDefinition } from '../shared/catalog/types.ts';
import { syntheticApi, syntheticOp } from './catalog-fixture.ts';
import { closeDb, db, newOrg, query } from './helpers/stack.ts';

afterAll(closeDb);

const tag = () => Math.random().toString(36).replace(/[^a-z]/g, '').slice(0, 6).padEnd(6, 'q');
/** A word nobody else uses, and its one-letter variant (near enough to be a typo of it). */
const pair = () => {
  const base = `zk${tag()}payroll`;
  return { word: `${base}hub`, variant: `${base}hux` };
};

/** An operation whose enum holds `value`, with a required day no prompt here gives (so nothing runs). */
const enumOp = (name: string, value: string): OperationDefinition => {
  const op = syntheticOp(name);
  op.versions[0]!.input_schema = {
    type: 'object',
    additionalProperties: false,
    required: ['team', 'day'],
    properties: { team: { type: 'string', enum: [value] }, day: { type: 'string', format: 'date', description: 'Day, YYYY-MM-DD' } },
  };
  return op;
};

/** What a caller sees of a prompt: status, code and the candidates listed. */
async function probe(key: string, body: Record<string, unknown>) {
  const res = await query(key, body);
  return { status: res.status, code: res.body.error?.code ?? null, candidates: res.body.error?.details?.candidates ?? null, receipt: res.body.error?.receipt ?? null, text: res.text };
}
/**
 * What a probe tells: its status, code, and which operations it lists or chose. (Not the scores: the
 * dense cosine joins them once the operation's vector is computed, whatever else happened.)
 */
const seen = (p: Awaited<ReturnType<typeof probe>>) => ({
  status: p.status,
  code: p.code,
  candidates: p.candidates?.map((c: { api: string; operation: string }) => `${c.api}.${c.operation}`) ?? null,
  receipt: p.receipt && `${p.receipt.api}.${p.receipt.operation}`,
});
/** The APIs a prompt reached: those listed as candidates, or the one it chose (402 on an empty balance). */
const apisOf = (p: Awaited<ReturnType<typeof probe>>) => [...(p.candidates ?? []), ...(p.receipt ? [p.receipt] : [])].map((c: { api: string }) => c.api);
const vocabulary = async (word: string) => (await db().query('SELECT 1 FROM router_keywords WHERE word = $1', [word])).rowCount;

describe("another organization's private words never change how a prompt's words expand", () => {
  it("a probe gets the same answer before and after another organization publishes a private workflow holding the probed word", async () => {
    const [a, b] = await Promise.all([newOrg(0, 'Probe A'), newOrg(0, 'Probe B')]);
    const { word, variant } = pair();
    const probeHandle = `@probe-${tag()}`;
    await publishApi(db(), syntheticApi(probeHandle, { operations: [enumOp('pay_run', variant)] }), { ownerOrgId: a.org_id });

    // A typo of A's own private word expands to it: A's operation is a candidate.
    const before = await probe(a.api_key, { prompt: word, api: probeHandle });
    expect(before.status, before.text).toBe(422);
    expect(apisOf(before), before.text).toContain(probeHandle);

    // B's private workflow uses the probed word in a label and an enum.
    await publishApi(
      db(),
      syntheticApi(`@secret-${tag()}`, { operations: [enumOp('secret_pay', word), syntheticOp('secret_label', { label: `${word} report` })] }),
      { ownerOrgId: b.org_id },
    );
    const after = await probe(a.api_key, { prompt: word, api: probeHandle });
    expect(seen(after), after.text).toEqual(seen(before));
    expect(await vocabulary(word)).toBe(0);
  });

  it("a listed workflow's word is taken as typed (no expansion); a typo of a listed word still expands to it", async () => {
    const a = await newOrg(0, 'Probe A');
    const { word, variant } = pair();
    const probeHandle = `@probe-${tag()}`;
    await publishApi(db(), syntheticApi(probeHandle, { operations: [enumOp('pay_run', variant)] }), { ownerOrgId: a.org_id });
    const publicHandle = `@kwpublic-${tag()}`;
    await publishApi(db(), syntheticApi(publicHandle, { operations: [syntheticOp('pay_report', { label: `${word} report` })] }));
    expect(await vocabulary(word)).toBe(1);

    // The public word is a word: not expanded to A's variant, so nothing in A's scope matches.
    const typed = await probe(a.api_key, { prompt: word, api: probeHandle });
    expect(seen(typed), typed.text).toEqual({ status: 422, code: 'prompt_unroutable', candidates: [], receipt: null });

    // A typo of the public word reaches the public operation (scoped to it).
    const typo = word.replace(/hub$/, 'hib');
    const expanded = await probe(a.api_key, { prompt: typo, api: publicHandle });
    expect(apisOf(expanded), expanded.text).toContain(publicHandle);
  });
});

describe('the vocabulary follows listing', () => {
  it('an API made public adds its words; made private or removed, words no listed workflow holds leave', async () => {
    const owner = await newOrg(0, 'Owner');
    const { word } = pair();
    const shared = `${word.slice(0, -3)}shared`;
    const handle = `@kwmove-${tag()}`;
    const { api_id } = await publishApi(db(), syntheticApi(handle, { operations: [syntheticOp('move_it', { label: `${word} ${shared}` })] }), { ownerOrgId: owner.org_id });
    const other = `@kwother-${tag()}`;
    await publishApi(db(), syntheticApi(other, { operations: [syntheticOp('keep_it', { label: shared })] }));
    expect([await vocabulary(word), await vocabulary(shared)]).toEqual([0, 1]);

    await db().query(`UPDATE apis SET visibility = 'public' WHERE id = $1`, [api_id]);
    expect([await vocabulary(word), await vocabulary(shared)]).toEqual([1, 1]);
    await db().query(`UPDATE apis SET status = 'inactive' WHERE id = $1`, [api_id]);
    expect([await vocabulary(word), await vocabulary(shared)]).toEqual([0, 1]);
    await db().query(`UPDATE apis SET status = 'active' WHERE id = $1`, [api_id]);
    expect(await vocabulary(word)).toBe(1);
    // A relabelled operation drops the word; another listed one still holds `shared`.
    await db().query(`UPDATE operations SET label = $2 WHERE api_id = $1`, [api_id, shared]);
    expect([await vocabulary(word), await vocabulary(shared)]).toEqual([0, 1]);
    await db().query(`UPDATE operations SET label = $2 WHERE api_id = $1`, [api_id, word]);
    expect(await vocabulary(word)).toBe(1);
    await db().query('DELETE FROM operations WHERE api_id = $1', [api_id]);
    expect(await vocabulary(word)).toBe(0);
    await db().query(`DELETE FROM apis WHERE handle = $1`, [other]);
    expect(await vocabulary(shared)).toBe(0);
  });
});
