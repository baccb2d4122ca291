// A terminal envelope holding text PostgreSQL's jsonb cannot store (NUL, a lone UTF-16 surrogate):
// a workflow that echoes its input (or a site's JSON that carries one) must still settle and
// finalize once. The write used to fail on every retry: the run stayed `processing` with its
// credits reserved and its running slot taken for ever, and the reconciler left it alone (running).
import { describe, expect, it } from 'vitest';
import { publishApi } from '../shared/db/catalog.ts';
import type { ApiDefinition } from '../shared/catalog/types.ts';
import { balanceOf, db, ledgerOf, newOrg, query } from './helpers/stack.ts';
import { ownPairPool } from './helpers/own-pair.ts';

const HOST = 'weather.example.test';
// A short deadline: the wedged run of the defect answers 504 after it, instead of 175 s.
const pool = ownPairPool('unstorable', { QUERY_DEADLINE_MS: '10000' });

/** A private workflow of `orgId` that echoes `input.note` into its output, or into its not_found message. */
async function echoApi(orgId: string) {
  const handle = `@echo-${Math.random().toString(36).slice(2, 8)}`;
  const input_schema = { type: 'object', additionalProperties: false, required: ['note'], properties: { note: { type: 'string', maxLength: 100 } } };
  const request = { type: 'request', name: 'Current conditions', url: `http://${HOST}/api/v1/current`, query: { city: 'London' }, parse: 'json', save_as: 'current' };
  const def: ApiDefinition = {
    handle,
    name: 'Echo',
    description: 'Echoes a note beside the weather.',
    category: 'other',
    website_url: `http://${HOST}/`,
    sites: [{ name: 'Weather', host: HOST }],
    operations: [
      {
        name: 'echo',
        label: 'Echo',
        description: 'Echoes the note.',
        cost_credits: 1,
        default_version: 1,
        versions: [
          {
            version: 1,
            input_schema,
            output_schema: { type: 'object', required: ['city', 'note'], properties: { city: { type: 'string' }, note: { type: 'string' } } },
            examples: [{ input: { note: 'hi' }, output: { city: 'London', note: 'hi' } }],
            recipe: { engine: 'http', hosts: [HOST], steps: [request], output: { city: '{{vars.current.city}}', note: '{{input.note}}' } },
          },
        ],
      },
      {
        name: 'refuse',
        label: 'Refuse',
        description: 'Says no match, naming the note.',
        cost_credits: 1,
        default_version: 1,
        versions: [
          {
            version: 1,
            input_schema,
            output_schema: { type: 'object' },
            examples: [],
            recipe: {
              engine: 'http',
              hosts: [HOST],
              steps: [request, { type: 'not_found', when: { status: [200] }, message: 'Nothing for {{input.note}}' }],
              output: {},
            },
          },
        ],
      },
    ],
  } as unknown as ApiDefinition;
  await publishApi(db(), def, { ownerOrgId: orgId });
  return handle;
}

// NUL and a lone high surrogate, each next to ordinary text.
const NOTE = 'a\u0000b\ud800c';
const STORED = 'a\ufffdb\ufffdc';

describe('an envelope with text jsonb cannot hold', () => {
  it('a success echoing NUL and a lone surrogate: settled once, finalized, and replayed alike', async () => {
    const [api] = await Promise.all([pool.spawn('api'), pool.spawn('worker')]);
    const url = String(api.started.url);
    const org = await newOrg(5);
    const handle = await echoApi(org.org_id);
    const key = `unstorable-${Date.now()}`;
    const res = await query(org.api_key, { api: handle, operation: 'echo', input: { note: NOTE } }, { 'idempotency-key': key }, url);
    expect(res.status, res.text).toBe(200);
    expect(res.body.data.output).toEqual({ city: 'London', note: STORED });
    expect(res.body.data.receipt.billing).toEqual({ status: 'settled', reserved_credits: 1, charged_credits: 1 });
    const id = res.body.data.receipt.request_id as string;
    const row = (await db().query('SELECT status, billing_status FROM requests WHERE id = $1', [id])).rows[0];
    expect(row).toEqual({ status: 'succeeded', billing_status: 'settled' });
    expect(await ledgerOf(org.org_id)).toEqual([
      { request_id: id, kind: 'reserve', amount: 1 },
      { request_id: id, kind: 'settle', amount: 1 },
    ]);
    expect(await balanceOf(org.org_id)).toEqual({ granted: 5, available: 4, reserved: 0, charged: 1 });
    const again = await query(org.api_key, { api: handle, operation: 'echo', input: { note: NOTE } }, { 'idempotency-key': key }, url);
    expect(again.status).toBe(200);
    expect(again.headers.get('idempotency-replayed')).toBe('true');
    expect(again.body).toEqual(res.body);
  });

  it('a failure whose message echoes them: released once and finalized failed', async () => {
    const [api] = await Promise.all([pool.spawn('api'), pool.spawn('worker')]);
    const url = String(api.started.url);
    const org = await newOrg(5);
    const handle = await echoApi(org.org_id);
    const res = await query(org.api_key, { api: handle, operation: 'refuse', input: { note: NOTE } }, {}, url);
    expect(res.status, res.text).toBe(404);
    expect(res.body.error.code).toBe('not_found');
    expect(res.body.error.message).toBe(`Nothing for ${STORED}`);
    expect(res.body.error.receipt.billing).toEqual({ status: 'released', reserved_credits: 1, charged_credits: 0 });
    const id = res.body.error.request_id as string;
    const row = (await db().query('SELECT status, billing_status, error_code FROM requests WHERE id = $1', [id])).rows[0];
    expect(row).toEqual({ status: 'failed', billing_status: 'released', error_code: 'not_found' });
    expect(await balanceOf(org.org_id)).toEqual({ granted: 5, available: 5, reserved: 0, charged: 0 });
  });
});
