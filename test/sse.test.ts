// Streamed queries (stream: true) on the real stack, read with a real SSE parser.
import net from 'node:net';
import { createParser, type EventSourceMessage } from 'eventsource-parser';
import { afterAll, beforeEach, describe, expect, it } from 'vitest';
import { startApiProcess } from './helpers/processes.ts';
import { balanceOf, call, closeDb, db, demo, ledgerOf, newOrg, query, sleep, stack, until } from './helpers/stack.ts';

const london = { api: '@weather', operation: 'current_weather', input: { city: 'London' } };
const key = () => `sse-${Date.now()}-${Math.random().toString(36).slice(2)}`;

interface Stream {
  status: number;
  headers: Headers;
  events: EventSourceMessage[];
  comments: string[];
}

/** POST /v1/query and read the answer as SSE; `stopWhen` may end the read early (a client leaving). */
async function stream(
  apiKey: string,
  body: unknown,
  opts: { headers?: Record<string, string>; baseUrl?: string; stopWhen?: (e: EventSourceMessage) => boolean } = {},
): Promise<Stream> {
  const ac = new AbortController();
  const res = await fetch(`${opts.baseUrl ?? stack().baseUrl}/v1/query`, {
    method: 'POST',
    headers: { authorization: `Bearer ${apiKey}`, 'content-type': 'application/json', accept: 'text/event-stream', ...opts.headers },
    body: JSON.stringify(body),
    signal: ac.signal,
  });
  const out: Stream = { status: res.status, headers: res.headers, events: [], comments: [] };
  let stop = false;
  const parser = createParser({
    onEvent: (e) => {
      out.events.push(e);
      if (opts.stopWhen?.(e)) stop = true;
    },
    onComment: (c) => out.comments.push(c),
  });
  const reader = res.body!.getReader();
  const decoder = new TextDecoder();
  for (;;) {
    const { done, value } = await reader.read();
    if (done) break;
    parser.feed(decoder.decode(value, { stream: true }));
    if (stop) {
      ac.abort();
      break;
    }
  }
  return out;
}

const data = (e: EventSourceMessage) => JSON.parse(e.data);
const progressStages = (s: Stream) => s.events.filter((e) => e.event === 'progress').map((e) => data(e).stage);
const terminals = (s: Stream) => s.events.filter((e) => e.event === 'result' || e.event === 'error');

afterAll(closeDb);
beforeEach(async () => {
  await demo('/__demo/reset');
});

describe('SSE streams', () => {
  it('streams accepted, preparing, executing, formatting and one result, with rising ids and the JSON headers', async () => {
    const org = await newOrg(5);
    const s = await stream(org.api_key, { ...london, stream: true });
    expect(s.status).toBe(200);
    expect(s.headers.get('content-type')).toMatch(/^text\/event-stream/);
    const requestId = s.headers.get('x-request-id')!;
    expect(requestId).toMatch(/^req_/);
    expect(s.headers.get('location')).toBe(`/v1/query/requests/${requestId}`);
    expect(s.headers.get('x-ratelimit-limit')).toMatch(/^\d+$/);
    expect(s.headers.get('idempotency-replayed')).toBe('false');
    // Never stored by a cache on the way, as the JSON answer (no-cache would allow storing it).
    expect(s.headers.get('cache-control')).toBe('no-store, no-transform');

    const ids = s.events.map((e) => Number(e.id));
    expect(ids.every((id, i) => Number.isInteger(id) && (i === 0 || id > ids[i - 1]!))).toBe(true);
    expect(progressStages(s)).toEqual(['accepted', 'preparing', 'executing', 'formatting']);
    for (const e of s.events.filter((x) => x.event === 'progress')) {
      const d = data(e);
      expect(d.request_id).toBe(requestId);
      expect(typeof d.message).toBe('string');
      if (d.stage === 'executing' || d.stage === 'formatting') {
        expect(d.api_reference).toMatchObject({ api: '@weather', name: 'Skyline Weather', category: 'weather' });
        expect(d.api_reference.logo_url).toMatch(/\/v1\/icons\/[0-9a-f]{64}$/);
      } else {
        expect(d.api_reference).toBeUndefined();
      }
    }
    const t = terminals(s);
    expect(t).toHaveLength(1);
    expect(t[0]!.event).toBe('result');
    expect(s.events.at(-1)).toBe(t[0]);
    const result = data(t[0]!);
    expect(result.success).toBe(true);
    expect(result.data.output).toMatchObject({ city: 'London', country: 'GB' });
    expect(result.data.receipt).toMatchObject({ request_id: requestId, billing: { status: 'settled', charged_credits: 1 } });
    // Each data line is one line of JSON.
    expect(s.events.every((e) => !e.data.includes('\n'))).toBe(true);
    expect((await balanceOf(org.org_id)).charged).toBe(1);
  });

  it('a failing run ends with one error event carrying error.status, over HTTP 200', async () => {
    const org = await newOrg(5);
    const s = await stream(org.api_key, { ...london, input: { city: 'Atlantis' }, stream: true });
    expect(s.status).toBe(200);
    expect(progressStages(s)).toEqual(['accepted', 'preparing', 'executing']);
    const t = terminals(s);
    expect(t).toHaveLength(1);
    expect(t[0]!.event).toBe('error');
    const env = data(t[0]!);
    expect(env.success).toBe(false);
    expect(env.error).toMatchObject({ code: 'not_found', status: 404, request_id: s.headers.get('x-request-id') });
    expect(env.error.receipt.billing.status).toBe('released');
    expect((await balanceOf(org.org_id)).charged).toBe(0);
  });

  it('too few credits: the stream stops at preparing with a 402 error event', async () => {
    const org = await newOrg(0);
    const s = await stream(org.api_key, { ...london, stream: true });
    expect(s.status).toBe(200);
    expect(progressStages(s)).toEqual(['accepted', 'preparing']);
    const env = data(terminals(s)[0]!);
    expect(env.error).toMatchObject({ code: 'insufficient_credits', status: 402 });
  });

  it('failures before the stream opens stay JSON error responses', async () => {
    const org = await newOrg(5);
    const invalid = await query(org.api_key, { ...london, stream: true, extra: 1 });
    expect(invalid.status).toBe(400);
    expect(invalid.headers.get('content-type')).toMatch(/application\/json/);
    expect(invalid.body.error.code).toBe('invalid_input');

    const badInput = await query(org.api_key, { ...london, input: { town: 'London' }, stream: true });
    expect(badInput.status).toBe(422);
    expect(badInput.body.error.code).toBe('invalid_provider_input');

    const noKey = await call('POST', '/v1/query', { body: { ...london, stream: true } });
    expect(noKey.status).toBe(401);
    expect(noKey.body.error.code).toBe('api_key_required');

    const k = key();
    await query(org.api_key, london, { 'idempotency-key': k });
    const conflict = await query(org.api_key, { ...london, input: { city: 'Paris' }, stream: true }, { 'idempotency-key': k });
    expect(conflict.status).toBe(409);
    expect(conflict.headers.get('content-type')).toMatch(/application\/json/);
    expect(conflict.body.error.code).toBe('idempotency_key_conflict');
  });

  it('switching JSON to SSE under one key keeps identity: the stream replays the retained result', async () => {
    const org = await newOrg(5);
    const k = key();
    const json = await query(org.api_key, london, { 'idempotency-key': k });
    expect(json.status).toBe(200);
    const s = await stream(org.api_key, { ...london, stream: true }, { headers: { 'idempotency-key': k } });
    expect(s.status).toBe(200);
    expect(s.headers.get('x-request-id')).toBe(json.headers.get('x-request-id'));
    expect(s.headers.get('idempotency-replayed')).toBe('true');
    expect(s.headers.get('x-svc-billing-status')).toBe('settled');
    expect(s.headers.get('cache-control')).toBe('no-store, no-transform');
    expect(s.events).toHaveLength(1);
    expect(s.events[0]!.event).toBe('result');
    expect(data(s.events[0]!)).toEqual(json.body);
    expect((await balanceOf(org.org_id)).charged).toBe(1);
  });

  it('switching SSE to JSON under one key keeps identity, errors included', async () => {
    const org = await newOrg(5);
    const k = key();
    const body = { ...london, input: { city: 'Atlantis' } };
    const s = await stream(org.api_key, { ...body, stream: true }, { headers: { 'idempotency-key': k } });
    const env = data(terminals(s)[0]!);
    const json = await query(org.api_key, body, { 'idempotency-key': k });
    expect(json.status).toBe(404);
    expect(json.headers.get('idempotency-replayed')).toBe('true');
    expect(json.headers.get('x-request-id')).toBe(s.headers.get('x-request-id'));
    expect(json.body).toEqual(env);
    // And back to SSE: the retained error event, with its status.
    const again = await stream(org.api_key, { ...body, stream: true }, { headers: { 'idempotency-key': k } });
    expect(again.events.map((e) => e.event)).toEqual(['error']);
    expect(data(again.events[0]!)).toEqual(env);
  });

  it('progress comes from the workflow while it works; a client that leaves does not stop the run', async () => {
    const org = await newOrg(5);
    await demo('/__demo/faults', { host: 'weather.example.test', latency_ms: 2500, times: 1 });
    const s = await stream(org.api_key, { ...london, stream: true }, { stopWhen: (e) => e.event === 'progress' && data(e).stage === 'executing' });
    const requestId = s.headers.get('x-request-id')!;
    // The executing message is the workflow's own (it names the operation it runs).
    expect(data(s.events.at(-1)!).message).toContain('@weather current_weather');
    expect(terminals(s)).toHaveLength(0);
    const done = await until(async () => {
      const r = await call('GET', `/v1/query/requests/${requestId}`, { key: org.api_key });
      return r.body.data.status === 'succeeded' ? r : undefined;
    }, 30_000);
    expect(done.body.data.receipt.billing).toMatchObject({ status: 'settled', charged_credits: 1 });
    expect((await balanceOf(org.org_id)).charged).toBe(1);
  });

  it('a client that leaves while its query is submitted holds no stream open for the rest of the run', async () => {
    const s0 = stack();
    // An API process of its own: its open-streams gauge counts this test's stream alone.
    const api = await startApiProcess({ databaseUrl: s0.databaseUrl, temporalAddress: s0.temporalAddress, hostMap: s0.hostMap, taskQueue: s0.taskQueue });
    try {
      const org = await newOrg(5);
      await demo('/__demo/faults', { host: 'weather.example.test', latency_ms: 5000, times: 1 });
      const url = new URL(String(api.started.url));
      const body = JSON.stringify({ ...london, stream: true });
      // The organization's admission lock held here, so the API is still admitting the query when
      // the caller leaves: the socket closes before the stream exists.
      const holder = await db().connect();
      try {
        await holder.query('BEGIN');
        await holder.query('SELECT pg_advisory_xact_lock(600, hashtext($1))', [org.org_id]);
        const socket = net.connect(Number(url.port), url.hostname);
        socket.on('error', () => undefined);
        socket.write(
          `POST /v1/query HTTP/1.1\r\nhost: ${url.host}\r\nauthorization: Bearer ${org.api_key}\r\ncontent-type: application/json\r\naccept: text/event-stream\r\ncontent-length: ${Buffer.byteLength(body)}\r\n\r\n${body}`,
        );
        await until(async () => (await db().query(`SELECT 1 FROM pg_locks WHERE locktype = 'advisory' AND NOT granted`)).rowCount! > 0, 10_000, 20);
        socket.destroy();
        await sleep(200);
        await holder.query('COMMIT');
      } finally {
        holder.release();
      }
      // The run starts all the same and waits on the site.
      const row = await until(async () => {
        const r = await db().query(`SELECT id, status FROM requests WHERE org_id = $1`, [org.org_id]);
        return r.rows[0]?.status === 'processing' ? r.rows[0] : undefined;
      }, 10_000, 50);
      await sleep(500);
      const open = async () => {
        const m = await call('GET', '/metrics', { baseUrl: String(api.started.url) });
        return Number(/^wqs_sse_streams_open (\S+)$/m.exec(m.text)?.[1]);
      };
      expect(await open()).toBe(0);
      expect((await db().query(`SELECT status FROM requests WHERE id = $1`, [row.id])).rows[0].status).toBe('processing');
      // Leaving does not stop the run: it succeeds and is charged once.
      await until(async () => (await db().query(`SELECT status FROM requests WHERE id = $1`, [row.id])).rows[0].status === 'succeeded', 30_000);
      expect((await balanceOf(org.org_id)).charged).toBe(1);
    } finally {
      await api.kill('SIGTERM');
    }
  });

  it('the first event does not wait for Temporal: a start that fails ends the stream with engine_unavailable, nothing charged', async () => {
    const s0 = stack();
    // Temporal at a port where nothing listens: the claim is made, the start cannot be.
    const closed = net.createServer();
    await new Promise<void>((resolve) => closed.listen(0, '127.0.0.1', resolve));
    const port = (closed.address() as net.AddressInfo).port;
    await new Promise<void>((resolve) => closed.close(() => resolve()));
    const api = await startApiProcess({ databaseUrl: s0.databaseUrl, temporalAddress: `127.0.0.1:${port}`, hostMap: s0.hostMap, taskQueue: s0.taskQueue });
    try {
      const org = await newOrg(5);
      const k = key();
      const s = await stream(org.api_key, { ...london, stream: true }, { baseUrl: String(api.started.url), headers: { 'idempotency-key': k } });
      expect(s.status).toBe(200);
      const requestId = s.headers.get('x-request-id')!;
      expect(progressStages(s)).toEqual(['accepted']);
      const t = terminals(s);
      expect(t.map((e) => e.event)).toEqual(['error']);
      expect(s.events.at(-1)).toBe(t[0]);
      const env = data(t[0]!);
      expect(env.error).toMatchObject({ code: 'engine_unavailable', status: 503, retryable: true, request_id: requestId });
      expect(env.error.message).toMatch(/nothing was charged/);
      // The claim is interrupted and its key freed, as for a JSON call: no run can reserve.
      const row = await db().query(`SELECT status, error_code, idempotency_key_hash FROM requests WHERE id = $1`, [requestId]);
      expect(row.rows[0]).toEqual({ status: 'interrupted', error_code: 'engine_unavailable', idempotency_key_hash: null });
      expect(await ledgerOf(org.org_id)).toEqual([]);
      // A retry with the key on a working API runs as a new request, charged once.
      const again = await stream(org.api_key, { ...london, stream: true }, { headers: { 'idempotency-key': k } });
      expect(progressStages(again)).toEqual(['accepted', 'preparing', 'executing', 'formatting']);
      expect(again.headers.get('x-request-id')).not.toBe(requestId);
      expect(data(terminals(again)[0]!).data.receipt.billing).toMatchObject({ status: 'settled', charged_credits: 1 });
      expect(await balanceOf(org.org_id)).toMatchObject({ available: 4, reserved: 0, charged: 1 });
    } finally {
      await api.kill('SIGTERM');
    }
  });

  it('sends `: keep-alive` comments during long work (interval lowered for the test)', async () => {
    const s0 = stack();
    const api = await startApiProcess({
      databaseUrl: s0.databaseUrl,
      temporalAddress: s0.temporalAddress,
      hostMap: s0.hostMap,
      taskQueue: s0.taskQueue,
      env: { SSE_KEEPALIVE_MS: '300' },
    });
    try {
      const org = await newOrg(5);
      await demo('/__demo/faults', { host: 'weather.example.test', latency_ms: 2500, times: 1 });
      const s = await stream(org.api_key, { ...london, stream: true }, { baseUrl: String(api.started.url) });
      // ~8 expected at 300 ms over 2.5 s; a loaded machine may delay timers, never remove them all.
      expect(s.comments.filter((c) => c.trim() === 'keep-alive').length, JSON.stringify(s.comments)).toBeGreaterThanOrEqual(3);
      expect(progressStages(s)).toEqual(['accepted', 'preparing', 'executing', 'formatting']);
      expect(terminals(s).map((e) => e.event)).toEqual(['result']);
    } finally {
      await api.kill('SIGTERM');
    }
  });
});
