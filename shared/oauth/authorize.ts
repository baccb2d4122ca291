// Checking an authorization request (RFC 6749 §4.1.1 with PKCE, RFC 8707 and RFC 9207), shared by
// the consent page's GET and its POST (which re-checks everything the form carries back).
// A bad client_id or redirect_uri is shown to the person, never redirected (§4.1.2.1): the
// redirect could be an attacker's. Everything else goes back to the client as `error=` when its
// redirect URI is a loopback one, and is shown to the person otherwise (no open redirect).
import type { Db } from '../db/pool.ts';
import { isLoopback, redirectUriMatches, type ClientRow } from './clients.ts';
import { resolveClient, type FetchClientDocument } from './client-documents.ts';
import { MCP_SCOPE } from './grants.ts';

export const AUTHORIZE_FIELDS = ['client_id', 'redirect_uri', 'response_type', 'code_challenge', 'code_challenge_method', 'state', 'scope', 'resource'] as const;
export type AuthorizeParams = Partial<Record<(typeof AUTHORIZE_FIELDS)[number], string>>;

export type AuthorizeCheck =
  | { kind: 'ok'; client: ClientRow; redirectUri: string; state: string | undefined; codeChallenge: string; resource: string; scope: string }
  | { kind: 'show'; message: string; /** 503 when the service is busy (the request itself may be fine); 400 otherwise. */ status?: 503 }
  | { kind: 'redirect'; to: string };

/** The request's own fields only, each a single string of bounded length (repeats are refused). */
export function authorizeParams(source: unknown): AuthorizeParams | null {
  const src = (source ?? {}) as Record<string, unknown>;
  const out: AuthorizeParams = {};
  for (const f of AUTHORIZE_FIELDS) {
    const v = src[f];
    if (v === undefined) continue;
    if (typeof v !== 'string' || v.length > 2048) return null;
    out[f] = v;
  }
  return out;
}

/** The client's redirect URI with the answer's parameters, `iss` always (RFC 9207). */
export function redirectWith(uri: string, params: Record<string, string | undefined>, issuer: string): string {
  const u = new URL(uri);
  for (const [k, v] of Object.entries(params)) if (v !== undefined) u.searchParams.set(k, v);
  u.searchParams.set('iss', issuer);
  return u.toString();
}

export async function checkAuthorize(db: Db, p: AuthorizeParams | null, o: { issuer: string; resource: string; fetchDocument?: FetchClientDocument; unusedDocumentsMax?: number; address?: string }): Promise<AuthorizeCheck> {
  if (!p) return { kind: 'show', message: 'The authorization request has a repeated or oversized parameter.' };
  if (!p.client_id) return { kind: 'show', message: 'The authorization request names no client (client_id).' };
  const client = await resolveClient(db, p.client_id, o.fetchDocument, o.unusedDocumentsMax, o.address);
  if (!client.ok) return { kind: 'show', message: client.message, ...(client.busy ? { status: 503 as const } : {}) };
  if (!p.redirect_uri || !redirectUriMatches(client.client.redirect_uris, p.redirect_uri)) {
    return { kind: 'show', message: 'The redirect address is not one this client registered, so the answer cannot be sent back to it.' };
  }
  // A refusal is sent back on its own only to a loopback address (an app on the person's own
  // machine). Anyone may register an https redirect URI without signing in, so redirecting there
  // before the person did anything would make this page an open redirector to any site on the
  // service's own address (RFC 9700 §4.11.2: redirect automatically only to a trusted URI); the
  // refusal is shown instead. After the person decides (Deny), the answer goes back wherever.
  const fail = (error: string, description: string): AuthorizeCheck =>
    isLoopback(new URL(p.redirect_uri!))
      ? { kind: 'redirect', to: redirectWith(p.redirect_uri!, { error, error_description: description, state: p.state }, o.issuer) }
      : { kind: 'show', message: `The app's authorization request cannot be answered (${error}): ${description}.` };
  if (p.response_type !== 'code') return fail('unsupported_response_type', 'response_type must be code');
  if (p.code_challenge_method !== 'S256') return fail('invalid_request', 'PKCE is required with code_challenge_method S256');
  if (!p.code_challenge || !/^[A-Za-z0-9_-]{43}$/.test(p.code_challenge)) return fail('invalid_request', 'code_challenge must be a base64url SHA-256 (43 characters)');
  if (p.resource !== o.resource) return fail('invalid_target', `resource must be ${o.resource}`);
  const scopes = (p.scope ?? MCP_SCOPE).split(' ').filter(Boolean);
  if (scopes.some((s) => s !== MCP_SCOPE)) return fail('invalid_scope', `the only scope is ${MCP_SCOPE}`);
  return { kind: 'ok', client: client.client, redirectUri: p.redirect_uri, state: p.state, codeChallenge: p.code_challenge, resource: p.resource, scope: MCP_SCOPE };
}
