// MCP sign-in with OAuth, registered the MCP spec's preferred way: a Client ID Metadata Document. The
// client's id is an https URL on a named host (mcp-client.example.test) that this test's own API
// process routes to a local HTTPS server through SITE_HOST_MAP, as the engines route demo sites. The
// server's self-signed certificate is trusted only by that process (NODE_EXTRA_CA_CERTS); TLS is
// verified against the name, never turned off. The SDK's own client auth flow runs end to end.
import { execFileSync } from 'node:child_process';
import { createHash, randomBytes } from 'node:crypto';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { createServer, type Server } from 'node:https';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { UnauthorizedError } from '@modelcontextprotocol/sdk/client/auth.js';
import type { CallToolResult } from '@modelcontextprotocol/sdk/types.js';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { startApiProcess, type ServiceProcess } from './helpers/processes.ts';
import { balanceOf, call, closeDb, db, demo, ledgerOf, stack } from './helpers/stack.ts';
import { ConsoleClient } from './helpers/console-http.ts';
import { approve, MemoryOAuthClient, personInTwoOrgs } from './helpers/oauth-client.ts';

const HOST = 'mcp-client.example.test';
/** Mapped to the same server, which has no certificate for this name: TLS must refuse it. */
const WRONG_NAME_HOST = 'other-client.example.test';
const REDIRECT = 'http://127.0.0.1:33419/callback';
const run = Math.random().toString(36).slice(2, 8);
const clientUrl = (name: string, host = HOST) => `https://${host}/${name}-${run}.json`;

let dir: string;
let server: Server;
let api: ServiceProcess;
let base: string;
let port: number;
/** Document fetches the HTTPS server answered, by path. */
const hits = new Map<string, number>();

beforeAll(async () => {
  dir = mkdtempSync(path.join(tmpdir(), 'wqs-cimd-'));
  const key = path.join(dir, 'key.pem');
  const cert = path.join(dir, 'cert.pem');
  execFileSync('openssl', ['req', '-x509', '-newkey', 'ec', '-pkeyopt', 'ec_paramgen_curve:prime256v1', '-nodes', '-keyout', key, '-out', cert, '-days', '1', '-subj', `/CN=${HOST}`, '-addext', `subjectAltName=DNS:${HOST}`], { stdio: 'ignore' });
  server = createServer({ key: readFileSync(key), cert: readFileSync(cert) }, (req, res) => {
    const p = req.url ?? '/';
    hits.set(p, (hits.get(p) ?? 0) + 1);
    const own = `https://${req.headers.host}${p}`;
    // Hostile documents: a redirect elsewhere, one larger than 16 KiB, one that never ends, unsafe redirect URIs.
    if (p.startsWith('/redirect-')) {
      res.writeHead(302, { location: `https://127.0.0.1:${port}/direct-${run}.json` });
      return res.end();
    }
    if (p.startsWith('/huge-')) {
      res.writeHead(200, { 'content-type': 'application/json' });
      return res.end(JSON.stringify({ client_id: own, client_name: 'Huge', redirect_uris: [REDIRECT], padding: 'x'.repeat(20_000) }));
    }
    if (p.startsWith('/slow-')) {
      res.writeHead(200, { 'content-type': 'application/json' });
      res.write('{"client_id":');
      const drip = setInterval(() => res.write(' '), 250);
      res.on('close', () => clearInterval(drip));
      return;
    }
    if (p.startsWith('/nul-')) {
      res.writeHead(200, { 'content-type': 'application/json' });
      return res.end(JSON.stringify({ client_id: own, client_name: 'Nul', redirect_uris: [REDIRECT], software_statement: 'a\u0000b' }));
    }
    if (p.startsWith('/unsafe-')) {
      res.writeHead(200, { 'content-type': 'application/json' });
      return res.end(JSON.stringify({ client_id: own, client_name: 'Unsafe', redirect_uris: ['javascript:alert(1)', 'http://attacker.example/cb'] }));
    }
    // /mismatch-* names another client_id than its own URL; everything else is a good document.
    const clientId = p.startsWith('/mismatch-') ? clientUrl('someone-else') : own;
    res.writeHead(200, { 'content-type': 'application/json' });
    res.end(JSON.stringify({ client_id: clientId, client_name: 'Metadata document client', redirect_uris: [REDIRECT], token_endpoint_auth_method: 'none', grant_types: ['authorization_code', 'refresh_token'], response_types: ['code'] }));
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  port = (server.address() as AddressInfo).port;
  const target = `127.0.0.1:${port}`;
  const s = stack();
  // The stack's task queue: the shared worker runs this API's workflows.
  api = await startApiProcess({
    databaseUrl: s.databaseUrl,
    temporalAddress: s.temporalAddress,
    hostMap: { ...s.hostMap, [HOST]: target, [WRONG_NAME_HOST]: target },
    taskQueue: s.taskQueue,
    workflowBundlePath: s.workflowBundlePath,
    // X-Forwarded-For names the client address (the per-address bound on document fetches).
    env: { WQS_SKIP_MIGRATIONS: '1', NODE_EXTRA_CA_CERTS: cert, TRUST_PROXY: '127.0.0.1' },
  });
  base = String(api.started.url).replace(/\/$/, '');
}, 120_000);

afterAll(async () => {
  await api?.kill();
  await new Promise((r) => server?.close(r));
  if (dir) rmSync(dir, { recursive: true, force: true });
  await closeDb();
});

beforeEach(async () => {
  await demo('/__demo/reset');
});

/** The SDK's client with a metadata-document URL as its client id. */
const documentClient = (clientMetadataUrl: string) => new MemoryOAuthClient({ name: 'Metadata document client', redirect: REDIRECT, state: 'state-cimd', clientMetadataUrl });

/** fetch that records every URL the SDK asks for. */
function recordingFetch(seen: string[]): typeof fetch {
  return (input, init) => {
    seen.push(input instanceof Request ? input.url : String(input));
    return fetch(input, init);
  };
}

/** An authorization request for a document client, as the SDK would build it (PKCE, resource). */
function authorizePath(clientId: string, redirectUri = REDIRECT, apiBase = base) {
  const q = new URLSearchParams({
    client_id: clientId,
    redirect_uri: redirectUri,
    response_type: 'code',
    code_challenge: 'E9Melhoa2OwvFrEMTJguCHaoeK1t8URWbuGJSstw-cM',
    code_challenge_method: 'S256',
    state: 's',
    scope: 'mcp',
    resource: `${apiBase}/mcp`,
  });
  return `/console/oauth/authorize?${q}`;
}

/** The authorization page asked from `address` (X-Forwarded-For; this file's API trusts its local proxy). */
const fromAddress = (address: string, path: string) => new ConsoleClient(base).request('GET', path, { headers: { 'x-forwarded-for': address } });

const cimdRow = async (id: string) => (await db().query(`SELECT kind, fetched_at FROM oauth_clients WHERE id = $1`, [id])).rows[0] as { kind: string; fetched_at: Date } | undefined;

describe('a client registered by its metadata document', () => {
  it('signs in without dynamic registration, runs a billed workflow in the chosen organization, and its document is cached', async () => {
    const { first, chosen, email } = await personInTwoOrgs('CIMD');

    const id = clientUrl('client');
    const docPath = new URL(id).pathname;
    const metadata = await (await fetch(`${base}/.well-known/oauth-authorization-server`)).json();
    expect(metadata.client_id_metadata_document_supported).toBe(true);

    const seen: string[] = [];
    const provider = documentClient(id);
    const url = new URL(`${base}/mcp`);
    const transport = new StreamableHTTPClientTransport(url, { authProvider: provider, fetch: recordingFetch(seen) });
    await expect(new Client({ name: 'oauth-cimd', version: '1' }).connect(transport)).rejects.toBeInstanceOf(UnauthorizedError);

    // Discovery happened from the 401, and the client id is the document URL: no registration call.
    expect(seen.some((u) => u.includes('/.well-known/oauth-protected-resource'))).toBe(true);
    expect(seen.some((u) => u.includes('/.well-known/oauth-authorization-server'))).toBe(true);
    expect(seen).not.toContain(metadata.registration_endpoint);
    expect(seen.filter((u) => new URL(u).pathname === '/oauth/register')).toEqual([]);
    expect(provider.info?.client_id).toBe(id);
    const authUrl = provider.authorizationUrl!;
    expect(authUrl.searchParams.get('client_id')).toBe(id);
    expect(hits.get(docPath) ?? 0).toBe(0); // nothing fetched before the authorization request

    const browser = new ConsoleClient(base);
    const { consent, location } = await approve(browser, authUrl, email, chosen.org_id);
    // The service fetched the document once (consent page GET and POST: the second from the cache).
    expect(hits.get(docPath)).toBe(1);
    expect(consent.text).toContain('Metadata document client');
    expect(consent.text).toContain('127.0.0.1:33419');
    expect(consent.text).toContain(chosen.org_id);
    const row = await cimdRow(id);
    expect(row?.kind).toBe('cimd');
    expect(location.origin + location.pathname).toBe(REDIRECT);
    expect(location.searchParams.get('state')).toBe('state-cimd');
    expect(location.searchParams.get('iss')).toBe(base);
    const code = location.searchParams.get('code')!;
    expect(code).toMatch(/^wqs_ac_/);

    await transport.finishAuth(code);
    expect(provider.saved!.access_token).toMatch(/^wqs_at_/);
    expect(seen.filter((u) => new URL(u).pathname === '/oauth/register')).toEqual([]);

    const client = new Client({ name: 'oauth-cimd', version: '1' });
    await client.connect(new StreamableHTTPClientTransport(url, { authProvider: provider }));
    try {
      const { tools } = await client.listTools();
      expect(tools.map((t) => t.name)).toContain('svc_run_workflow');
      const r = (await client.callTool({ name: 'svc_run_workflow', arguments: { api: '@weather', operation: 'current_weather', input: { city: 'London' } } }, undefined, { timeout: 120_000 })) as CallToolResult;
      const sc = r.structuredContent as any;
      expect(r.isError).toBeFalsy();
      expect(sc).toMatchObject({ status: 'succeeded', receipt: { billing: { status: 'settled', charged_credits: 1 } } });
      expect((await balanceOf(chosen.org_id)).charged).toBe(1);
      expect(await ledgerOf(chosen.org_id)).toEqual([
        { request_id: sc.request_id, kind: 'reserve', amount: expect.any(Number) },
        { request_id: sc.request_id, kind: 'settle', amount: expect.any(Number) },
      ]);
      expect(await ledgerOf(first.org_id)).toEqual([]);
      expect((await call('GET', `/v1/query/requests/${sc.request_id}`, { key: chosen.api_key })).status).toBe(200);
    } finally {
      await client.close();
    }

    // A second authorization by the same client within the cache time: the document is not refetched.
    const again = documentClient(id);
    await expect(new Client({ name: 'oauth-cimd', version: '1' }).connect(new StreamableHTTPClientTransport(url, { authProvider: again }))).rejects.toBeInstanceOf(UnauthorizedError);
    const second = await approve(browser, again.authorizationUrl!, email, chosen.org_id);
    expect(second.location.searchParams.get('code')).toMatch(/^wqs_ac_/);
    expect(hits.get(docPath)).toBe(1);
    expect((await cimdRow(id))?.fetched_at.getTime()).toBe(row!.fetched_at.getTime());
  }, 240_000);

  it('refuses a document whose client_id is not its own URL, and stores nothing', async () => {
    const id = clientUrl('mismatch');
    const page = await new ConsoleClient(base).get(authorizePath(id));
    expect(page.status).toBe(400);
    expect(page.location).toBeNull();
    expect(page.text).toContain('it names another client_id than its own URL');
    expect(hits.get(new URL(id).pathname)).toBe(1); // it was fetched and read, then refused
    expect(await cimdRow(id)).toBeUndefined();
  }, 60_000);

  it('refuses a redirect_uri the document does not list, on the page, without redirecting', async () => {
    const id = clientUrl('redirects');
    const page = await new ConsoleClient(base).get(authorizePath(id, 'http://127.0.0.1:33419/elsewhere'));
    expect(page.status).toBe(400);
    expect(page.location).toBeNull();
    expect(page.text).toContain('The redirect address is not one this client registered');
    expect(page.text).not.toContain('wqs_ac_');
    // The listed one is accepted: the refusal is about the address, not the client.
    const ok = await new ConsoleClient(base).get(authorizePath(id));
    expect(ok.status).toBe(303);
    expect(ok.location).toMatch(/^\/console\/sign-in\?next=/);
  }, 60_000);

  it('refuses a redirect, a document over 16 KiB, one that takes over 5 s, and unsafe redirect URIs; stores none', async () => {
    const cases: Array<[string, string]> = [
      // Not followed: the redirect could lead anywhere, a private address included.
      [clientUrl('redirect'), 'it answered HTTP 302'],
      [clientUrl('huge'), 'it is larger than 16384 bytes'],
      [clientUrl('slow'), 'it did not answer within 5 s'],
      [clientUrl('unsafe'), 'it is not a valid client metadata document (every redirect URI must be https, or http on a loopback address)'],
      // PostgreSQL cannot store it: refused as the document's fault (and remembered), not a 500.
      [clientUrl('nul'), 'it contains a NUL character'],
    ];
    for (const [id, why] of cases) {
      const started = Date.now();
      const page = await new ConsoleClient(base).get(authorizePath(id, 'http://attacker.example/cb'));
      expect(page.status, id).toBe(400);
      expect(page.location).toBeNull();
      expect(page.text).toContain(`cannot be used (${why})`);
      expect(Date.now() - started).toBeLessThan(8_000);
      expect(await cimdRow(id)).toBeUndefined();
    }
    // The redirect's target was never fetched.
    expect(hits.get(`/direct-${run}.json`) ?? 0).toBe(0);
    // A client id on a port no browser connects to (mail, here) is no client, and is never fetched;
    // nor is one with a NUL in it.
    for (const id of [`https://${HOST}:25/mail-${run}.json`, `https://${HOST}/nul\u0000-${run}.json`]) {
      const page = await new ConsoleClient(base).get(authorizePath(id));
      expect(page.status, id).toBe(400);
      expect(page.location).toBeNull();
    }
    expect([...hits.keys()].filter((k) => k.startsWith('/mail-') || k.startsWith('/nul%00'))).toEqual([]);
  }, 60_000);

  it('remembers a failed fetch for a minute: the same client_id is refused at once with the same words, unfetched', async () => {
    // A slow document holds a fetch slot for 5 s; asked again, it must not be fetched again.
    const slow = clientUrl('slow-remembered');
    const first = await new ConsoleClient(base).get(authorizePath(slow));
    expect(first.status).toBe(400);
    expect(first.text).toContain('cannot be used (it did not answer within 5 s)');
    for (let i = 0; i < 3; i++) {
      const started = Date.now();
      const again = await new ConsoleClient(base).get(authorizePath(slow));
      expect(Date.now() - started).toBeLessThan(1_000);
      expect(again.status).toBe(400);
      expect(again.location).toBeNull();
      expect(again.text).toContain('cannot be used (it did not answer within 5 s)');
    }
    expect(hits.get(new URL(slow).pathname)).toBe(1);
    // A refused document (HTTP 302 here) is remembered the same way, by its exact URL only.
    const refused = clientUrl('redirect-remembered');
    for (let i = 0; i < 2; i++) {
      const page = await new ConsoleClient(base).get(authorizePath(refused));
      expect(page.status).toBe(400);
      expect(page.text).toContain('cannot be used (it answered HTTP 302)');
    }
    expect(hits.get(new URL(refused).pathname)).toBe(1);
    const other = `${refused}?v=2`;
    expect((await new ConsoleClient(base).get(authorizePath(other))).text).toContain('cannot be used (it answered HTTP 302)');
    expect(hits.get(`${new URL(refused).pathname}?v=2`)).toBe(1);
    expect(hits.get(new URL(refused).pathname)).toBe(1);
    expect(await cimdRow(slow)).toBeUndefined();
    expect(await cimdRow(refused)).toBeUndefined();
  }, 60_000);

  it('runs at most 8 document fetches at once: a ninth request is told to retry (503), unfetched', async () => {
    const slow = Array.from({ length: 8 }, (_, i) => clientUrl(`slow-busy${i}`));
    // From eight addresses (one address holds at most 2: the next test).
    const held = slow.map((id, i) => fromAddress(`203.0.113.${i + 1}`, authorizePath(id)));
    // Every one of the eight is being fetched (the server saw it) before the ninth asks.
    for (let i = 0; i < 100 && slow.some((id) => !hits.get(new URL(id).pathname)); i++) await new Promise((r) => setTimeout(r, 50));
    const id = clientUrl('after-busy');
    const busy = await fromAddress('203.0.113.9', authorizePath(id));
    expect(busy.status).toBe(503);
    expect(busy.headers.get('retry-after')).toBe('5');
    expect(busy.location).toBeNull();
    expect(busy.text).toContain('fetching too many client metadata documents');
    expect(hits.get(new URL(id).pathname) ?? 0).toBe(0);
    expect(await cimdRow(id)).toBeUndefined();
    // The slow ones end at the time bound; then the same request is fetched and goes on to sign-in.
    for (const page of await Promise.all(held)) expect(page.text).toContain('it did not answer within 5 s');
    const later = await new ConsoleClient(base).get(authorizePath(id));
    expect(later.status).toBe(303);
    expect(later.location).toMatch(/^\/console\/sign-in\?next=/);
  }, 60_000);

  it('runs at most 2 document fetches at once for one client address: its third is told to retry (503), unfetched, while another address is served', async () => {
    // One caller naming new slow URLs (a new one each time: nothing remembered) must not hold every
    // fetch slot, or nobody else could connect a new metadata-document client.
    const slow = Array.from({ length: 2 }, (_, i) => clientUrl(`slow-address${i}`));
    const held = slow.map((id) => fromAddress('198.51.100.7', authorizePath(id)));
    for (let i = 0; i < 100 && slow.some((id) => !hits.get(new URL(id).pathname)); i++) await new Promise((r) => setTimeout(r, 50));
    const third = clientUrl('slow-address2');
    const busy = await fromAddress('198.51.100.7', authorizePath(third));
    expect(busy.status).toBe(503);
    expect(busy.headers.get('retry-after')).toBe('5');
    expect(busy.text).toContain('fetching too many client metadata documents');
    expect(hits.get(new URL(third).pathname) ?? 0).toBe(0);
    // Another address meanwhile: fetched, and on to sign-in.
    const other = clientUrl('other-address');
    const served = await fromAddress('198.51.100.8', authorizePath(other));
    expect(served.status).toBe(303);
    expect(served.location).toMatch(/^\/console\/sign-in\?next=/);
    expect(hits.get(new URL(other).pathname)).toBe(1);
    // The slow ones end at the time bound and give their address's slots back.
    for (const page of await Promise.all(held)) expect(page.text).toContain('it did not answer within 5 s');
    const later = await fromAddress('198.51.100.7', authorizePath(clientUrl('address-later')));
    expect(later.status).toBe(303);
  }, 60_000);

  it('verifies TLS against the mapped name, and every unmapped host keeps the private-address guard', async () => {
    // Mapped to the same local server, whose certificate does not name this host: refused.
    const wrongName = clientUrl('wrong-name', WRONG_NAME_HOST);
    const tls = await new ConsoleClient(base).get(authorizePath(wrongName));
    expect(tls.status).toBe(400);
    expect(tls.text).toContain('cannot be used');
    expect(tls.text).toContain('TLS certificate could not be verified');
    expect(tls.text).not.toContain('altnames'); // the service's words, never the error's text
    expect(hits.get(new URL(wrongName).pathname) ?? 0).toBe(0); // the handshake failed before any request
    expect(await cimdRow(wrongName)).toBeUndefined();

    // An unmapped loopback address on the same server is still refused by the guard, unread.
    const direct = `https://127.0.0.1:${port}/direct-${run}.json`;
    const page = await new ConsoleClient(base).get(authorizePath(direct));
    expect(page.status).toBe(400);
    expect(page.text).toContain('private, loopback or link-local');
    expect(hits.get(new URL(direct).pathname) ?? 0).toBe(0);
    expect(await cimdRow(direct)).toBeUndefined();

    // The stack's own API has no entry for this host: looked up for real (no such name), never read.
    const id = clientUrl('unmapped');
    const unmapped = await new ConsoleClient(stack().baseUrl).get(authorizePath(id));
    expect(unmapped.status).toBe(400);
    expect(unmapped.text).toContain('cannot be used');
    expect(hits.get(new URL(id).pathname) ?? 0).toBe(0);
    expect(await cimdRow(id)).toBeUndefined();
  }, 60_000);
});

describe('cached metadata documents nobody used', () => {
  it('keeps at most OAUTH_UNUSED_CLIENTS_MAX of them, forgetting the least recently fetched; a forgotten one is fetched again when named; a sign-in in progress and a used client are kept', async () => {
    // The authorization page needs no sign-in: without a bound, anyone serving documents at many
    // URLs made a row of up to 16 KiB per URL, kept a day. This API keeps 3 never-used documents.
    const s = stack();
    const capped = await startApiProcess({
      databaseUrl: s.databaseUrl,
      temporalAddress: s.temporalAddress,
      hostMap: { ...s.hostMap, [HOST]: `127.0.0.1:${port}` },
      taskQueue: s.taskQueue,
      workflowBundlePath: s.workflowBundlePath,
      env: { WQS_SKIP_MIGRATIONS: '1', NODE_EXTRA_CA_CERTS: path.join(dir, 'cert.pem'), OAUTH_UNUSED_CLIENTS_MAX: '3' },
    });
    const cappedBase = String(capped.started.url).replace(/\/$/, '');
    const named = async (id: string) => {
      const page = await new ConsoleClient(cappedBase).get(authorizePath(id, REDIRECT, cappedBase));
      expect(page.status, id).toBe(303);
      expect(page.location).toMatch(/^\/console\/sign-in\?next=/);
    };
    try {
      // A person between consent and the token request: the client has a live code, no tokens yet.
      const { chosen, email } = await personInTwoOrgs('CIMDcap');
      const pending = clientUrl('cap-pending');
      const verifier = randomBytes(32).toString('base64url');
      const authorization = new URL(`${cappedBase}${authorizePath(pending, REDIRECT, cappedBase)}`);
      authorization.searchParams.set('code_challenge', createHash('sha256').update(verifier).digest('base64url'));
      const { location } = await approve(new ConsoleClient(cappedBase), authorization, email, chosen.org_id);
      const code = location.searchParams.get('code')!;
      expect(code).toMatch(/^wqs_ac_/);

      const flood = Array.from({ length: 5 }, (_, i) => clientUrl(`cap-${i}`));
      for (const id of flood) await named(id);
      // The three most recently fetched are kept; the two before them are forgotten.
      expect(await cimdRow(flood[0]!)).toBeUndefined();
      expect(await cimdRow(flood[1]!)).toBeUndefined();
      for (const id of flood.slice(2)) expect((await cimdRow(id))?.kind, id).toBe('cimd');
      const unused = async () =>
        (
          await db().query(
            `SELECT count(*)::int AS n FROM oauth_clients c WHERE c.kind = 'cimd' AND c.last_used_at IS NULL
                AND NOT EXISTS (SELECT 1 FROM oauth_codes k WHERE k.client_id = c.id AND k.expires_at > now() AND k.used_at IS NULL)`,
          )
        ).rows[0].n as number;
      expect(await unused()).toBe(3);
      // The sign-in in progress kept its client: its code is exchanged for tokens.
      expect((await cimdRow(pending))?.kind).toBe('cimd');
      const token = await fetch(`${cappedBase}/oauth/token`, {
        method: 'POST',
        headers: { 'content-type': 'application/x-www-form-urlencoded' },
        body: new URLSearchParams({ grant_type: 'authorization_code', code, redirect_uri: REDIRECT, code_verifier: verifier, client_id: pending, resource: `${cappedBase}/mcp` }),
      });
      expect(token.status).toBe(200);
      const tokens = (await token.json()) as { access_token: string };
      expect(tokens.access_token).toMatch(/^wqs_at_/);

      // A forgotten document named again is simply fetched again; the oldest kept one goes instead.
      await named(flood[0]!);
      expect(hits.get(new URL(flood[0]!).pathname)).toBe(2);
      expect((await cimdRow(flood[0]!))?.kind).toBe('cimd');
      expect(await cimdRow(flood[2]!)).toBeUndefined();
      // More documents never forget a client that got tokens: its access token still works.
      for (const id of Array.from({ length: 4 }, (_, i) => clientUrl(`cap-more-${i}`))) await named(id);
      expect(await unused()).toBe(3);
      expect((await cimdRow(pending))?.kind).toBe('cimd');
      const mcp = await fetch(`${cappedBase}/mcp`, {
        method: 'POST',
        headers: { authorization: `Bearer ${tokens.access_token}`, 'content-type': 'application/json', accept: 'application/json, text/event-stream' },
        body: JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'tools/list', params: {} }),
      });
      expect(mcp.status).toBe(200);
    } finally {
      await capped.kill();
    }
  }, 120_000);
});
