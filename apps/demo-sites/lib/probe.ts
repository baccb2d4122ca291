// Probe pages served on every demo host, for the engines' destination tests: an open redirect,
// an echo of the request (headers, method, body), and a page whose scripts reach out (fetch, WebSocket,
// EventSource) to addresses given in its query. They let a test point a "website" at a loopback
// port outside the host map and check that nothing reaches it. A ticker page changes all the time.
// For the engines' cookie tests: an answer with any Set-Cookie lines (also as a redirect hop), one
// with many or large cookies, and a page that shows what its scripts can read of its cookies.
import type { IncomingHttpHeaders } from 'node:http';
import { esc, html, json, text, type Reply } from './http.ts';

export function probeReply(path: string, query: URLSearchParams, headers: IncomingHttpHeaders, method = 'GET', body: Buffer = Buffer.alloc(0)): Reply | null {
  if (!path.startsWith('/__probe/')) return null;
  // Any path under /__probe/headers/ echoes too (cookies are scoped by path).
  if (path.startsWith('/__probe/headers/')) path = '/__probe/headers';
  switch (path) {
    case '/__probe/redirect': {
      const to = query.get('to');
      if (!to) return text(400, 'to is required\n');
      const status = Number(query.get('status') ?? 302);
      return { status: [301, 302, 303, 307, 308].includes(status) ? status : 302, headers: { location: to, 'cache-control': 'no-store' }, body: '' };
    }
    case '/__probe/headers':
      return json(200, { headers, method, body: body.toString('utf8') });
    case '/__probe/set-cookie': {
      // Each `set` is one Set-Cookie line, sent as is (malformed ones too); with `to`, as a redirect there.
      const lines = query.getAll('set');
      const to = query.get('to');
      if (!to) return json(200, { set: lines.length }, { 'set-cookie': lines });
      const status = Number(query.get('status') ?? 302);
      return { status: [301, 302, 303, 307, 308].includes(status) ? status : 302, headers: { location: to, 'cache-control': 'no-store', 'set-cookie': lines }, body: '' };
    }
    case '/__probe/cookie-flood': {
      // A hostile site's cookies: `n` (at most 500) lines `<name><i>=<bytes × "v">; Path=/`, plus any
      // `attr` ("SameSite=Strict"); with `to`, as a redirect there. Names come from the test, so
      // tests never share cookies; nothing is kept on the server.
      const n = Math.min(Math.max(Number(query.get('n') ?? 1) || 0, 0), 500);
      const bytes = Math.min(Math.max(Number(query.get('bytes') ?? 1) || 0, 0), 16_384);
      const name = (query.get('name') ?? 'flood').replace(/[^A-Za-z0-9_-]/g, '');
      const attr = query.get('attr');
      const lines = Array.from({ length: n }, (_, i) => `${name}${i}=${'v'.repeat(bytes)}; Path=/${attr ? `; ${attr}` : ''}`);
      const to = query.get('to');
      if (!to) return json(200, { set: n }, { 'set-cookie': lines });
      return { status: 302, headers: { location: to, 'cache-control': 'no-store', 'set-cookie': lines }, body: '' };
    }
    case '/__probe/document-cookie':
      // What the page's own scripts can read of its cookies (HttpOnly ones are not there).
      return html(
        200,
        `<!doctype html><html lang="en"><head><meta charset="utf-8"><title>Cookies</title></head><body><p id="cookie"></p><script>document.getElementById('cookie').textContent = document.cookie || '(none)';</script></body></html>\n`,
        { 'cache-control': 'no-store' },
      );
    case '/__probe/page': {
      // Each probe settles (or gives up after 3 s); then #done appears so a recipe can wait for it.
      const probes = JSON.stringify({ fetch: query.get('fetch'), ws: query.get('ws'), sse: query.get('sse') });
      const link = query.get('link');
      const script = `
const p = ${probes.replace(/</g, '\\u003c')};
const settle = (f) => new Promise((resolve) => { const t = setTimeout(resolve, 3000); f(() => { clearTimeout(t); resolve(); }); });
const jobs = [];
if (p.fetch) jobs.push(settle((done) => fetch(p.fetch, { mode: 'no-cors' }).then(done, done)));
if (p.ws) jobs.push(settle((done) => { try { const ws = new WebSocket(p.ws); ws.onopen = () => { ws.close(); done(); }; ws.onerror = done; ws.onclose = done; } catch { done(); } }));
if (p.sse) jobs.push(settle((done) => { try { const es = new EventSource(p.sse); es.onopen = () => { es.close(); done(); }; es.onerror = () => { es.close(); done(); }; } catch { done(); } }));
Promise.all(jobs).then(() => { const d = document.createElement('p'); d.id = 'done'; d.textContent = 'done'; document.body.append(d); });`;
      return html(
        200,
        `<!doctype html><html lang="en"><head><meta charset="utf-8"><title>Probe</title></head><body><h1>Probe</h1>${link ? `<a id="next" href="${esc(link)}">next</a>` : ''}<script>${script}</script></body></html>\n`,
        { 'cache-control': 'no-store' },
      );
    }
    case '/__probe/ticker': {
      // A page that never holds still: #tick counts up as fast as the page can run tasks (for 10 s),
      // so two reads of the page a moment apart see different numbers.
      const script = `
const el = document.getElementById('tick'); const ch = new MessageChannel(); const until = Date.now() + 10000; let n = 0;
ch.port1.onmessage = () => { el.textContent = String(++n); if (Date.now() < until) ch.port2.postMessage(0); };
ch.port2.postMessage(0);`;
      return html(
        200,
        `<!doctype html><html lang="en"><head><meta charset="utf-8"><title>Ticker</title></head><body><p id="tick">0</p><script>${script}</script></body></html>\n`,
        { 'cache-control': 'no-store' },
      );
    }
    case '/__probe/bulk': {
      // A large page for the engines' memory bounds: `n` (at most 600,000, 4.8 MB) paragraphs `<p>x</p>`
      // and an `h1` (a page of that many tiny elements costs the parser's heap far more than its size).
      const n = Math.min(Math.max(Number(query.get('n') ?? 1) || 0, 0), 600_000);
      return html(200, `<!doctype html><html lang="en"><head><meta charset="utf-8"><title>Bulk</title></head><body><h1>Bulk</h1>${'<p>x</p>'.repeat(n)}</body></html>\n`, {
        'cache-control': 'no-store',
      });
    }
    case '/__probe/bulk-json':
      // `{"items": [...]}` of `items` (at most 1,000) strings of `size` (at most 100,000) characters,
      // the same on every page: a pagination over it collects that much per page.
      return json(200, {
        items: Array.from({ length: Math.min(Math.max(Number(query.get('items') ?? 1) || 0, 0), 1_000) }, (_, i) =>
          `${i} `.padEnd(Math.min(Math.max(Number(query.get('size') ?? 1) || 0, 0), 100_000), 'a'),
        ),
      });
    default:
      return text(404, 'Unknown probe\n');
  }
}
