// Temporal's history must not hold organizations' inputs and outputs in plain text: every payload
// the service writes is AES-256-GCM ciphertext (shared/temporal/payload-codec.ts). On the real
// stack: a query's raw history has neither its input nor its output; after a key rotation (new
// current key, the old one kept) new queries complete and old histories still decode and replay;
// the operators' codec endpoint decodes with its token only.
import { randomBytes } from 'node:crypto';
import { createRequire } from 'node:module';
import { Client, Connection } from '@temporalio/client';
import type { temporal } from '@temporalio/proto';
import { Worker } from '@temporalio/worker';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { loadConfig } from '../shared/config.ts';
import { createDataConverter } from '../shared/temporal/data-converter.ts';
import { decryptPayloadsIn } from '../shared/temporal/payload-codec.ts';
import { loadPayloadKeyring } from '../shared/temporal/payload-keys.ts';
import { processPool } from './helpers/processes.ts';
import { call, closeDb, demo, newOrg, ownPair, query, workflowIdOf } from './helpers/stack.ts';

const proto = createRequire(import.meta.url)('@temporalio/proto') as typeof import('@temporalio/proto');
type History = temporal.api.history.v1.IHistory;
type Payload = temporal.api.common.v1.IPayload;

const K1 = randomBytes(32).toString('base64');
const K2 = randomBytes(32).toString('base64');
const TOKEN = randomBytes(32).toString('hex');
const UI_ORIGIN = 'http://ui.example.test:8233';
const CITY = 'London'; // a city the demo weather site knows
const weather = { api: '@weather', operation: 'current_weather', input: { city: CITY } };

let pair: ReturnType<typeof ownPair>;
const pool = processPool(() => pair);
let connection: Connection;
const clientWith = async (keys: { PAYLOAD_ENCRYPTION_KEY: string; PAYLOAD_PREVIOUS_KEYS?: string }) =>
  new Client({ connection, dataConverter: await createDataConverter({ ...keys, dataDir: loadConfig().dataDir }) });
const rotated = { PAYLOAD_ENCRYPTION_KEY: K2, PAYLOAD_PREVIOUS_KEYS: K1 };

beforeAll(async () => {
  pair = ownPair('payload-enc', { PAYLOAD_ENCRYPTION_KEY: K1, CODEC_ENDPOINT_TOKEN: TOKEN, CODEC_CORS_ORIGINS: UI_ORIGIN });
  connection = await Connection.connect({ address: pair.temporalAddress });
  await demo('/__demo/reset');
});
afterAll(async () => {
  await pool.killAll();
  await connection?.close();
  await closeDb();
});

/** The history exactly as Temporal stores it (protobuf bytes), as text: plaintext shows up here. */
const rawText = (h: History) => Buffer.from(proto.temporal.api.history.v1.History.encode(h).finish()).toString('latin1');

/** Every payload in the history with where it is (search attributes aside: Temporal indexes them, no codec applies). */
function payloadsOf(node: unknown, out: Array<Payload & { at?: string }> = [], at = ''): Array<Payload & { at?: string }> {
  if (!node || typeof node !== 'object' || ArrayBuffer.isView(node) || at.endsWith('.searchAttributes')) return out;
  const o = node as Record<string, unknown>;
  if (o.metadata && typeof o.metadata === 'object' && 'encoding' in (o.metadata as object)) out.push(Object.assign(Object.create(null), o, { at }) as Payload & { at: string });
  else for (const [k, v] of Object.entries(o)) payloadsOf(v, out, `${at}.${k}`);
  return out;
}
/** The payloads a codec handles: local-activity markers carry the SDK core's own bookkeeping (seq,
 *  attempt, activity type, times) in `details.data`, and `patched()` markers the patch id in
 *  `details.patch-data`, both written by the core, not through a codec (no caller data in either). */
const codecPayloadsOf = (h: History) => payloadsOf(h).filter((p) => !/markerRecordedEventAttributes\.details\.(data|patch-data)\./.test(p.at ?? ''));
const meta = (p: Payload, k: string) => Buffer.from(p.metadata![k]!).toString('utf8');
const b64json = (p: Payload) => ({
  metadata: Object.fromEntries(Object.entries(p.metadata ?? {}).map(([k, v]) => [k, Buffer.from(v).toString('base64')])),
  data: Buffer.from(p.data ?? new Uint8Array()).toString('base64'),
});

/** Strings of at least 4 characters in a value: the output's text a history must not reveal. */
const strings = (v: unknown): string[] =>
  typeof v === 'string' ? (v.length >= 4 ? [v] : []) : v && typeof v === 'object' ? Object.values(v).flatMap(strings) : [];

async function run(apiUrl: string, orgKey: string) {
  const res = await query(orgKey, weather, { 'idempotency-key': `enc-${randomBytes(6).toString('hex')}` }, apiUrl);
  expect(res.status, JSON.stringify(res.body)).toBe(200);
  expect(res.body.data.output.city).toBe(CITY);
  return { res, workflowId: await workflowIdOf(res.body.data.receipt.request_id) };
}

let first: { workflowId: string; output: unknown };
let rotatedApiUrl: string;
let orgKey: string;

describe('payloads at rest', () => {
  it('a query answers normally, and its raw history holds neither its input nor its output; every payload is binary/encrypted', async () => {
    const [api] = await Promise.all([pool.spawn('api'), pool.spawn('worker')]);
    const org = await newOrg(10);
    orgKey = org.api_key;
    const { res, workflowId } = await run(String(api.started.url), org.api_key);
    expect(res.body.data.receipt.billing.status).toBe('settled');
    first = { workflowId, output: res.body.data.output };

    // The answer comes from the request row, which a one-task run writes before its workflow task
    // completes: wait for the workflow to close so its history holds the whole run.
    const handle = (await clientWith({ PAYLOAD_ENCRYPTION_KEY: K1 })).workflow.getHandle(workflowId);
    await handle.result();
    const history = await handle.fetchHistory();
    const text = rawText(history);
    const secrets = [CITY, ...strings(res.body.data.output)];
    expect(secrets.length).toBeGreaterThan(1);
    for (const s of secrets) expect(text.includes(s), `history reveals ${JSON.stringify(s)}`).toBe(false);
    const payloads = codecPayloadsOf(history);
    expect(payloads.length).toBeGreaterThanOrEqual(3); // workflow input and result, the fused step's result (its marker)
    for (const p of payloads) expect(meta(p, 'encoding'), `${p.at}: ${Buffer.from(p.data ?? []).toString()}`).toBe('binary/encrypted');
    // The key id is named, not the key.
    expect(new Set(payloads.map((p) => meta(p, 'encryption-key-id'))).size).toBe(1);
    expect(text.includes(K1)).toBe(false);
    // The service's own client reads the result back.
    const result = (await (await clientWith({ PAYLOAD_ENCRYPTION_KEY: K1 })).workflow.getHandle(workflowId).result()) as { output?: unknown };
    expect(JSON.stringify(result)).toContain(CITY);
    await pool.killAll();
  }, 180_000);

  it('after a rotation (new current key, old key kept) new queries complete, also mid-rollout, and old histories still decode and replay', async () => {
    const [api] = await Promise.all([
      pool.spawn('api', { ...pair, env: { ...pair.env, ...rotated } }),
      pool.spawn('worker', { ...pair, env: { ...pair.env, ...rotated } }),
    ]);
    rotatedApiUrl = String(api.started.url);
    const { workflowId } = await run(rotatedApiUrl, orgKey);
    const client = await clientWith(rotated);
    const keyIds = async (id: string) => {
      const handle = client.workflow.getHandle(id);
      await handle.result(); // the whole run, not only what was written before the answer
      return new Set(codecPayloadsOf(await handle.fetchHistory()).map((p) => meta(p, 'encryption-key-id')));
    };
    const [oldIds, newIds] = [await keyIds(first.workflowId), await keyIds(workflowId)];
    expect(oldIds.size).toBe(1);
    expect(newIds.size).toBe(1);
    expect([...newIds][0]).not.toBe([...oldIds][0]); // new payloads use the new key
    // Old results decode with the rotated keyring, and the old history replays on a rotated worker's converter.
    expect(JSON.stringify(await client.workflow.getHandle(first.workflowId).result())).toContain(CITY);
    const dataConverter = await createDataConverter({ ...rotated, dataDir: loadConfig().dataDir });
    await Worker.runReplayHistory({ workflowBundle: { codePath: pair.workflowBundlePath }, dataConverter }, await client.workflow.getHandle(first.workflowId).fetchHistory(), first.workflowId);
    // Written out decrypted (how scripts/record-histories.ts keeps fixtures keyless), it replays with no key at all.
    const plainHistory = await client.workflow.getHandle(first.workflowId).fetchHistory();
    decryptPayloadsIn(await loadPayloadKeyring({ ...rotated, dataDir: loadConfig().dataDir }), plainHistory);
    expect(rawText(plainHistory)).toContain(CITY);
    await Worker.runReplayHistory({ workflowBundle: { codePath: pair.workflowBundlePath } }, plainHistory, first.workflowId);
    // Mid-rollout (docs/payload-encryption.md, step 1 done, step 2 under way): an API still encrypting
    // with the old key but already knowing the new one works with a worker already on the new key.
    const midway = await pool.spawn('api', { ...pair, env: { ...pair.env, PAYLOAD_ENCRYPTION_KEY: K1, PAYLOAD_PREVIOUS_KEYS: K2 } });
    await run(String(midway.started.url), orgKey);
    // Without the old key the old result does not decode: the kept key is what makes rotation work.
    await expect((await clientWith({ PAYLOAD_ENCRYPTION_KEY: K2 })).workflow.getHandle(first.workflowId).result()).rejects.toThrow(/not configured/);
  }, 180_000);
});

describe('codec endpoint', () => {
  const codec = (path: string, body: unknown, headers: Record<string, string> = {}) => call('POST', path, { body, headers, baseUrl: rotatedApiUrl });

  it('decodes a history payload with the operator token; refuses without it (401) and with an org API key', async () => {
    const history = await (await clientWith(rotated)).workflow.getHandle(first.workflowId).fetchHistory();
    const input = history.events![0]!.workflowExecutionStartedEventAttributes!.input!.payloads![0]!;
    const body = { payloads: [b64json(input)] };

    const none = await codec('/codec/decode', body);
    expect(none.status).toBe(401);
    expect(none.body.error.code).toBe('api_key_required');
    const orgKeyAnswer = await codec('/codec/decode', body, { authorization: `Bearer ${orgKey}` });
    expect(orgKeyAnswer.status).toBe(401);
    expect(orgKeyAnswer.body.error.code).toBe('invalid_api_key');
    expect(orgKeyAnswer.text).not.toContain(CITY);

    const ok = await codec('/codec/decode', body, { authorization: `Bearer ${TOKEN}`, 'x-namespace': 'default' });
    expect(ok.status, ok.text).toBe(200);
    const [decoded] = ok.body.payloads;
    expect(Buffer.from(decoded.metadata.encoding, 'base64').toString()).toBe('json/plain');
    expect(Buffer.from(decoded.data, 'base64').toString()).toContain('"requestId"');

    // encode → decode is the identity; a payload not encrypted passes through decode unchanged.
    const plain = { metadata: { encoding: Buffer.from('json/plain').toString('base64') }, data: Buffer.from(JSON.stringify({ city: CITY })).toString('base64') };
    const enc = await codec('/codec/encode', { payloads: [plain] }, { authorization: `Bearer ${TOKEN}` });
    expect(enc.status).toBe(200);
    expect(Buffer.from(enc.body.payloads[0].metadata.encoding, 'base64').toString()).toBe('binary/encrypted');
    expect(Buffer.from(enc.body.payloads[0].data, 'base64').toString('latin1')).not.toContain(CITY);
    const back = await codec('/codec/decode', { payloads: [enc.body.payloads[0], plain] }, { authorization: `Bearer ${TOKEN}` });
    expect(back.body.payloads).toEqual([plain, plain]);

    // An altered ciphertext is a precise 400, not a 500.
    const tampered = { ...enc.body.payloads[0], data: Buffer.from(Buffer.from(enc.body.payloads[0].data, 'base64').map((b: number, i: number) => (i === 20 ? b ^ 1 : b))).toString('base64') };
    const bad = await codec('/codec/decode', { payloads: [plain, tampered] }, { authorization: `Bearer ${TOKEN}` });
    expect(bad.status).toBe(400);
    expect(bad.body.error.code).toBe('invalid_input');
    expect(bad.body.error.param).toBe('payloads.1');
  });

  it('answers CORS for the configured Web UI origin only', async () => {
    const pre = await call('OPTIONS', '/codec/decode', { headers: { origin: UI_ORIGIN, 'access-control-request-method': 'POST', 'access-control-request-headers': 'authorization, content-type, x-namespace' }, baseUrl: rotatedApiUrl });
    expect(pre.status).toBe(204);
    expect(pre.headers.get('access-control-allow-origin')).toBe(UI_ORIGIN);
    expect(pre.headers.get('access-control-allow-headers')).toContain('x-namespace');
    const other = await call('OPTIONS', '/codec/decode', { headers: { origin: 'http://evil.example.test' }, baseUrl: rotatedApiUrl });
    expect(other.status).toBe(204);
    expect(other.headers.get('access-control-allow-origin')).toBeNull();
    const denied = await codec('/codec/decode', { payloads: [] }, { origin: UI_ORIGIN });
    expect(denied.status).toBe(401);
    expect(denied.headers.get('access-control-allow-origin')).toBe(UI_ORIGIN); // the UI can show why
  });

  it('does not exist where CODEC_ENDPOINT_TOKEN is unset', async () => {
    const off = await pool.spawn('api', { ...pair, env: { ...rotated } });
    const res = await call('POST', '/codec/decode', { body: { payloads: [] }, headers: { authorization: `Bearer ${TOKEN}` }, baseUrl: String(off.started.url) });
    expect(res.status).toBe(404);
    expect(res.body.error.code).toBe('route_not_found');
  });
});

describe('failures at rest', () => {
  // A failure's message and stack trace are not payloads: without the failure converter's
  // encodeCommonAttributes they sit in the history as plain text, and a website failure's message
  // names the page it asked for (host and path), where a query's input often is.
  it('a failed step leaves neither its message (which names the input) nor its stack trace in the history in plain text', async () => {
    // This worker alone polls the queue, so the failed attempts run here and its log is the one to read
    // (a worker an earlier test left running would take some of them).
    await pool.killAll();
    const [api, worker] = await Promise.all([
      pool.spawn('api', { ...pair, env: { ...pair.env, ...rotated } }),
      pool.spawn('worker', { ...pair, env: { ...pair.env, ...rotated } }),
    ]);
    // A job id nobody else uses: it must not show up anywhere in the history.
    const jobId = `J${100000 + (randomBytes(3).readUIntBE(0, 3) % 900000)}`;
    // The fused step (reserve, execute, settle in one activity) gets a 500 and stops there, its
    // error ("The website returned 500 for jobs.example.test/jobs/<id>") in its result; the ordinary
    // execute step's first attempt gets a 500 too and fails with it (kept in the history as the
    // retried step's last failure); its retry gets the site's own 404 (not_found).
    // The fault names this job: no other file's query of the jobs site can take it.
    await demo('/__demo/faults', { host: 'jobs.example.test', path_prefix: `/jobs/${jobId}`, status: 500, times: 2 });
    try {
      const res = await query((await newOrg(10)).api_key, { api: '@jobs', operation: 'get_job', input: { job_id: jobId } }, { 'idempotency-key': `enc-fail-${jobId}` }, String(api.started.url));
      expect(res.status, JSON.stringify(res.body)).toBe(404);
      expect(res.body.error.code).toBe('not_found');
      // The workflow decoded the step's failure: the caller gets the recipe's own message.
      expect(res.body.error.message).toBe('No job with that id');
      const handle = (await clientWith(rotated)).workflow.getHandle(await workflowIdOf(res.body.error.receipt.request_id));
      await handle.result();
      const history = await handle.fetchHistory();
      // The retried step's last failure and its final one are both in the history, encoded, and so
      // is the fused step's result that carries the first error.
      const failures = (history.events ?? []).flatMap((e) => [e.activityTaskStartedEventAttributes?.lastFailure, e.activityTaskFailedEventAttributes?.failure].filter((f) => f));
      expect(failures.length, 'the run recorded its failed attempts').toBe(2);
      for (const f of failures) expect(meta(f!.encodedAttributes!, 'encoding')).toBe('binary/encrypted');
      const fusedResults = (history.events ?? []).flatMap((e) => e.activityTaskCompletedEventAttributes?.result?.payloads ?? []);
      expect(fusedResults.length, 'the fused step answered where it stopped').toBe(1);
      expect(meta(fusedResults[0]!, 'encoding')).toBe('binary/encrypted');
      const text = rawText(history);
      expect(text.includes(jobId), 'history reveals the input in a failure message').toBe(false);
      expect(text.includes('The website returned'), 'history holds a failure message in plain text').toBe(false);
      expect(/activities\/\S+\.ts/.test(text), 'history holds a stack trace with source paths').toBe(false);
      // Nor does the worker's log hold a plain-text copy: the SDK logs each failed attempt at WARN
      // with the error, and the log names its code and the run, not its message or details.
      const log = worker.output();
      expect(log).toContain('Activity failed');
      expect(log).toContain('upstream_http_error');
      expect(log.includes(jobId), 'the worker log reveals the input of a failed step').toBe(false);
    } finally {
      await demo('/__demo/reset');
    }
  }, 180_000);
});
