// A body sent with a Content-Encoding other than identity, on every kind of route that takes a body:
// the JSON API routes (query, feedback, /mcp) answer the envelope's 415 on Content-Encoding, the
// OAuth endpoints their own error body, the console its error page; always before the body is read
// and after the credential. identity (any case, as a list) passes; a GET, or a POST without a body,
// is never refused for its Content-Encoding. Uploads: test/files.test.ts.
import http from 'node:http';
import { gzipSync } from 'node:zlib';
import { afterAll, describe, expect, it } from 'vitest';
import { closeDb, newOrg, stack } from './helpers/stack.ts';

afterAll(closeDb);

const base = () => stack().baseUrl.replace(/\/$/, '');
const HINT = 'must be identity or absent: send the body as it is, not compressed';
const REFUSED = ['gzip', 'GZIP', 'br', 'deflate', 'gzip, identity', 'identity, gzip', 'x-gzip', 'identity;q=1'];
const IDENTITY = ['identity', 'IDENTITY', ' Identity ', 'identity, identity', 'identity,'];

async function send(method: string, path: string, headers: Record<string, string>, body?: Buffer | string) {
  const res = await fetch(`${base()}${path}`, { method, headers, body: body === undefined ? undefined : typeof body === 'string' ? body : new Uint8Array(body) });
  const text = await res.text();
  let json: any;
  try {
    json = JSON.parse(text);
  } catch {
    /* HTML or empty */
  }
  return { status: res.status, headers: res.headers, body: json, text };
}

/** The envelope of a refused Content-Encoding, exactly. */
function expectRefusal(res: Awaited<ReturnType<typeof send>>, what: string) {
  expect(res.status, `${what}: ${res.text}`).toBe(415);
  expect(res.headers.get('content-type')).toBe('application/json; charset=utf-8');
  expect(res.body).toEqual({
    success: false,
    error: {
      type: 'validation_error',
      code: 'unsupported_media_type',
      message: `Content-Encoding ${HINT}`,
      status: 415,
      retryable: false,
      doc_url: expect.stringMatching(/\/docs\/errors#unsupported_media_type$/),
      param: 'Content-Encoding',
      details: { issues: [{ path: 'Content-Encoding', message: HINT }] },
    },
  });
}

const json = (value: unknown) => Buffer.from(JSON.stringify(value));
const gz = (value: unknown) => gzipSync(json(value));

describe('JSON API routes', () => {
  it('POST /v1/query: a compressed body is 415 on Content-Encoding, in every spelling; identity passes to the body checks', async () => {
    const org = await newOrg(1);
    const headers = (encoding: string) => ({ authorization: `Bearer ${org.api_key}`, 'content-type': 'application/json', 'content-encoding': encoding });
    // A valid query, compressed: without the refusal it was 400 "The body is not valid JSON".
    const body = gz({ prompt: 'What is the weather in Paris?' });
    for (const encoding of REFUSED) expectRefusal(await send('POST', '/v1/query', headers(encoding), body), encoding);
    // identity is the body as it is: parsed and checked as any other (an unknown field, by name).
    for (const encoding of IDENTITY) {
      const res = await send('POST', '/v1/query', headers(encoding), json({ nonsense: 1 }));
      expect(res.status, `${encoding}: ${res.text}`).toBe(400);
      expect(res.body.error).toMatchObject({ code: 'invalid_input', param: 'nonsense' });
    }
  });

  it('POST /v1/query: refused before the body is read (past the body limit: 415, not 413; a body never finished is answered)', async () => {
    const org = await newOrg(1);
    const headers = { authorization: `Bearer ${org.api_key}`, 'content-type': 'application/json', 'content-encoding': 'gzip' };
    expectRefusal(await send('POST', '/v1/query', headers, Buffer.alloc(2 * 1024 * 1024 + 1, 0x20)), 'over the limit');
    // 1 MB declared, 1 KiB sent, the rest never: the answer comes while the body is unfinished.
    const u = new URL(`${base()}/v1/query`);
    const answer = await new Promise<{ status: number; headers: http.IncomingHttpHeaders; text: string }>((resolve, reject) => {
      const req = http.request({ host: u.hostname, port: u.port, path: u.pathname, method: 'POST', headers: { ...headers, 'content-length': String(1_000_000) } });
      req.on('response', (res) => {
        let text = '';
        res.setEncoding('utf8');
        res.on('data', (d: string) => (text += d));
        res.on('end', () => {
          resolve({ status: res.statusCode ?? 0, headers: res.headers, text });
          req.destroy();
        });
      });
      req.on('error', reject);
      req.write(Buffer.alloc(1024, 0x20));
      setTimeout(() => reject(new Error('no answer before the body ended')), 10_000).unref();
    });
    expect(answer.status).toBe(415);
    expect(JSON.parse(answer.text).error).toMatchObject({ code: 'unsupported_media_type', param: 'Content-Encoding' });
  });

  it('the credential is checked first: without a key a compressed query is 401', async () => {
    const res = await send('POST', '/v1/query', { 'content-type': 'application/json', 'content-encoding': 'gzip' }, gz({ prompt: 'x' }));
    expect(res.status).toBe(401);
    expect(res.body.error.code).toBe('api_key_required');
  });

  it('POST /v1/query/requests/{id}/feedback and POST /mcp: 415 on Content-Encoding', async () => {
    const org = await newOrg(1);
    const auth = { authorization: `Bearer ${org.api_key}`, 'content-type': 'application/json', 'content-encoding': 'gzip' };
    expectRefusal(await send('POST', '/v1/query/requests/req_0123456789abcdef0123456789/feedback', auth, gz({ value: 1 })), 'feedback');
    const rpc = { jsonrpc: '2.0', id: 1, method: 'tools/list', params: {} };
    const mcpHeaders = { ...auth, accept: 'application/json, text/event-stream' };
    expectRefusal(await send('POST', '/mcp', mcpHeaders, gz(rpc)), '/mcp');
    expectRefusal(await send('POST', '/mcp/workflows/anything', mcpHeaders, gz(rpc)), '/mcp/workflows');
    // identity: the same call is answered by the MCP server.
    const listed = await send('POST', '/mcp', { ...mcpHeaders, 'content-encoding': 'identity' }, json(rpc));
    expect(listed.status, listed.text).toBe(200);
  });

  it('a request without a body is never refused for its Content-Encoding (GET; POST with Content-Length 0; DELETE /mcp)', async () => {
    const org = await newOrg(1);
    const key = { authorization: `Bearer ${org.api_key}` };
    const got = await send('GET', '/v1/auth', { ...key, 'content-encoding': 'gzip' });
    expect(got.status, got.text).toBe(200);
    expect(got.body).toEqual({ success: true, data: {} });
    // An empty body is answered as empty (nothing was compressed).
    const empty = await send('POST', '/v1/query', { ...key, 'content-type': 'application/json', 'content-encoding': 'gzip', 'content-length': '0' }, '');
    expect(empty.status, empty.text).toBe(400);
    expect(empty.body.error).toMatchObject({ code: 'invalid_input', message: 'A JSON body is required' });
    const del = await send('DELETE', '/mcp', { ...key, 'content-encoding': 'gzip' });
    expect(del.status, del.text).toBe(405);
    expect(del.headers.get('allow')).toBe('POST');
  });
});

describe('OAuth endpoints', () => {
  it('token, revocation and registration answer 415 invalid_request in their own error body, no-store', async () => {
    const description = `Content-Encoding ${HINT}`;
    const refresh = new URLSearchParams({ grant_type: 'refresh_token', refresh_token: 'wqs_rt_unknown', client_id: 'mcpc_unknown' }).toString();
    const form = gzipSync(refresh);
    for (const [path, type, body] of [
      ['/oauth/token', 'application/x-www-form-urlencoded', form],
      ['/oauth/revoke', 'application/x-www-form-urlencoded', gzipSync('token=x&client_id=mcpc_unknown')],
      ['/oauth/register', 'application/json', gz({ client_name: 'Compressed', redirect_uris: ['https://app.example/cb'] })],
    ] as const) {
      const res = await send('POST', path, { 'content-type': type, 'content-encoding': 'gzip' }, body);
      expect(res.status, `${path}: ${res.text}`).toBe(415);
      expect(res.headers.get('content-type')).toMatch(/^application\/json/);
      expect(res.headers.get('cache-control')).toBe('no-store');
      expect(res.body).toEqual({ error: 'invalid_request', error_description: description });
    }
    // identity passes: the unknown client is what is refused.
    const plain = await send('POST', '/oauth/token', { 'content-type': 'application/x-www-form-urlencoded', 'content-encoding': 'identity' }, refresh);
    expect(plain.status, plain.text).toBe(401);
    expect(plain.body.error).toBe('invalid_client');
  });

  it('a registration body that is not JSON is 400 invalid_request saying so (it was taken for a failure of ours: 503)', async () => {
    const res = await send('POST', '/oauth/register', { 'content-type': 'application/json' }, '{"client_name": ');
    expect(res.status, res.text).toBe(400);
    expect(res.headers.get('cache-control')).toBe('no-store');
    expect(res.body).toEqual({ error: 'invalid_request', error_description: 'The body is not valid JSON' });
  });
});

describe('console', () => {
  it('a compressed form is answered with the console error page, 415; its pages are still served to a GET with Content-Encoding', async () => {
    const form = gzipSync(new URLSearchParams({ email: 'someone@example.test', password: 'x', _csrf: 'x' }).toString());
    const res = await send('POST', '/console/sign-in', { 'content-type': 'application/x-www-form-urlencoded', 'content-encoding': 'gzip' }, form);
    expect(res.status, res.text).toBe(415);
    expect(res.headers.get('content-type')).toBe('text/html; charset=utf-8');
    expect(res.headers.get('cache-control')).toBe('no-store');
    expect(res.text).toContain('Unsupported encoding');
    expect(res.text).toContain('The form was sent compressed (Content-Encoding). Send it again as it is, without compression.');
    const page = await send('GET', '/console/sign-in', { 'content-encoding': 'gzip' });
    expect(page.status).toBe(200);
    expect(page.text).toContain('<form');
  });
});

describe('OpenAPI document', () => {
  it('lists 415 on the operations that refuse a compressed body: the envelope on the API routes, the OAuth error body on the OAuth endpoints', async () => {
    const doc = (await (await fetch(`${base()}/openapi.json`)).json()) as any;
    for (const [path, method] of [
      ['/v1/query', 'post'],
      ['/v1/query/requests/{request_id}/feedback', 'post'],
      ['/v1/files', 'post'],
      ['/mcp', 'post'],
      ['/mcp/workflows/{workflow_name}', 'post'],
    ]) {
      expect(doc.paths[path][method].responses['415'], `${method} ${path}`).toEqual({ $ref: '#/components/responses/E415' });
    }
    for (const path of ['/oauth/token', '/oauth/revoke', '/oauth/register']) {
      const r415 = doc.paths[path].post.responses['415'];
      expect(r415?.description, path).toMatch(/^invalid_request: .*Content-Encoding/);
      expect(Object.values<any>(r415.content)[0].schema).toEqual({ $ref: '#/components/schemas/OAuthError' });
    }
  });
});
