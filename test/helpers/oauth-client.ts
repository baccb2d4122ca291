// The MCP SDK's OAuthClientProvider, in memory, for tests that run the SDK's own client auth flow.
// The "browser redirect" is recorded (authorizationUrl) for the test to follow as a person would,
// over HTTP with `approve` (the console's sign-in and consent form).
import type { OAuthClientProvider } from '@modelcontextprotocol/sdk/client/auth.js';
import type { OAuthClientInformationMixed, OAuthClientMetadata, OAuthTokens } from '@modelcontextprotocol/sdk/shared/auth.js';
import { expect } from 'vitest';
import { createUserInOrg } from '../../shared/accounts/users.ts';
import { PASSWORD, type ConsoleClient } from './console-http.ts';
import { db, newOrg } from './stack.ts';

export interface MemoryClientOptions {
  /** client_name in the metadata the client registers (or its document serves). */
  name: string;
  /** The loopback redirect URI. */
  redirect: string;
  /** The OAuth `state` it sends, for the test to find on the redirect. */
  state: string;
  /** A Client ID Metadata Document URL as its client id; without one it registers dynamically. */
  clientMetadataUrl?: string;
}

export class MemoryOAuthClient implements OAuthClientProvider {
  info: OAuthClientInformationMixed | undefined;
  saved: OAuthTokens | undefined;
  verifier = '';
  authorizationUrl: URL | undefined;
  readonly clientMetadataUrl: string | undefined;
  constructor(private readonly o: MemoryClientOptions) {
    this.clientMetadataUrl = o.clientMetadataUrl;
  }
  get redirectUrl() {
    return this.o.redirect;
  }
  get clientMetadata(): OAuthClientMetadata {
    return { client_name: this.o.name, redirect_uris: [this.o.redirect], token_endpoint_auth_method: 'none', grant_types: ['authorization_code', 'refresh_token'], response_types: ['code'] };
  }
  state = () => this.o.state;
  clientInformation = () => this.info;
  saveClientInformation = (i: OAuthClientInformationMixed) => void (this.info = i);
  tokens = () => this.saved;
  saveTokens = (t: OAuthTokens) => void (this.saved = t);
  redirectToAuthorization = (u: URL) => void (this.authorizationUrl = u);
  saveCodeVerifier = (v: string) => void (this.verifier = v);
  codeVerifier = () => this.verifier;
}

/**
 * Follows the authorization URL as a browser would, on the browser's own API: sign in when asked
 * (and come back to the same authorization request), pick `orgId`, approve.
 */
export async function approve(browser: ConsoleClient, authorizationUrl: URL, email: string, orgId: string) {
  const where = `${authorizationUrl.pathname}${authorizationUrl.search}`;
  let page = await browser.get(where);
  if (page.status === 303 && page.location?.startsWith('/console/sign-in')) {
    const next = new URL(page.location, browser.baseUrl).searchParams.get('next')!;
    const paramsOf = (p: string) => Object.fromEntries(new URL(p, browser.baseUrl).searchParams);
    expect(paramsOf(next)).toEqual(paramsOf(where));
    const signIn = await browser.submit(page.location, '/console/sign-in', { email, password: PASSWORD, next });
    expect(signIn.status).toBe(303);
    expect(signIn.location).toBe(next);
    page = await browser.get(where);
  }
  expect(page.status).toBe(200);
  const answer = await browser.submit(where, '/console/oauth/authorize', { ...Object.fromEntries(authorizationUrl.searchParams), org_id: orgId, decision: 'approve' });
  expect(answer.status).toBe(303);
  return { consent: page, location: new URL(answer.location!) };
}

/**
 * A person (a Member, password PASSWORD) in two organizations: the session starts on `first` (no
 * credits), the consent is to pick `chosen` (5 credits). `label` names both and prefixes the email.
 */
export async function personInTwoOrgs(label: string) {
  const first = await newOrg(0, `${label} first`);
  const chosen = await newOrg(5, `${label} chosen`);
  const email = `${label.toLowerCase()}-${Math.random().toString(36).slice(2, 10)}@example.com`;
  const user = await createUserInOrg(db(), { email, password: PASSWORD, orgId: first.org_id, role: 'member' });
  await db().query(`INSERT INTO memberships (org_id, user_id, role) VALUES ($1, $2, 'member')`, [chosen.org_id, user.user_id]);
  return { first, chosen, email };
}
