// A client that stops reading its answers has its connection closed after
// RESPONSE_STALL_TIMEOUT_MS (apps/api/plugins/stalled-connections.ts): what waits to be written
// is held in the API's memory until then. A slow reader, and a query waiting longer than the
// timeout for its result (nothing to write meanwhile), are never cut.
import net from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startApiProcess, type ServiceProcess } from './helpers/processes.ts';
import { closeDb, demo, newOrg, ownPair, stack, until } from './helpers/stack.ts';

const STALL_MS = 2_000;
let api: ServiceProcess;
let port: number;
let base: string;

beforeAll(async () => {
  // The stack's task queue: its worker answers this API's queries.
  api = await startApiProcess({ ...ownPair('stall', { WQS_SKIP_MIGRATIONS: '1', RESPONSE_STALL_TIMEOUT_MS: String(STALL_MS) }), taskQueue: stack().taskQueue });
  base = String(api.started.url).replace(/\/$/, '');
  port = Number(new URL(base).port);
}, 60_000);
afterAll(async () => {
  await api?.kill('SIGKILL');
  await demo('/__demo/faults', undefined).catch(() => undefined);
  await closeDb();
});

/** A connection sending `n` pipelined GET /openapi.json (95 KB each, no key needed). */
function pipelined(n: number) {
  const socket = net.connect(port, '127.0.0.1');
  socket.on('error', () => undefined);
  const closed = new Promise<number>((resolve) => socket.once('close', () => resolve(Date.now())));
  socket.once('connect', () => socket.write('GET /openapi.json HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n'.repeat(n)));
  return { socket, closed };
}

const stalledClosed = async () => {
  const text = await (await fetch(`${base}/metrics`)).text();
  return Number(/^wqs_stalled_connections_closed_total (\d+)/m.exec(text)?.[1] ?? NaN);
};

describe('connections whose client stopped reading', () => {
  it('are closed once nothing has been taken for the timeout, freeing what waited; the metric counts them', async () => {
    const before = await stalledClosed();
    const started = Date.now();
    const clients = Array.from({ length: 5 }, () => pipelined(400));
    for (const c of clients) c.socket.pause(); // never reads
    // A paused socket does not read the server's reset: the server's count says when it closed them.
    await until(async () => (await stalledClosed()) === before + 5, 20_000, 100);
    expect(Date.now() - started).toBeGreaterThanOrEqual(STALL_MS);
    // Reading now finds each connection ended, with a small part of its 400 answers (38 MB) sent.
    let bytes = 0;
    for (const c of clients) {
      c.socket.on('data', (d: Buffer) => (bytes += d.length));
      c.socket.resume();
    }
    await Promise.all(clients.map((c) => c.closed));
    expect(bytes).toBeLessThan(5 * 400 * 95_000 * 0.5);
  });

  it('a slow reader, pausing less than the timeout between reads, gets every answer whole', async () => {
    const n = 100; // 9.5 MB
    const c = pipelined(n);
    let received = '';
    let closedEarly = false;
    let sinceWake = 0;
    c.socket.setEncoding('latin1');
    c.socket.pause();
    // At most about 2 MB at a time, then 1.2 s without reading (under the 2 s timeout).
    c.socket.on('data', (d: string) => {
      received += d;
      sinceWake += d.length;
      if (sinceWake >= 2_000_000) c.socket.pause();
    });
    c.socket.on('close', () => (closedEarly = true));
    const answers = () => received.split('HTTP/1.1 200 OK').length - 1;
    const deadline = Date.now() + 60_000;
    let pauses = 0;
    while (answers() < n || !received.trimEnd().endsWith('}')) {
      expect(Date.now(), 'the slow reader did not get its answers in time').toBeLessThan(deadline);
      await new Promise((r) => setTimeout(r, 1_200));
      pauses++;
      sinceWake = 0;
      c.socket.resume();
      await new Promise((r) => setTimeout(r, 50));
    }
    expect(closedEarly).toBe(false);
    expect(answers()).toBe(n);
    expect(pauses).toBeGreaterThanOrEqual(3); // longer in all than the timeout
    c.socket.destroy();
  });

  it('a query whose result takes longer than the timeout is answered: a connection with nothing to write is never cut', async () => {
    const org = await newOrg(5);
    await demo('/__demo/faults', { host: 'weather.example.test', path_prefix: '/api/v1/current', latency_ms: STALL_MS * 2, times: 1 });
    const res = await fetch(`${base}/v1/query`, {
      method: 'POST',
      headers: { authorization: `Bearer ${org.api_key}`, 'content-type': 'application/json' },
      body: JSON.stringify({ api: '@weather', operation: 'current_weather', input: { city: 'London' } }),
    });
    expect(res.status).toBe(200);
    expect(((await res.json()) as { success: boolean }).success).toBe(true);
  });
});
