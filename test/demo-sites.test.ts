import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { ProxyAgent, request } from 'undici';
import net from 'node:net';
import { startDemoSites, demoSiteIcons, type DemoSites } from '../apps/demo-sites/server.ts';

let sites: DemoSites;
let proxy: ProxyAgent;

beforeAll(async () => {
  sites = await startDemoSites({ port: 0 });
  proxy = new ProxyAgent({ uri: sites.origin, proxyTunnel: false });
});
afterAll(async () => {
  await proxy?.close();
  await sites?.close();
});
beforeEach(async () => {
  await fetch(`${sites.origin}/__demo/reset`, { method: 'POST' });
});

/** Request a demo host through the server acting as an HTTP forward proxy (absolute-form). */
async function get(url: string, headers: Record<string, string> = {}) {
  const res = await request(url, { dispatcher: proxy, headers });
  return { status: res.statusCode, headers: res.headers, text: await res.body.text() };
}
async function post(url: string, body: string, headers: Record<string, string> = {}) {
  const res = await request(url, { method: 'POST', dispatcher: proxy, body, headers: { 'content-type': 'application/x-www-form-urlencoded', ...headers } });
  return { status: res.statusCode, headers: res.headers, text: await res.body.text() };
}
const state = async () => (await (await fetch(`${sites.origin}/__demo/state`)).json()) as { orders: number; bookings: number; requests: Record<string, number> };

describe('demo sites server', () => {
  it('exposes hosts, host map and icons', () => {
    expect(sites.origin).toMatch(/^http:\/\/127\.0\.0\.1:\d+$/);
    expect(sites.hosts).toEqual(expect.arrayContaining(['books.example.test', 'weather.example.test', 'jobs.example.test', 'shop.example.test', 'clinic.example.test', 'news.example.test']));
    for (const h of sites.hosts) {
      expect(sites.hostMap[h]).toBe(`127.0.0.1:${sites.port}`);
      expect(demoSiteIcons[h].content_type).toBe('image/svg+xml');
    }
  });

  it('serves books via absolute-form proxy requests with rel=next pagination', async () => {
    const r = await get('http://books.example.test/search?q=');
    expect(r.status).toBe(200);
    expect(r.headers['content-type']).toMatch(/text\/html/);
    expect(r.text.match(/class="book product"/g)).toHaveLength(10);
    expect(r.text).toContain('rel="next"');
    const last = await get('http://books.example.test/search?q=&page=4');
    expect(last.text.match(/class="book product"/g)).toHaveLength(5);
    expect(last.text).not.toContain('rel="next"');
    const isbn = /data-isbn="(\d{13})"/.exec(r.text)![1];
    const detail = await get(`http://books.example.test/books/${isbn}`);
    expect(detail.text).toMatch(/class="price"[^>]*>.*£\d+\.\d{2}/);
    expect((await get('http://books.example.test/books/9780000000000')).status).toBe(404);
    const icon = await get('http://books.example.test/favicon.svg');
    expect(icon.headers['content-type']).toBe('image/svg+xml');
  });

  it('dispatches on the Host header and rejects unknown hosts and CONNECT', async () => {
    const r = await request(`${sites.origin}/api/v1/current?city=London`, { headers: { host: 'weather.example.test' } });
    expect(r.statusCode).toBe(200);
    expect(await r.body.json()).toMatchObject({ city: 'London', country: 'GB', temperature_c: expect.any(Number) });
    expect((await get('http://unknown.example.test/')).status).toBe(502);
    const line = await new Promise<string>((resolve, reject) => {
      const s = net.connect(sites.port, '127.0.0.1', () => s.write('CONNECT books.example.test:443 HTTP/1.1\r\nHost: books.example.test:443\r\n\r\n'));
      s.once('data', (d) => {
        resolve(d.toString().split('\r\n')[0]);
        s.destroy();
      });
      s.once('error', reject);
    });
    expect(line).toBe('HTTP/1.1 405 Method Not Allowed');
  });

  it('weather: 404 for unknown city, rate limit, every 3rd air-quality call fails, api keys', async () => {
    const nf = await get('http://weather.example.test/api/v1/current?city=Atlantis');
    expect(nf.status).toBe(404);
    expect(JSON.parse(nf.text)).toEqual(expect.objectContaining({ error: 'city_not_found' }));
    const statuses: number[] = [];
    for (let i = 0; i < 6; i++) statuses.push((await get('http://weather.example.test/api/v1/alerts?region=england')).status);
    expect(statuses).toEqual([200, 200, 200, 200, 200, 429]);
    const limited = await get('http://weather.example.test/api/v1/alerts?region=england');
    expect(Number(limited.headers['retry-after'])).toBeGreaterThan(0);
    // another API key has its own window
    expect((await get('http://weather.example.test/api/v1/alerts?region=england', { 'x-api-key': 'other' })).status).toBe(200);

    const aq: number[] = [];
    for (let i = 0; i < 6; i++) aq.push((await get('http://weather.example.test/api/v1/air-quality?city=Paris')).status);
    expect(aq).toEqual([200, 200, 503, 200, 200, 503]);

    const hist = 'http://weather.example.test/api/v1/history?city=Paris&date=2025-01-15';
    expect((await get(hist)).status).toBe(401);
    expect((await get(hist, { 'x-api-key': 'wk_demo_nope' })).status).toBe(401);
    expect((await get(hist, { 'x-api-key': 'wk_demo_denied_key' })).status).toBe(403);
    const ok = await get(hist, { 'x-api-key': 'wk_demo_valid_key_123' });
    expect(ok.status).toBe(200);
    expect(JSON.parse(ok.text)).toMatchObject({ city: 'Paris', date: '2025-01-15' });
  });

  it('jobs: / has no job data without a browser, /api/jobs is usable', async () => {
    const home = await get('http://jobs.example.test/');
    expect(home.text).toContain('<ul id="jobs"');
    expect(home.text).not.toContain('Senior Backend Engineer');
    const api = JSON.parse((await get('http://jobs.example.test/api/jobs?q=engineer&page=1')).text);
    expect(api.jobs).toHaveLength(10);
    expect(api.next_page).toBe(2);
  });

  it('shop: login, redirect when logged out, idempotent orders by reference', async () => {
    const out = await get('http://shop.example.test/account/orders');
    expect(out.status).toBe(302);
    expect(out.headers.location).toMatch(/^\/login/);
    const bad = await post('http://shop.example.test/login', 'email=demo%40shop.example.test&password=wrong');
    expect(bad.status).toBe(401);
    expect(bad.text).toContain('class="error"');
    const login = await post('http://shop.example.test/login', 'email=demo%40shop.example.test&password=correct-horse');
    expect(login.status).toBe(303);
    expect(login.headers.location).toBe('/account');
    const cookie = String(login.headers['set-cookie']).split(';')[0];

    const first = await post('http://shop.example.test/orders', 'sku=NW-MUG-STL&quantity=2&reference=test-ref-1', { cookie });
    expect(first.status).toBe(303);
    const again = await post('http://shop.example.test/orders', 'sku=NW-MUG-STL&quantity=2&reference=test-ref-1', { cookie });
    expect(again.headers.location).toBe(first.headers.location);
    expect((await state()).orders).toBe(1);
    const conf = await get(`http://shop.example.test${first.headers.location}`, { cookie });
    expect(conf.text).toContain('class="confirmation"');
    expect(conf.text).toContain('$29.98');
    expect((await get('http://shop.example.test/orders/by-reference/test-ref-1', { cookie })).status).toBe(200);
    expect((await get('http://shop.example.test/orders/by-reference/missing', { cookie })).status).toBe(404);

    // bearer API shares the same idempotency
    const sess = await post('http://shop.example.test/api/session', JSON.stringify({ email: 'demo@shop.example.test', password: 'correct-horse' }), { 'content-type': 'application/json' });
    const { token } = JSON.parse(sess.text);
    const auth = { authorization: `Bearer ${token}`, 'content-type': 'application/json' };
    const created = await post('http://shop.example.test/api/orders', JSON.stringify({ sku: 'NW-BAG-28L', quantity: 1, reference: 'api-1' }), auth);
    expect(created.status).toBe(201);
    const replay = await post('http://shop.example.test/api/orders', JSON.stringify({ sku: 'NW-BAG-28L', quantity: 1, reference: 'api-1' }), auth);
    expect(replay.status).toBe(200);
    expect(JSON.parse(replay.text).order_id).toBe(JSON.parse(created.text).order_id);
    expect((await state()).orders).toBe(2);

    // expiring sessions logs everybody out
    await fetch(`${sites.origin}/__demo/sessions/expire`, { method: 'POST' });
    expect((await get('http://shop.example.test/account', { cookie })).status).toBe(302);
    const expired = await get('http://shop.example.test/api/orders', { authorization: `Bearer ${token}` });
    expect(expired.status).toBe(401);
    expect(JSON.parse(expired.text).error).toBe('token_expired');
  });

  it('clinic: booking removes the slot and is idempotent by reference', async () => {
    const slots = await get('http://clinic.example.test/appointments/slots?date=2025-06-10&specialty=dermatology');
    const slotId = /data-slot-id="([^"]+)"/.exec(slots.text)![1];
    const body = `slot_id=${slotId}&patient_name=Jo+Bloggs&email=jo%40example.com&reference=clinic-1`;
    const a = await post('http://clinic.example.test/appointments', body);
    expect(a.status).toBe(303);
    const b = await post('http://clinic.example.test/appointments', body);
    expect(b.headers.location).toBe(a.headers.location);
    expect((await state()).bookings).toBe(1);
    const after = await get('http://clinic.example.test/appointments/slots?date=2025-06-10&specialty=dermatology');
    expect(after.text).not.toContain(`data-slot-id="${slotId}"`);
    expect((await get(`http://clinic.example.test${a.headers.location}`)).text).toContain('class="confirmation"');
  });

  it('news: articles with time and rel=next', async () => {
    const front = await get('http://news.example.test/');
    expect(front.text).toContain('rel="next"');
    const slug = /href="\/article\/([^"]+)"/.exec(front.text)![1];
    const art = await get(`http://news.example.test/article/${slug}`);
    expect(art.text).toMatch(/<time[^>]*datetime="2025-/);
    expect((await get('http://news.example.test/article/nope')).status).toBe(404);
  });

  it('control endpoints: state counts, faults with times, latency after the order is created, reset', async () => {
    await get('http://books.example.test/');
    expect((await state()).requests['books.example.test']).toBe(1);

    const f = await fetch(`${sites.origin}/__demo/faults`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ host: 'books.example.test', path_prefix: '/search', status: 503, times: 2 }) });
    expect(f.status).toBe(201);
    expect((await get('http://books.example.test/search?q=a')).status).toBe(503);
    expect((await get('http://books.example.test/search?q=a')).status).toBe(503);
    expect((await get('http://books.example.test/search?q=a')).status).toBe(200);

    // slow POST /orders: the client gives up, but the order is still created
    const login = await post('http://shop.example.test/login', 'email=demo%40shop.example.test&password=correct-horse');
    const cookie = String(login.headers['set-cookie']).split(';')[0];
    await fetch(`${sites.origin}/__demo/faults`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ host: 'shop.example.test', path_prefix: '/orders', latency_ms: 1500 }) });
    const started = Date.now();
    await expect(
      request('http://shop.example.test/orders', { method: 'POST', dispatcher: proxy, headers: { cookie, 'content-type': 'application/x-www-form-urlencoded' }, body: 'sku=NW-MUG-STL&quantity=1&reference=slow-1', signal: AbortSignal.timeout(200) }),
    ).rejects.toThrow();
    expect(Date.now() - started).toBeLessThan(1000);
    expect((await state()).orders).toBe(1);

    await fetch(`${sites.origin}/__demo/reset`, { method: 'POST' });
    const s = await state();
    expect(s.orders).toBe(0);
    expect(s.requests).toEqual({});
    expect((await get('http://books.example.test/search?q=a')).status).toBe(200);
  });

  it('holds: an armed key holds its pages open until released, counting how many at once; reset does not release it', async () => {
    const control = (path: string, body?: unknown) =>
      fetch(`${sites.origin}${path}`, body === undefined ? {} : { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify(body) });
    const hold = async (key: string) => (await (await control(`/__demo/holds?key=${key}`)).json()) as Record<string, unknown>;
    // An unarmed key answers at once.
    const free = await get('http://news.example.test/__probe/hold?key=free-1');
    expect(free.status).toBe(200);
    expect(free.text).toContain('<p id="key">free-1</p><p id="outcome">not_held</p>');
    expect(await hold('free-1')).toMatchObject({ armed: false, requests: 1, waiting: 0, max_waiting: 0 });
    expect((await control('/__demo/holds?key=never')).status).toBe(404);
    expect((await control('/__demo/holds', { key: 'bad key' })).status).toBe(400);

    expect((await control('/__demo/holds', { key: 'h-1' })).status).toBe(201);
    let answered = 0;
    const pages = [get('http://news.example.test/__probe/hold?key=h-1'), get('http://books.example.test/__probe/hold?key=h-1')].map((p) => p.then((r) => (answered++, r)));
    for (const end = Date.now() + 5_000; (await hold('h-1')).waiting !== 2 && Date.now() < end; ) await new Promise((r) => setTimeout(r, 20));
    // A reset (as another test may send) leaves the hold in place.
    await fetch(`${sites.origin}/__demo/reset`, { method: 'POST' });
    await new Promise((r) => setTimeout(r, 100));
    expect(answered).toBe(0);
    expect(await hold('h-1')).toMatchObject({ armed: true, released: false, requests: 2, waiting: 2, max_waiting: 2 });

    expect((await control('/__demo/holds/release', { key: 'h-1' })).status).toBe(200);
    for (const r of await Promise.all(pages)) expect(r.text).toContain('<p id="key">h-1</p><p id="outcome">released</p>');
    // Released: later requests pass at once.
    expect((await get('http://news.example.test/__probe/hold?key=h-1')).text).toContain('not_held');
    expect(await hold('h-1')).toMatchObject({ released: true, requests: 3, waiting: 0, max_waiting: 2 });

    // A client that gives up is no longer counted as waiting; a hold ends by itself after max_ms.
    await control('/__demo/holds', { key: 'h-2', max_ms: 1_000 });
    await expect(request('http://news.example.test/__probe/hold?key=h-2', { dispatcher: proxy, signal: AbortSignal.timeout(200) })).rejects.toThrow();
    for (const end = Date.now() + 2_000; (await hold('h-2')).waiting !== 0 && Date.now() < end; ) await new Promise((r) => setTimeout(r, 20));
    expect(await hold('h-2')).toMatchObject({ requests: 1, waiting: 0, max_waiting: 1 });
    const started = Date.now();
    expect((await get('http://news.example.test/__probe/hold?key=h-2')).text).toContain('expired');
    expect(Date.now() - started).toBeGreaterThanOrEqual(900);
  });

  it('keeps state per server instance', async () => {
    const other = await startDemoSites();
    try {
      await post('http://clinic.example.test/api/appointments', JSON.stringify({ slot_id: '20250610-HART-0900', patient_name: 'A', email: 'a@example.com' }), { 'content-type': 'application/json' });
      const mine = await state();
      const theirs = (await (await fetch(`${other.origin}/__demo/state`)).json()) as { requests: Record<string, number> };
      expect(mine.requests['clinic.example.test']).toBe(1);
      expect(theirs.requests).toEqual({});
      expect(other.port).not.toBe(sites.port);
    } finally {
      await other.close();
    }
  });
});
