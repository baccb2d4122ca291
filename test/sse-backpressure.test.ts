// Streams whose client does not read (apps/api/plugins/sse-writer.ts): the API holds their events
// only so long, and one organization holds only so many streams. Real API and worker processes of
// our own, a site of this test's that answers lists of any size (and can be held), and a client with
// a 4 KiB receive window (test/helpers/tiny-window-client.py): on loopback a paused Node socket lets
// the kernel absorb megabytes, so the API would never see backpressure.
import { spawn } from 'node:child_process';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import path from 'node:path';
import { createParser, type EventSourceMessage } from 'eventsource-parser';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { publishApi } from '../shared/db/catalog.ts';
import { parseRecipe } from '../shared/recipes/schema.ts';
import { processPool, type ServiceProcess } from './helpers/processes.ts';
import { balanceOf, call, closeDb, db, ledgerOf, newOrg, ownPair, stack, until } from './helpers/stack.ts';
import { bulkItems as items, bulkListApi } from './helpers/bulk-list.ts';

const HOST = 'bulk-sse.example.test';
const HANDLE = `@bulk-sse-${Math.random().toString(36).slice(2, 8)}`;
const MAX_BUFFERED = 64 * 1024;
const DRAIN_TIMEOUT_MS = 4_000;
const STREAMS_PER_ORG = 3;
const CLIENT = path.join(import.meta.dirname, 'helpers/tiny-window-client.py');

const definition = bulkListApi(HANDLE, HOST, 'Bulk list for streams (test fixture)');

let server: http.Server;
/** While set, the site answers only once it resolves (runs stay open). */
let hold: Promise<void> | undefined;
let pair: ReturnType<typeof ownPair>;
const pool = processPool(() => pair);
let api: ServiceProcess;
let base: string;

beforeAll(async () => {
  server = http.createServer(async (req, res) => {
    await hold;
    const n = Number(new URL(req.url ?? '/', 'http://x').searchParams.get('n') ?? '1');
    res.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify(items(n)));
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const port = (server.address() as AddressInfo).port;
  pair = {
    ...ownPair('sse-bp', {
      SSE_MAX_BUFFERED_BYTES: String(MAX_BUFFERED),
      SSE_DRAIN_TIMEOUT_MS: String(DRAIN_TIMEOUT_MS),
      SSE_STREAMS_PER_ORG: String(STREAMS_PER_ORG),
      // Far above this file's waits: a stream closed here was closed by the SSE bound, not the generic one.
      RESPONSE_STALL_TIMEOUT_MS: '300000',
    }),
    hostMap: { ...stack().hostMap, [HOST]: `127.0.0.1:${port}` },
  };
  await publishApi(db(), definition, { validateRecipe: (r) => void parseRecipe(r) });
  [api] = await Promise.all([pool.spawn('api'), pool.spawn('worker')]);
  base = String(api.started.url).replace(/\/$/, '');
}, 120_000);
afterAll(async () => {
  await pool.killAll();
  await new Promise((resolve) => server.close(resolve));
  await closeDb();
});

async function metric(name: string): Promise<number> {
  const text = await (await fetch(`${base}/metrics`)).text();
  return Number(new RegExp(`^${name}(?:\\{[^}]*\\})? (\\S+)$`, 'm').exec(text)?.[1] ?? NaN);
}

const clients = new Set<ReturnType<typeof spawn>>();
// A test that failed midway leaves no client holding a connection (or running) after it.
afterEach(() => {
  for (const c of clients) c.kill('SIGKILL');
});

/** A streamed query from the tiny-window client: it sends, then reads nothing until told to. */
function tinyClient(apiKey: string, body: unknown, headers: Record<string, string> = {}) {
  const url = new URL(base);
  const json = JSON.stringify(body);
  const extra = Object.entries(headers).map(([k, v]) => `${k}: ${v}\r\n`).join('');
  const request = `POST /v1/query HTTP/1.1\r\nhost: ${url.host}\r\nauthorization: Bearer ${apiKey}\r\ncontent-type: application/json\r\naccept: text/event-stream\r\nconnection: close\r\n${extra}content-length: ${Buffer.byteLength(json)}\r\n\r\n${json}`;
  const child = spawn('python3', [CLIENT, url.hostname, url.port, Buffer.from(request).toString('hex')], { stdio: ['pipe', 'pipe', 'pipe'] });
  clients.add(child);
  child.on('exit', () => clients.delete(child));
  const chunks: Buffer[] = [];
  child.stdout.on('data', (c: Buffer) => chunks.push(c));
  let log = '';
  child.stderr.on('data', (d: Buffer) => (log += d.toString()));
  const exited = new Promise<string>((resolve) => child.on('exit', () => resolve(/end (\w+)/.exec(log)?.[1] ?? `no end: ${log}`)));
  return {
    sent: () => until(async () => log.includes('sent'), 10_000, 20),
    read: () => child.stdin.end('read\n'),
    trickle: (bytes: number, ms: number) => child.stdin.end(`trickle ${bytes} ${ms}\n`),
    exited,
    /** What it read: status line and headers, and the body with its chunked framing removed. */
    response: () => parseResponse(Buffer.concat(chunks)),
    kill: () => child.kill('SIGKILL'),
  };
}

function parseResponse(raw: Buffer) {
  const split = raw.indexOf('\r\n\r\n');
  const head = raw.subarray(0, split).toString('latin1');
  let rest = raw.subarray(split + 4);
  const parts: Buffer[] = [];
  for (;;) {
    const eol = rest.indexOf('\r\n');
    if (eol < 0) break;
    const size = parseInt(rest.subarray(0, eol).toString('latin1'), 16);
    if (!Number.isFinite(size) || size === 0) break;
    parts.push(rest.subarray(eol + 2, eol + 2 + size));
    rest = rest.subarray(eol + 2 + size + 2);
  }
  const events: EventSourceMessage[] = [];
  const parser = createParser({ onEvent: (e) => events.push(e) });
  parser.feed(Buffer.concat(parts).toString('utf8'));
  return { head, bodyBytes: parts.reduce((n, p) => n + p.length, 0), events };
}

/** A streamed query read as it comes, by fetch. */
async function readingStream(apiKey: string, body: unknown, extra: Record<string, string> = {}) {
  const res = await fetch(`${base}/v1/query`, {
    method: 'POST',
    headers: { authorization: `Bearer ${apiKey}`, 'content-type': 'application/json', accept: 'text/event-stream', ...extra },
    body: JSON.stringify(body),
  });
  const events: EventSourceMessage[] = [];
  const parser = createParser({ onEvent: (e) => events.push(e) });
  parser.feed(await res.text());
  return { res, events };
}

const list = (n: number) => ({ api: HANDLE, operation: 'list_items', input: { n }, stream: true });

describe('streams whose client takes nothing', () => {
  it('a stream holding a result its client does not take is closed after the drain timeout; the run is charged once and its result kept for its key', async () => {
    const org = await newOrg(5);
    const n = 4_000; // about 250 KB of result: far more than the client's window and the bound
    const cutBefore = await metric('wqs_sse_streams_cut_total');
    const stalledBefore = await metric('wqs_stalled_connections_closed_total');
    const client = tinyClient(org.api_key, list(n), { 'idempotency-key': `bp-${Date.now()}` });
    await client.sent();
    // The run ends, and its result waits in the API for a client that takes nothing.
    const row = await until(async () => {
      const r = await db().query(`SELECT id, status FROM requests WHERE org_id = $1`, [org.org_id]);
      return r.rows[0]?.status === 'succeeded' ? r.rows[0] : undefined;
    }, 30_000, 50);
    // Held, and seen held by an operator, for a while.
    const seen: number[] = [];
    await until(async () => seen[seen.push(await metric('wqs_sse_buffered_bytes')) - 1]! > MAX_BUFFERED, 10_000, 50).catch((err) => {
      throw new Error(`${err.message}: wqs_sse_buffered_bytes read ${seen.join(', ')}`);
    });
    const heldAt = Date.now();
    // Closed by the stream's bound: counted there, not by the generic stall timeout (300 s here).
    await until(async () => (await metric('wqs_sse_streams_cut_total')) === cutBefore + 1, 20_000, 100);
    expect(Date.now() - heldAt).toBeLessThan(DRAIN_TIMEOUT_MS + 10_000);
    expect(await metric('wqs_stalled_connections_closed_total')).toBe(stalledBefore);
    expect(await metric('wqs_sse_buffered_bytes')).toBe(0);
    expect(await metric('wqs_sse_streams_open')).toBe(0);

    // The client, reading now, finds the stream's start and then its end, without the result.
    client.read();
    expect(['eof', 'reset']).toContain(await client.exited);
    const got = client.response();
    expect(got.head).toMatch(/^HTTP\/1\.1 200/);
    expect(got.head).toMatch(/content-type: text\/event-stream/i);
    expect(got.events.filter((e) => e.event === 'result')).toHaveLength(0);
    expect(got.bodyBytes).toBeLessThan(JSON.stringify(items(n)).length);

    // Nothing is lost: the run was charged once, and its result is at GET for its key.
    const status = await call('GET', `/v1/query/requests/${row.id}`, { key: org.api_key, baseUrl: base });
    expect(status.body.data).toMatchObject({ status: 'succeeded', response_status: 200, receipt: { billing: { status: 'settled', charged_credits: 1 } } });
    expect(status.body.data.result.data.output).toEqual(items(n));
    expect(await ledgerOf(org.org_id)).toEqual([
      { request_id: row.id, kind: 'reserve', amount: 1 },
      { request_id: row.id, kind: 'settle', amount: 1 },
    ]);
  });

  it('a client that keeps reading, however slowly, gets the whole result; a reading client gets every event in order', async () => {
    const org = await newOrg(5);
    const cutBefore = await metric('wqs_sse_streams_cut_total');
    const n = 4_000;
    const slow = tinyClient(org.api_key, list(n));
    await slow.sent();
    // A second stream, read as it comes, with a result of 1.2 MB (handed on in slices).
    const reading = await readingStream(org.api_key, list(20_000));
    expect(reading.res.status).toBe(200);
    expect(reading.events.map((e) => e.id)).toEqual(['1', '2', '3', '4', '5']);
    expect(reading.events.map((e) => (e.event === 'progress' ? JSON.parse(e.data).stage : e.event))).toEqual(['accepted', 'preparing', 'executing', 'formatting', 'result']);
    expect(JSON.parse(reading.events[4]!.data).data.output).toEqual(items(20_000));

    // The slow one: 4 KiB every 100 ms (about 40 KB/s), each pause well under the drain timeout,
    // the whole well over it.
    await until(async () => (await db().query(`SELECT 1 FROM requests WHERE org_id = $1 AND status = 'succeeded'`, [org.org_id])).rowCount === 2, 30_000, 50);
    const started = Date.now();
    slow.trickle(4096, 100);
    expect(await slow.exited).toBe('eof');
    expect(Date.now() - started).toBeGreaterThan(DRAIN_TIMEOUT_MS);
    const got = slow.response();
    expect(got.events.map((e) => e.event)).toEqual(['progress', 'progress', 'progress', 'progress', 'result']);
    expect(JSON.parse(got.events.at(-1)!.data).data.output).toEqual(items(n));
    expect(await metric('wqs_sse_streams_cut_total')).toBe(cutBefore);
  });

  it(`one organization holds at most ${STREAMS_PER_ORG} streams: the next is 429 before it runs or is charged; others are not affected`, async () => {
    const org = await newOrg(10);
    const other = await newOrg(10);
    // A keyed stream that ran to its end before the organization's streams fill up.
    const keyed = { 'idempotency-key': `slots-${Date.now()}` };
    const first = await readingStream(org.api_key, list(10), keyed);
    expect(first.events.at(-1)!.event).toBe('result');
    let release!: () => void;
    hold = new Promise<void>((resolve) => (release = resolve));
    const clients = Array.from({ length: STREAMS_PER_ORG }, () => tinyClient(org.api_key, list(10)));
    try {
      await Promise.all(clients.map((c) => c.sent()));
      await until(async () => (await metric('wqs_sse_streams_open')) === STREAMS_PER_ORG, 20_000, 50);

      const refused = await call('POST', '/v1/query', { key: org.api_key, body: list(10), baseUrl: base });
      expect(refused.status).toBe(429);
      expect(refused.headers.get('content-type')).toMatch(/application\/json/);
      expect(refused.headers.get('retry-after')).toBe('1');
      // Like every 429 of this route, it carries the plan's figures (the minute is not what refused it).
      expect(Number(refused.headers.get('x-ratelimit-limit'))).toBeGreaterThan(0);
      expect(Number(refused.headers.get('x-ratelimit-remaining'))).toBeGreaterThan(0);
      expect(Number(refused.headers.get('x-ratelimit-reset'))).toBeGreaterThan(Date.now() / 1000 - 1);
      expect(refused.body.error).toMatchObject({ code: 'organization_concurrency_limit', status: 429, retryable: true, details: { streams_open: STREAMS_PER_ORG } });
      // Nothing ran for it: three requests (and the keyed one before), three reservations.
      expect((await db().query(`SELECT count(*)::int AS n FROM requests WHERE org_id = $1`, [org.org_id])).rows[0].n).toBe(STREAMS_PER_ORG + 1);
      await until(async () => (await balanceOf(org.org_id)).reserved === STREAMS_PER_ORG, 20_000, 50);
      expect((await db().query(`SELECT count(*)::int AS n FROM requests WHERE org_id = $1`, [org.org_id])).rows[0].n).toBe(STREAMS_PER_ORG + 1);
      // A keyed retry of a finished run runs nothing: its replay is streamed without a slot, charged nothing more.
      const replay = await readingStream(org.api_key, list(10), keyed);
      expect(replay.res.status).toBe(200);
      expect(replay.res.headers.get('idempotency-replayed')).toBe('true');
      expect(replay.events.map((e) => e.event)).toEqual(['result']);
      expect(JSON.parse(replay.events[0]!.data)).toEqual(JSON.parse(first.events.at(-1)!.data));
      expect((await db().query(`SELECT count(*)::int AS n FROM requests WHERE org_id = $1`, [org.org_id])).rows[0].n).toBe(STREAMS_PER_ORG + 1);
      // A JSON query of the same organization is not a stream: it is admitted.
      const json = fetch(`${base}/v1/query`, {
        method: 'POST',
        headers: { authorization: `Bearer ${org.api_key}`, 'content-type': 'application/json' },
        body: JSON.stringify({ ...list(10), stream: false }),
      });

      // Another organization's stream opens meanwhile.
      const theirs = readingStream(other.api_key, list(10));
      await until(async () => (await metric('wqs_sse_streams_open')) === STREAMS_PER_ORG + 1, 20_000, 50);
      release();
      expect((await theirs).events.at(-1)!.event).toBe('result');
      expect((await json).status).toBe(200);

      // Once the organization's streams have ended, it opens one again.
      for (const c of clients) c.read();
      await Promise.all(clients.map((c) => c.exited));
      await until(async () => (await metric('wqs_sse_streams_open')) === 0, 20_000, 50);
      const again = await readingStream(org.api_key, list(10));
      expect(again.res.status).toBe(200);
      expect(again.events.at(-1)!.event).toBe('result');
    } finally {
      release?.();
      hold = undefined;
      for (const c of clients) c.kill();
    }
  });
});
