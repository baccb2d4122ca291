// MCP sign-in with OAuth in real Chromium: a person follows a client's authorization URL, signs in,
// picks an organization on the consent page and approves; the browser really follows the redirect
// to the client's loopback address (so the page's CSP form-action must allow it). The consent page
// and the MCP clients page pass axe (WCAG 2.x A/AA); an Owner revokes the client there.
import { createHash, randomBytes } from 'node:crypto';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { call, closeDb, db, newOrg, stack } from './helpers/stack.ts';
import { orgWithUser } from './helpers/console-http.ts';
import { chromiumPages, fillSignIn, look } from './helpers/console-browser.ts';

const openPage = chromiumPages();

// The client's loopback listener, as a native app runs it: a real server the browser reaches.
let answered: URL | undefined;
const listener = http.createServer((req, res) => {
  answered = new URL(req.url ?? '/', `http://${req.headers.host}`);
  res.writeHead(200, { 'content-type': 'text/html' }).end('<!doctype html><title>Done</title><p>You can close this window.</p>');
});
let REDIRECT = '';
beforeAll(async () => {
  await new Promise<void>((resolve) => listener.listen(0, '127.0.0.1', resolve));
  REDIRECT = `http://127.0.0.1:${(listener.address() as AddressInfo).port}/callback`;
});
afterAll(async () => {
  await new Promise((resolve) => listener.close(resolve));
  await closeDb();
});
const INIT = { jsonrpc: '2.0', id: 1, method: 'initialize', params: { protocolVersion: '2025-06-18', capabilities: {}, clientInfo: { name: 't', version: '1' } } };

describe('OAuth consent in Chromium', () => {
  it('sign in, pick the organization, approve; the code reaches the client; an Owner revokes it', async () => {
    const owner = await orgWithUser('owner', 5);
    const second = await newOrg(5, 'Second org');
    await db().query(`INSERT INTO memberships (org_id, user_id, role) VALUES ($1, $2, 'owner')`, [second.org_id, owner.userId]);
    const reg = await call('POST', '/oauth/register', { body: { client_name: 'Browser client', redirect_uris: [REDIRECT] } });
    const clientId = reg.body.client_id as string;
    const verifier = randomBytes(32).toString('base64url');
    const params = {
      response_type: 'code', client_id: clientId, redirect_uri: REDIRECT, state: 'xyz', resource: `${stack().baseUrl}/mcp`,
      code_challenge: createHash('sha256').update(verifier).digest('base64url'), code_challenge_method: 'S256',
    };

    const page = await openPage();
    await page.goto(`/console/oauth/authorize?${new URLSearchParams(params)}`);
    expect(new URL(page.url()).pathname).toBe('/console/sign-in');
    await fillSignIn(page, owner.email, owner.password);
    await page.getByRole('heading', { level: 1, name: 'Connect Browser client' }).waitFor();
    await look(page, 'oauth-consent');
    await page.getByLabel('Organization to connect').selectOption(second.org_id);
    await page.getByRole('button', { name: 'Approve' }).click();
    await page.waitForURL(`${REDIRECT}**`);
    expect(answered?.searchParams.get('state')).toBe('xyz');
    expect(answered?.searchParams.get('iss')).toBe(stack().baseUrl);

    const res = await fetch(`${stack().baseUrl}/oauth/token`, {
      method: 'POST',
      headers: { 'content-type': 'application/x-www-form-urlencoded' },
      body: new URLSearchParams({ grant_type: 'authorization_code', code: answered!.searchParams.get('code')!, code_verifier: verifier, redirect_uri: REDIRECT, client_id: clientId, resource: params.resource }),
    });
    expect(res.status).toBe(200);
    const { access_token } = (await res.json()) as { access_token: string };
    const mcp = () => call('POST', '/mcp', { body: INIT, headers: { accept: 'application/json, text/event-stream', authorization: `Bearer ${access_token}` } });
    expect((await mcp()).status).toBe(200);

    // The grant is the second organization's: it is listed there, not on the first.
    await page.goto('/console/mcp-clients');
    await page.getByRole('heading', { level: 1, name: 'MCP clients' }).waitFor();
    expect(await page.getByText('Browser client').count()).toBe(0);
    await page.getByLabel('Organization', { exact: true }).selectOption(second.org_id);
    await page.getByRole('button', { name: 'Switch' }).click();
    await page.goto('/console/mcp-clients');
    await page.getByRole('cell', { name: 'Browser client', exact: true }).waitFor();
    await look(page, 'oauth-mcp-clients');
    await page.getByRole('button', { name: 'Revoke Browser client' }).click();
    await page.getByText('No MCP client is connected.').waitFor();
    const res2 = await mcp();
    expect(res2.status).toBe(401);
    expect(res2.body.error.code).toBe('invalid_access_token');
  }, 180_000);
});
