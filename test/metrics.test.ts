// GET /metrics, /livez and /readyz on the real stack. The counters are read from an API process of
// this file's own (on the shared worker's task queue), so every figure is exactly what these tests
// caused; the /readyz 503 comes from an API whose PostgreSQL and Temporal point nowhere.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { freePort } from '../shared/infra/free-port.ts';
import { startApiProcess, startWorkerProcess, type ServiceProcess } from './helpers/processes.ts';
import { startPgProxy } from './helpers/pg-proxy.ts';
import { DEPENDENCY_CHECK_TIMEOUT_MS } from '../apps/api/routes/probes.ts';
import { call, closeDb, db, demo, ledgerOf, newOrg, ownPair, query, stack, until } from './helpers/stack.ts';

const london = { api: '@weather', operation: 'current_weather', input: { city: 'London' } };
// The slow answers below are faults of the shared demo site, set for a city no other test file or
// catalog example asks for, so another file's query cannot take one (a fault for the host alone could).
const berlin = { api: '@weather', operation: 'current_weather', input: { city: 'Berlin' } };

let api: ServiceProcess;
let base: string;

beforeAll(async () => {
  await demo('/__demo/reset');
  const s = stack();
  api = await startApiProcess({ databaseUrl: s.databaseUrl, temporalAddress: s.temporalAddress, hostMap: s.hostMap, taskQueue: s.taskQueue, env: { WQS_SKIP_MIGRATIONS: '1' } });
  base = String(api.started.url);
}, 120_000);
afterAll(async () => {
  await api?.kill();
  await closeDb();
});

interface Sample {
  name: string;
  labels: Record<string, string>;
  value: number;
}

/** The Prometheus text format, sample lines only. */
function parse(text: string): Sample[] {
  const out: Sample[] = [];
  for (const line of text.split('\n')) {
    if (!line || line.startsWith('#')) continue;
    const m = /^([a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{(.*)\})? (\S+)$/.exec(line);
    if (!m) throw new Error(`not a sample line: ${line}`);
    const labels: Record<string, string> = {};
    for (const l of (m[2] ?? '').matchAll(/([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"/g)) labels[l[1]!] = l[2]!;
    out.push({ name: m[1]!, labels, value: Number(m[3]) });
  }
  return out;
}

/** Sum of the samples named `name` whose labels include `labels`. */
const value = (samples: Sample[], name: string, labels: Record<string, string> = {}) =>
  samples.filter((s) => s.name === name && Object.entries(labels).every(([k, v]) => s.labels[k] === v)).reduce((a, s) => a + s.value, 0);

async function scrape(baseUrl = base) {
  const res = await call('GET', '/metrics', { baseUrl });
  expect(res.status, res.text).toBe(200);
  return { res, samples: parse(res.text) };
}

const Q = 'wqs_queries_total';
const HTTP = 'wqs_http_request_duration_seconds';

describe('GET /metrics', () => {
  it('is Prometheus text with the process metrics prefixed wqs_ and the service metrics declared', async () => {
    const { res, samples } = await scrape();
    expect(res.headers.get('content-type')).toMatch(/^text\/plain; version=0\.0\.4/);
    expect(res.headers.get('cache-control')).toBe('no-store');
    expect(value(samples, 'wqs_process_cpu_user_seconds_total')).toBeGreaterThan(0);
    expect(samples.some((s) => s.name === 'wqs_nodejs_eventloop_lag_seconds')).toBe(true);
    for (const name of [Q, 'wqs_query_credits_total', HTTP, 'wqs_sse_streams_open', 'wqs_mcp_exchanges_open', 'wqs_credits']) expect(res.text).toContain(`# TYPE ${name} `);
    // Nothing but our own: prom-client's global registry would also carry the default metrics unprefixed.
    expect(res.text).not.toMatch(/^process_cpu/m);
  });

  it('counts queries once by outcome, code and replay, with the HTTP latency histogram by route pattern', async () => {
    const org = await newOrg(50);
    const idemKey = `metrics-${Date.now()}-${Math.random().toString(36).slice(2)}`;
    const before = (await scrape()).samples;

    const ok = await query(org.api_key, london, { 'idempotency-key': idemKey }, base);
    expect(ok.status, ok.text).toBe(200);
    const replay = await query(org.api_key, london, { 'idempotency-key': idemKey }, base);
    expect(replay.status).toBe(200);
    expect(replay.headers.get('idempotency-replayed')).toBe('true');
    const bad = await query(org.api_key, { api: '@weather', operation: 'current_weather', input: { city: 'London' }, nonsense: 1 }, {}, base);
    expect(bad.status).toBe(400);
    expect(bad.body.error.code).toBe('invalid_input');
    const anonymous = await call('POST', '/v1/query', { body: london, baseUrl: base });
    expect(anonymous.status).toBe(401);
    const unknownId = `req_${Math.random().toString(36).slice(2)}notaroute`;
    expect((await call('GET', `/nowhere/${unknownId}`, { baseUrl: base })).status).toBe(404);

    const { res, samples } = await scrape();
    const delta = (name: string, labels: Record<string, string>) => value(samples, name, labels) - value(before, name, labels);
    expect(delta(Q, { transport: 'json', outcome: 'success', code: 'none', replayed: 'false' })).toBe(1);
    expect(delta(Q, { transport: 'json', outcome: 'success', code: 'none', replayed: 'true' })).toBe(1);
    expect(delta(Q, { transport: 'json', outcome: 'error', code: 'invalid_input', replayed: 'false' })).toBe(1);
    expect(delta(Q, { transport: 'json', outcome: 'error', code: 'api_key_required', replayed: 'false' })).toBe(1);
    expect(delta(Q, {})).toBe(4);

    // The receipt of the first delivery: 1 credit reserved and settled; the replay adds nothing.
    expect(ok.body.data.receipt.billing).toMatchObject({ status: 'settled', reserved_credits: 1, charged_credits: 1 });
    expect(delta('wqs_query_credits_total', { event: 'reserved' })).toBe(1);
    expect(delta('wqs_query_credits_total', { event: 'settled' })).toBe(1);
    expect(delta('wqs_query_credits_total', { event: 'released' })).toBe(0);

    // Routes by pattern and status; every request observed once in the histogram.
    const post = (status: string) => ({ route: '/v1/query', method: 'POST', status });
    expect(delta(`${HTTP}_count`, post('200'))).toBe(2);
    expect(delta(`${HTTP}_count`, post('400'))).toBe(1);
    expect(delta(`${HTTP}_count`, post('401'))).toBe(1);
    expect(delta(`${HTTP}_count`, { route: 'unmatched', method: 'GET', status: '404' })).toBe(1);
    const buckets = samples.filter((s) => s.name === `${HTTP}_bucket` && s.labels.route === '/v1/query' && s.labels.status === '200').map((s) => s.labels.le);
    expect(buckets).toEqual(['0.001', '0.0025', '0.005', '0.01', '0.025', '0.05', '0.1', '0.25', '0.5', '1', '2.5', '5', '10', '30', '60', '120', '180', '+Inf']);
    // The run took more than a millisecond: the first bucket holds fewer than +Inf.
    expect(value(samples, `${HTTP}_bucket`, { ...post('200'), le: '0.001' })).toBeLessThan(value(samples, `${HTTP}_bucket`, { ...post('200'), le: '+Inf' }));
    expect(value(samples, `${HTTP}_sum`, post('200'))).toBeGreaterThan(0);

    // No organization's data and no raw URL anywhere.
    for (const secret of [org.org_id, org.api_key, idemKey, ok.body.data.receipt.request_id, unknownId, 'London']) expect(res.text).not.toContain(secret);
    expect(new Set(samples.map((s) => s.labels.route).filter(Boolean))).not.toContain(`/nowhere/${unknownId}`);

    // Again: the counters only grow.
    const again = await query(org.api_key, london, {}, base);
    expect(again.status).toBe(200);
    const later = (await scrape()).samples;
    expect(value(later, Q, { outcome: 'success', replayed: 'false' })).toBe(value(samples, Q, { outcome: 'success', replayed: 'false' }) + 1);
    expect(value(later, 'wqs_query_credits_total', { event: 'settled' })).toBe(value(samples, 'wqs_query_credits_total', { event: 'settled' }) + 1);
  }, 120_000);

  it('reads the credit totals from the ledger at each scrape: the balance invariant holds, charges show up', async () => {
    const org = await newOrg(7);
    const before = (await scrape()).samples;
    expect(value(before, 'wqs_credits_scrape_success')).toBe(1);
    const c = (s: Sample[], state: string) => value(s, 'wqs_credits', { state });
    expect(c(before, 'granted')).toBe(c(before, 'available') + c(before, 'reserved') + c(before, 'charged'));
    expect(c(before, 'granted')).toBeGreaterThanOrEqual(7);
    const ok = await query(org.api_key, london, {}, base);
    expect(ok.status, ok.text).toBe(200);
    // Other organizations may be charged meanwhile: the total grows by at least this charge.
    const after = (await scrape()).samples;
    expect(c(after, 'charged')).toBeGreaterThanOrEqual(c(before, 'charged') + 1);
    expect(c(after, 'granted')).toBe(c(after, 'available') + c(after, 'reserved') + c(after, 'charged'));
  }, 120_000);

  it('scrapes at once share one read of the credit totals: anonymous callers cannot take the pool every organization\'s requests need', async () => {
    const org = await newOrg(1); // before the lock: creating one writes credit_balances
    // The totals' read held up (a slow aggregate over many organizations, a busy database): a
    // transaction of the test's own locks the table, so every read of it waits.
    const lock = await db().connect();
    const waiting = async () =>
      Number(
        (
          await db().query(
            `SELECT count(*)::int AS n FROM pg_stat_activity WHERE wait_event_type = 'Lock' AND query LIKE '%coalesce(sum(granted), 0)%FROM credit_balances%' AND pid <> pg_backend_pid()`,
          )
        ).rows[0].n,
      );
    let scrapes: Promise<Array<{ status: number; text: string }>> | undefined;
    try {
      await lock.query('BEGIN');
      await lock.query('LOCK TABLE credit_balances IN ACCESS EXCLUSIVE MODE');
      scrapes = Promise.all(Array.from({ length: 40 }, () => call('GET', '/metrics', { baseUrl: base })));
      await until(async () => (await waiting()) >= 1);
      await new Promise((r) => setTimeout(r, 1_000)); // time for any further reads to be sent
      expect(await waiting()).toBe(1);
      // Meanwhile an organization's request still gets a connection at once.
      const started = Date.now();
      const auth = await call('GET', '/v1/auth', { key: org.api_key, baseUrl: base });
      expect(auth.status, auth.text).toBe(200);
      expect(Date.now() - started).toBeLessThan(2_000);
    } finally {
      await lock.query('ROLLBACK');
      lock.release();
    }
    // Every scrape then answers with figures read for it, and says so.
    for (const a of await scrapes!) {
      expect(a.status).toBe(200);
      const samples = parse(a.text);
      expect(value(samples, 'wqs_credits_scrape_success')).toBe(1);
      expect(value(samples, 'wqs_credits', { state: 'granted' })).toBeGreaterThanOrEqual(1);
    }
  }, 120_000);

  it('counts streamed answers as sse and opens and closes the stream gauge; MCP exchanges likewise', async () => {
    const org = await newOrg(10);
    const before = (await scrape()).samples;
    const res = await fetch(`${base}/v1/query`, {
      method: 'POST',
      headers: { authorization: `Bearer ${org.api_key}`, 'content-type': 'application/json', accept: 'text/event-stream' },
      body: JSON.stringify({ ...london, stream: true }),
    });
    expect(res.headers.get('content-type')).toMatch(/^text\/event-stream/);
    const text = await res.text();
    expect(text).toContain('event: result');

    const mcp = await call('POST', '/mcp', {
      key: org.api_key,
      baseUrl: base,
      body: { jsonrpc: '2.0', id: 1, method: 'initialize', params: { protocolVersion: '2025-06-18', capabilities: {}, clientInfo: { name: 'metrics-test', version: '1' } } },
      headers: { accept: 'application/json, text/event-stream' },
    });
    expect(mcp.status).toBe(200);

    // Hijacked answers are observed when their response finishes.
    const after = await until(async () => {
      const s = (await scrape()).samples;
      return value(s, `${HTTP}_count`, { route: '/mcp', method: 'POST', status: '200' }) > value(before, `${HTTP}_count`, { route: '/mcp', method: 'POST', status: '200' }) && s;
    });
    expect(value(after, Q, { transport: 'sse', outcome: 'success', code: 'none', replayed: 'false' }) - value(before, Q, { transport: 'sse', outcome: 'success', code: 'none', replayed: 'false' })).toBe(1);
    expect(value(after, Q, { transport: 'json' }) - value(before, Q, { transport: 'json' })).toBe(0);
    expect(value(after, `${HTTP}_count`, { route: '/v1/query', method: 'POST', status: '200' }) - value(before, `${HTTP}_count`, { route: '/v1/query', method: 'POST', status: '200' })).toBe(1);
    expect(value(after, 'wqs_sse_streams_open')).toBe(0);
    expect(value(after, 'wqs_mcp_exchanges_open')).toBe(0);
  }, 120_000);

  it('a stream its client leaves before the terminal event counts once as closed, and the gauge goes back to 0', async () => {
    const org = await newOrg(10);
    const before = (await scrape()).samples;
    await demo('/__demo/faults', { host: 'weather.example.test', path_prefix: '/api/v1/current?city=Berlin', latency_ms: 2500, times: 1 });
    const ac = new AbortController();
    const res = await fetch(`${base}/v1/query`, {
      method: 'POST',
      headers: { authorization: `Bearer ${org.api_key}`, 'content-type': 'application/json', accept: 'text/event-stream' },
      body: JSON.stringify({ ...berlin, stream: true }),
      signal: ac.signal,
    });
    const reader = res.body!.getReader();
    let seen = '';
    while (!seen.includes('event: progress')) {
      const { done, value: chunk } = await reader.read();
      if (done) break;
      seen += new TextDecoder().decode(chunk);
    }
    expect(seen).toContain('event: progress');
    const open = (await scrape()).samples;
    expect(value(open, 'wqs_sse_streams_open')).toBe(1);
    ac.abort();
    const closed = { transport: 'sse', outcome: 'closed', code: 'none', replayed: 'false' };
    const after = await until(async () => {
      const s = (await scrape()).samples;
      return value(s, Q, closed) > value(before, Q, closed) && s;
    }, 60_000);
    expect(value(after, Q, closed) - value(before, Q, closed)).toBe(1);
    expect(value(after, Q, { transport: 'sse', outcome: 'success' }) - value(before, Q, { transport: 'sse', outcome: 'success' })).toBe(0);
    expect(value(after, 'wqs_sse_streams_open')).toBe(0);
    await demo('/__demo/reset');
  }, 120_000);
});

describe('a caller who leaves', () => {
  it('POST /v1/query left before its answer counts once as closed, at once; the run goes on, billed once, and its key gives the result', async () => {
    // The site answers 4 s late: the caller leaves while the run waits on it. The demo's faults are
    // shared by every test file, and another file's /__demo/reset can clear this one before the run
    // reaches the site; then the run ends at once and the case is set up again, with a new organization.
    let org!: Awaited<ReturnType<typeof newOrg>>;
    let key!: string;
    let before!: Awaited<ReturnType<typeof scrape>>['samples'];
    let ac!: AbortController;
    let pending!: Promise<Response | Error>;
    let row: { id: string } | undefined;
    for (let attempt = 0; attempt < 3 && !row; attempt++) {
      org = await newOrg(10);
      key = `left-${Date.now()}-${Math.random().toString(36).slice(2)}`;
      before = (await scrape()).samples;
      await demo('/__demo/faults', { host: 'weather.example.test', path_prefix: '/api/v1/current?city=Berlin', latency_ms: 4000, times: 1 });
      ac = new AbortController();
      pending = fetch(`${base}/v1/query`, {
        method: 'POST',
        headers: { authorization: `Bearer ${org.api_key}`, 'content-type': 'application/json', 'idempotency-key': key },
        body: JSON.stringify(berlin),
        signal: ac.signal,
      }).catch((err: Error) => err);
      const seen = await until(async () => {
        const r = (await db().query(`SELECT id, status FROM requests WHERE org_id = $1`, [org.org_id])).rows[0] as { id: string; status: string } | undefined;
        return r && r.status !== 'reserving' ? r : undefined;
      });
      if (seen.status === 'processing') row = seen;
      else await pending; // finished without the delay: the fault was cleared
    }
    if (!row) throw new Error('the site delay was cleared three times by other test files');
    const leftAt = Date.now();
    ac.abort();
    expect(await pending).toBeInstanceOf(Error);
    const closed = { transport: 'json', outcome: 'closed', code: 'none', replayed: 'false' };
    const after = await until(async () => {
      const s = (await scrape()).samples;
      return value(s, Q, closed) > value(before, Q, closed) && s;
    }, 10_000, 50);
    // Counted while the run still waits on the site: the API stopped waiting when the caller left.
    expect(Date.now() - leftAt).toBeLessThan(2_000);
    expect((await db().query(`SELECT status FROM requests WHERE id = $1`, [row.id])).rows[0].status).toBe('processing');
    expect(value(after, Q, closed) - value(before, Q, closed)).toBe(1);
    expect(value(after, HTTP + '_count', { route: '/v1/query', method: 'POST', status: '499' }) - value(before, HTTP + '_count', { route: '/v1/query', method: 'POST', status: '499' })).toBe(1);
    // The run finished without its caller: the key gives its result, charged once.
    const res = await until(async () => {
      const r = await query(org.api_key, berlin, { 'idempotency-key': key }, base);
      return r.status === 200 ? r : undefined;
    }, 30_000, 250);
    expect(res.headers.get('idempotency-replayed')).toBe('true');
    expect(res.body.data.receipt).toMatchObject({ request_id: row.id, billing: { status: 'settled', reserved_credits: 1, charged_credits: 1 } });
    expect(await ledgerOf(org.org_id)).toEqual([
      { request_id: row.id, kind: 'reserve', amount: 1 },
      { request_id: row.id, kind: 'settle', amount: 1 },
    ]);
    const final = (await scrape()).samples;
    const firstDelivery = { transport: 'json', outcome: 'success', replayed: 'false' };
    expect(value(final, Q, firstDelivery) - value(before, Q, firstDelivery)).toBe(0);
    expect(value(final, Q, closed) - value(before, Q, closed)).toBe(1);
    await demo('/__demo/reset');
  }, 120_000);
});

describe('worker metrics', () => {
  it('WORKER_METRICS_ADDRESS serves the Temporal SDK metrics of the worker in Prometheus format', async () => {
    const port = await freePort();
    const worker = await startWorkerProcess(ownPair('metrics-worker', { WORKER_METRICS_ADDRESS: `127.0.0.1:${port}` }));
    try {
      expect(worker.started.metrics).toBe(`http://127.0.0.1:${port}/metrics`);
      const text = await until(async () => {
        const r = await fetch(`http://127.0.0.1:${port}/metrics`).catch(() => undefined);
        const t = r?.ok ? await r.text() : '';
        return t.includes('temporal_worker_task_slots_available') && t;
      }, 60_000);
      expect(text).toMatch(/^# TYPE temporal_\w+ /m);
      expect(text).toContain('task_queue="metrics-worker-');
    } finally {
      await worker.kill();
    }
  }, 120_000);
});

describe('liveness and readiness', () => {
  it('/livez is 200 {status:ok}; /readyz is the /health envelope, 200 when PostgreSQL and Temporal answer', async () => {
    const live = await call('GET', '/livez', { baseUrl: base });
    expect(live.status).toBe(200);
    expect(live.body).toEqual({ status: 'ok' });
    const ready = await call('GET', '/readyz', { baseUrl: base });
    expect(ready.status, ready.text).toBe(200);
    expect(ready.body).toMatchObject({ status: 'ok', service: 'workflow-query-service', checks: { postgres: { status: 'ok' }, temporal: { status: 'ok' }, draining: false } });
    expect(Object.keys(ready.body).sort()).toEqual(['checks', 'service', 'status', 'timestamp', 'uptime_seconds']);
  });

  it('on SIGTERM with DRAIN_DELAY_MS: /readyz turns 503 (checks.draining) while the API still serves, then the process exits; METRICS_ENABLED=false hides /metrics', async () => {
    const s = stack();
    const draining = await startApiProcess({
      databaseUrl: s.databaseUrl,
      temporalAddress: s.temporalAddress,
      hostMap: s.hostMap,
      taskQueue: s.taskQueue,
      env: { WQS_SKIP_MIGRATIONS: '1', DRAIN_DELAY_MS: '12000', METRICS_ENABLED: 'false' },
    });
    const b = String(draining.started.url);
    try {
      expect((await call('GET', '/readyz', { baseUrl: b })).status).toBe(200);
      // METRICS_ENABLED=false: no /metrics at all (the ordinary 404 envelope), and not in the document.
      const off = await call('GET', '/metrics', { baseUrl: b });
      expect(off.status).toBe(404);
      expect(off.body.error.code).toBeDefined();
      expect((await call('GET', '/openapi.json', { baseUrl: b })).body.paths['/metrics']).toBeUndefined();
      const exited = new Promise<number | null>((resolve) => draining.proc.once('exit', (code) => resolve(code)));
      draining.proc.kill('SIGTERM');
      const ready = await until(async () => {
        const r = await call('GET', '/readyz', { baseUrl: b });
        return r.status === 503 && r;
      }, 11_000, 100);
      expect(ready.body).toMatchObject({ status: 'degraded', checks: { postgres: { status: 'ok' }, temporal: { status: 'ok' }, draining: true } });
      // Still serving meanwhile: liveness and ordinary routes answer.
      expect((await call('GET', '/livez', { baseUrl: b })).status).toBe(200);
      expect((await call('GET', '/health', { baseUrl: b })).status).toBe(200);
      expect(await exited).toBe(0);
    } finally {
      await draining.kill('SIGKILL');
    }
  }, 120_000);

  // An API process of its own whose PostgreSQL goes through a proxy holding the dependency check's
  // `SELECT 1` back (a slow or hung database for that statement alone; it takes no lock a test could hold).
  async function apiBehindProxy(env: Record<string, string> = {}, matches: (sql: string) => boolean = (sql) => sql === 'SELECT 1') {
    const s = stack();
    const proxy = await startPgProxy(s.databaseUrl, matches);
    const p = await startApiProcess({ databaseUrl: proxy.url, temporalAddress: s.temporalAddress, hostMap: s.hostMap, taskQueue: s.taskQueue, env: { WQS_SKIP_MIGRATIONS: '1', ...env } });
    return { proxy, p, b: String(p.started.url) };
  }

  it("probes at once share one dependency check: anonymous /health and /readyz cannot take the pool every organization's requests need", async () => {
    const org = await newOrg(1);
    const { proxy, p, b } = await apiBehindProxy();
    try {
      expect((await call('GET', '/health', { baseUrl: b })).status).toBe(200);
      const before = proxy.matched();
      proxy.hold();
      const probes = Promise.all(Array.from({ length: 80 }, (_, i) => call('GET', i % 2 ? '/readyz' : '/health', { baseUrl: b }).then((r) => ({ path: i % 2 ? '/readyz' : '/health', ...r }))));
      let keyed;
      let keyedMs = 0;
      try {
        await until(async () => proxy.held() >= 1, 10_000, 20);
        await new Promise((r) => setTimeout(r, 400)); // time for any further checks to be sent
        // One check in flight for the whole process (each held one would be a pool connection taken).
        expect(proxy.held()).toBe(1);
        const started = Date.now();
        keyed = await call('GET', '/v1/auth', { key: org.api_key, baseUrl: b });
        keyedMs = Date.now() - started;
        expect(proxy.held()).toBe(1);
      } finally {
        proxy.release();
      }
      // Meanwhile an organization's request got a connection at once.
      expect(keyed.status, keyed.text).toBe(200);
      expect(keyedMs).toBeLessThan(1_000);
      // Every probe then answers from that one check, in its own shape.
      for (const r of await probes) {
        expect(r.status, r.text).toBe(200);
        expect(r.body).toMatchObject({ status: 'ok', service: 'workflow-query-service', checks: { postgres: { status: 'ok' }, temporal: { status: 'ok' } } });
        expect(Object.keys(r.body.checks)).toEqual(r.path === '/readyz' ? ['postgres', 'temporal', 'draining', 'duration_ms'] : ['postgres', 'temporal', 'duration_ms']);
        if (r.path === '/readyz') expect(r.body.checks.draining).toBe(false);
      }
      expect(proxy.matched() - before).toBe(1);
      // Settled, the next probe checks afresh (no result is kept beyond its check).
      expect((await call('GET', '/health', { baseUrl: b })).status).toBe(200);
      expect(proxy.matched() - before).toBe(2);
    } finally {
      await p.kill();
      await proxy.close();
    }
  }, 120_000);

  it('GET / at once shares one count of the public workflows: anonymous discovery cannot take the pool either', async () => {
    const org = await newOrg(1);
    const { proxy, p, b } = await apiBehindProxy({}, (sql) => sql.includes('count(*)::int AS n FROM apis'));
    try {
      const first = await call('GET', '/', { baseUrl: b });
      expect(first.status).toBe(200);
      const before = proxy.matched();
      proxy.hold();
      const answers = Promise.all(Array.from({ length: 40 }, () => call('GET', '/', { baseUrl: b })));
      let keyed;
      try {
        await until(async () => proxy.held() >= 1, 10_000, 20);
        await new Promise((r) => setTimeout(r, 400)); // time for any further reads to be sent
        expect(proxy.held()).toBe(1);
        keyed = await call('GET', '/v1/auth', { key: org.api_key, baseUrl: b });
      } finally {
        proxy.release();
      }
      expect(keyed.status, keyed.text).toBe(200);
      for (const r of await answers) {
        expect(r.status, r.text).toBe(200);
        expect(r.body.data.registered_providers).toBe(first.body.data.registered_providers);
      }
      expect(proxy.matched() - before).toBe(1);
    } finally {
      await p.kill();
      await proxy.close();
    }
  }, 120_000);

  it('/readyz reads draining after the shared check: a drain that began while the check ran shows in its answer', async () => {
    const { proxy, p, b } = await apiBehindProxy({ DRAIN_DELAY_MS: '12000' });
    try {
      expect((await call('GET', '/readyz', { baseUrl: b })).status).toBe(200);
      proxy.hold();
      let ready;
      try {
        ready = call('GET', '/readyz', { baseUrl: b });
        await until(async () => proxy.held() >= 1, 1_000, 10);
        p.proc.kill('SIGTERM'); // draining from now on, while the check is in flight
        await new Promise((r) => setTimeout(r, 300));
      } finally {
        proxy.release();
      }
      const r = await ready;
      expect(r.status, r.text).toBe(503);
      expect(r.body).toMatchObject({ status: 'degraded', checks: { postgres: { status: 'ok' }, temporal: { status: 'ok' }, draining: true } });
    } finally {
      await p.kill('SIGKILL');
      await proxy.close();
    }
  }, 120_000);

  it('a hung PostgreSQL: /health and /readyz answer 503 (postgres down) once the check times out, one check at a time, and keyed requests go on', async () => {
    const org = await newOrg(1);
    const { proxy, p, b } = await apiBehindProxy();
    try {
      expect((await call('GET', '/readyz', { baseUrl: b })).status).toBe(200);
      proxy.hold(); // never released: the check's statement never reaches PostgreSQL
      let most = 0;
      const watch = setInterval(() => (most = Math.max(most, proxy.held())), 20);
      try {
        for (let round = 0; round < 2; round++) {
          const started = Date.now();
          const answers = await Promise.all(Array.from({ length: 20 }, (_, i) => call('GET', i % 2 ? '/readyz' : '/health', { baseUrl: b })));
          expect(Date.now() - started).toBeLessThan(DEPENDENCY_CHECK_TIMEOUT_MS + 1_500);
          for (const [i, r] of answers.entries()) {
            expect(r.status, r.text).toBe(503);
            expect(r.body).toMatchObject({ status: 'degraded', checks: { postgres: { status: 'down' }, temporal: { status: 'ok' }, ...(i % 2 ? { draining: false } : {}) } });
          }
          const keyed = await call('GET', '/v1/auth', { key: org.api_key, baseUrl: b });
          expect(keyed.status, keyed.text).toBe(200);
        }
        // The timed-out check's connection is given up, not left holding a slot of the pool.
        await until(async () => proxy.held() === 0, 5_000, 20);
      } finally {
        clearInterval(watch);
        proxy.release();
      }
      expect(most).toBe(1);
      expect((await call('GET', '/health', { baseUrl: b })).status).toBe(200);
    } finally {
      await p.kill();
      await proxy.close();
    }
  }, 120_000);

  it('an API whose PostgreSQL and Temporal point nowhere: /livez 200, /readyz 503 degraded, /metrics 200 without credit figures', async () => {
    const broken = await startApiProcess({
      databaseUrl: `postgres://postgres:postgres@127.0.0.1:${await freePort()}/wqs`,
      temporalAddress: `127.0.0.1:${await freePort()}`,
      hostMap: {},
      taskQueue: 'unused',
      env: { WQS_SKIP_MIGRATIONS: '1' },
    });
    try {
      const b = String(broken.started.url);
      const live = await call('GET', '/livez', { baseUrl: b });
      expect(live.status).toBe(200);
      expect(live.body).toEqual({ status: 'ok' });
      const ready = await call('GET', '/readyz', { baseUrl: b });
      expect(ready.status).toBe(503);
      expect(ready.body).toMatchObject({ status: 'degraded', checks: { postgres: { status: 'down' }, temporal: { status: 'down' }, draining: false } });
      expect(ready.text).not.toMatch(/ECONNREFUSED|at .*\.ts:\d+/);
      // A scrape never fails for want of PostgreSQL: the credit figures are absent and say so.
      const { samples } = await scrape(b);
      expect(value(samples, 'wqs_credits_scrape_success')).toBe(0);
      expect(samples.filter((x) => x.name === 'wqs_credits')).toEqual([]);
      expect(value(samples, 'wqs_process_cpu_user_seconds_total')).toBeGreaterThan(0);
    } finally {
      await broken.kill();
    }
  }, 120_000);
});
