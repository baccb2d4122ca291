// The SSE writer (apps/api/plugins/sse-writer.ts) over a real HTTP server and a real client that
// reads nothing (test/helpers/tiny-window-client.py): while the socket is backed up, progress events
// supersede each other, keep-alives are not written, and ids stay 1, 2, 3… in what the client gets.
import { spawn } from 'node:child_process';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import path from 'node:path';
import { createParser, type EventSourceMessage } from 'eventsource-parser';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { SseWriter, type Delivery } from '../apps/api/plugins/sse-writer.ts';

const CLIENT = path.join(import.meta.dirname, 'helpers/tiny-window-client.py');
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

let server: http.Server;
let onRequest: (res: http.ServerResponse) => void = () => undefined;
beforeAll(async () => {
  server = http.createServer((_req, res) => onRequest(res));
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
});
afterAll(() => new Promise((resolve) => server.close(resolve)));

function client() {
  const port = (server.address() as AddressInfo).port;
  const request = Buffer.from('GET / HTTP/1.1\r\nhost: 127.0.0.1\r\nconnection: close\r\n\r\n').toString('hex');
  const child = spawn('python3', [CLIENT, '127.0.0.1', String(port), request], { stdio: ['pipe', 'pipe', 'ignore'] });
  const chunks: Buffer[] = [];
  child.stdout.on('data', (c: Buffer) => chunks.push(c));
  const exited = new Promise<void>((resolve) => child.on('exit', () => resolve()));
  return { child, exited, body: () => Buffer.concat(chunks).toString('latin1') };
}

describe('SseWriter with a client that is not reading', () => {
  it('keeps only the latest progress event and no keep-alive while backed up; ids follow what is written', async () => {
    let coalesced = 0;
    let writer!: SseWriter;
    const opened = new Promise<void>((resolve) => {
      onRequest = (res) => {
        res.writeHead(200, { 'content-type': 'text/event-stream' });
        writer = new SseWriter(res, { maxBufferedBytes: 64 * 1024 * 1024, drainTimeoutMs: 60_000, onCoalesced: () => coalesced++ });
        resolve();
      };
    });
    const c = client();
    try {
      await opened;
      // 300 KB: far more than the client's window and its kernel take.
      writer.sendProgress({ stage: 'big', pad: 'x'.repeat(300_000) });
      for (const stage of ['a', 'b', 'c']) {
        await sleep(100);
        writer.keepAlive();
        writer.sendProgress({ stage });
      }
      expect(coalesced).toBe(2); // a and b, each replaced before it could be written
      const done: Promise<Delivery> = writer.sendTerminal('result', { success: true });
      expect(writer.buffered).toBeGreaterThan(100_000);
      c.child.stdin.end('read\n');
      expect(await done).toBe('delivered');
      await c.exited;
      const body = c.body();
      const events: EventSourceMessage[] = [];
      const parser = createParser({ onEvent: (e) => events.push(e) });
      parser.feed(body.slice(body.indexOf('\r\n\r\n') + 4).replace(/\r\n[0-9a-f]+\r\n/g, ''));
      expect(events.map((e) => [e.id, e.event, JSON.parse(e.data).stage ?? JSON.parse(e.data).success])).toEqual([
        ['1', 'progress', 'big'],
        ['2', 'progress', 'c'],
        ['3', 'result', true],
      ]);
      expect(body).not.toContain(': keep-alive');
    } finally {
      c.child.kill('SIGKILL');
    }
  });

  it('with the client reading, every progress event and keep-alive is written', async () => {
    let coalesced = 0;
    let writer!: SseWriter;
    const opened = new Promise<void>((resolve) => {
      onRequest = (res) => {
        res.writeHead(200, { 'content-type': 'text/event-stream' });
        writer = new SseWriter(res, { maxBufferedBytes: 64 * 1024, drainTimeoutMs: 60_000, onCoalesced: () => coalesced++ });
        resolve();
      };
    });
    const c = client();
    try {
      await opened;
      c.child.stdin.end('read\n');
      for (const stage of ['a', 'b', 'c']) {
        writer.sendProgress({ stage });
        await sleep(50);
        writer.keepAlive();
      }
      expect(await writer.sendTerminal('error', { success: false })).toBe('delivered');
      await c.exited;
      expect(coalesced).toBe(0);
      const body = c.body();
      expect(body.match(/: keep-alive/g)).toHaveLength(3);
      expect([...body.matchAll(/^id: (\d+)\nevent: (\w+)$/gm)].map((m) => `${m[1]} ${m[2]}`)).toEqual(['1 progress', '2 progress', '3 progress', '4 error']);
    } finally {
      c.child.kill('SIGKILL');
    }
  });
});
