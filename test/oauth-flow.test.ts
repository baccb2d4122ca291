// MCP sign-in with OAuth, end to end over real HTTP: the SDK's own client auth flow (discovery from
// the 401, dynamic registration, PKCE, resource) with the authorization driven like a browser (the
// console's sign-in, the consent form with its CSRF token, the organization picker), then listTools
// and a billed svc_run_workflow charged to the organization chosen on the consent page.
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { UnauthorizedError } from '@modelcontextprotocol/sdk/client/auth.js';
import type { CallToolResult } from '@modelcontextprotocol/sdk/types.js';
import { afterAll, beforeEach, describe, expect, it } from 'vitest';
import { balanceOf, call, closeDb, db, demo, ledgerOf, newOrg, stack } from './helpers/stack.ts';
import { ConsoleClient } from './helpers/console-http.ts';
import { approve, MemoryOAuthClient, personInTwoOrgs } from './helpers/oauth-client.ts';

afterAll(closeDb);
beforeEach(async () => {
  await demo('/__demo/reset');
});

const REDIRECT = 'http://127.0.0.1:33418/callback';

async function callTool(client: Client, name: string, args: Record<string, unknown>) {
  const r = (await client.callTool({ name, arguments: args }, undefined, { timeout: 120_000 })) as CallToolResult;
  return { ...r, sc: r.structuredContent as any };
}

describe('the SDK client signs in with OAuth', () => {
  it('discovers, registers, is authorized for the chosen organization and runs a billed workflow there', async () => {
    // A person in two organizations; the session starts on the first, the consent picks the second.
    const { first, chosen, email } = await personInTwoOrgs('OAuth');
    const stranger = await newOrg(5, 'OAuth stranger');

    const provider = new MemoryOAuthClient({ name: 'Flow test client', redirect: REDIRECT, state: 'state-123' });
    const url = new URL(`${stack().baseUrl}/mcp`);
    const transport = new StreamableHTTPClientTransport(url, { authProvider: provider });
    await expect(new Client({ name: 'oauth-flow', version: '1' }).connect(transport)).rejects.toBeInstanceOf(UnauthorizedError);

    // Registered dynamically (no scope sent by this client's metadata), then sent to the consent page.
    expect(provider.info?.client_id).toMatch(/^mcpc_[0-9a-f]{32}$/);
    const authUrl = provider.authorizationUrl!;
    expect(authUrl.origin + authUrl.pathname).toBe(`${stack().baseUrl}/console/oauth/authorize`);
    expect(authUrl.searchParams.get('code_challenge_method')).toBe('S256');
    expect(authUrl.searchParams.get('resource')).toBe(`${stack().baseUrl}/mcp`);
    expect(authUrl.searchParams.get('scope')).toBe('mcp');

    const browser = new ConsoleClient();
    const { consent, location } = await approve(browser, authUrl, email, chosen.org_id);
    // The page shows the account, the client, where answers go, and only this person's organizations.
    expect(consent.text).toContain(email);
    expect(consent.text).toContain('Use a different account');
    expect(consent.text).toContain('Flow test client');
    expect(consent.text).toContain('its name is not verified');
    expect(consent.text).toContain('127.0.0.1:33418');
    expect(consent.text).toContain(first.org_id);
    expect(consent.text).toContain(chosen.org_id);
    expect(consent.text).not.toContain(stranger.org_id);
    expect(consent.headers.get('content-security-policy')).toContain("form-action 'self' http://127.0.0.1:33418");
    expect(location.origin + location.pathname).toBe(REDIRECT);
    expect(location.searchParams.get('state')).toBe('state-123');
    expect(location.searchParams.get('iss')).toBe(stack().baseUrl);
    const code = location.searchParams.get('code')!;
    expect(code).toMatch(/^wqs_ac_/);

    await transport.finishAuth(code);
    expect(provider.saved).toMatchObject({ token_type: 'Bearer', expires_in: 3600, scope: 'mcp' });
    expect(provider.saved!.access_token).toMatch(/^wqs_at_/);
    // Stored only as hashes: no row holds the token itself.
    const raw = await db().query(`SELECT count(*)::int AS n FROM oauth_tokens WHERE encode(token_hash, 'escape') LIKE '%wqs_%'`);
    expect(raw.rows[0].n).toBe(0);

    const client = new Client({ name: 'oauth-flow', version: '1' });
    await client.connect(new StreamableHTTPClientTransport(url, { authProvider: provider }));
    try {
      const { tools } = await client.listTools();
      expect(tools.map((t) => t.name)).toContain('svc_run_workflow');
      const r = await callTool(client, 'svc_run_workflow', { api: '@weather', operation: 'current_weather', input: { city: 'London' } });
      expect(r.isError).toBeFalsy();
      expect(r.sc).toMatchObject({ status: 'succeeded', receipt: { billing: { status: 'settled', charged_credits: 1 } } });
      expect((await balanceOf(chosen.org_id)).charged).toBe(1);
      expect(await ledgerOf(chosen.org_id)).toEqual([
        { request_id: r.sc.request_id, kind: 'reserve', amount: expect.any(Number) },
        { request_id: r.sc.request_id, kind: 'settle', amount: expect.any(Number) },
      ]);
      expect(await ledgerOf(first.org_id)).toEqual([]);
      // The run is the chosen organization's: its key sees it, the other organization's does not.
      expect((await call('GET', `/v1/query/requests/${r.sc.request_id}`, { key: chosen.api_key })).status).toBe(200);
      expect((await call('GET', `/v1/query/requests/${r.sc.request_id}`, { key: first.api_key })).status).toBe(404);
    } finally {
      await client.close();
    }

    // An access token is an MCP credential only: the REST API still takes API keys alone.
    expect((await call('GET', '/v1/auth', { key: provider.saved!.access_token })).status).toBe(401);
  }, 180_000);
});
