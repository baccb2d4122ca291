// OAuth clients of the MCP authorization server: Dynamic Client Registration (RFC 7591) and the
// redirect URI rules every client follows (https, or http on a loopback address; exact match, except
// that a loopback redirect may use any port, RFC 8252 §7.3).
import { z } from 'zod';
import type { Db } from '../db/pool.ts';
import { newClientId } from './secrets.ts';
import { displayTextProblem } from '../accounts/display-text.ts';

export const MAX_REDIRECT_URIS = 10;
export const MAX_URI_LENGTH = 2000;
const LOOPBACK_HOSTS = new Set(['127.0.0.1', '[::1]', 'localhost']);

export function isLoopback(u: URL) {
  return u.protocol === 'http:' && LOOPBACK_HOSTS.has(u.hostname);
}

/** Why a redirect URI cannot be registered, or null when it can. */
export function redirectUriProblem(value: string): string | null {
  if (value.length > MAX_URI_LENGTH) return `longer than ${MAX_URI_LENGTH} characters`;
  let u: URL;
  try {
    u = new URL(value);
  } catch {
    return 'not an absolute URL';
  }
  if (u.hash || value.includes('#')) return 'must not have a fragment';
  if (u.username || u.password) return 'must not carry credentials';
  if (u.protocol === 'https:') return null;
  if (isLoopback(u)) return null;
  return 'must be https, or http on a loopback address (127.0.0.1, [::1], localhost)';
}

/** Exact string match; for loopback http URIs the port may differ (native apps pick a free port). */
export function redirectUriMatches(registered: readonly string[], presented: string): boolean {
  if (registered.includes(presented)) return true;
  let p: URL;
  try {
    p = new URL(presented);
  } catch {
    return false;
  }
  // Only the port may differ: a fragment or credentials the registered URI could not have had are
  // refused here as at registration (the comparison below looks at neither).
  if (!isLoopback(p) || redirectUriProblem(presented) !== null) return false;
  const withoutPort = (u: URL) => `${u.protocol}//${u.hostname}${u.pathname}${u.search}`;
  return registered.some((r) => {
    try {
      const u = new URL(r);
      return isLoopback(u) && withoutPort(u) === withoutPort(p);
    } catch {
      return false;
    }
  });
}

// PostgreSQL text cannot hold NUL: a value with one is the caller's mistake (400), never a 503.
const NO_NUL = /^[^\u0000]*$/;
const text = (max: number) => z.string().max(max).regex(NO_NUL, 'must not contain NUL characters');

/** A refinement: a name the console shows, refused as display-text.ts says. */
export function displayText(v: string, ctx: z.RefinementCtx): void {
  const problem = displayTextProblem(v);
  if (problem) ctx.addIssue({ code: 'custom', message: problem });
}

const RedirectUri = text(MAX_URI_LENGTH).superRefine((v, ctx) => {
  const problem = redirectUriProblem(v);
  if (problem) ctx.addIssue({ code: 'custom', message: problem });
});

/** The registration body (RFC 7591 §2): bounded, public clients only, authorization code only. */
export const ClientRegistration = z.looseObject({
  redirect_uris: z.array(RedirectUri).min(1).max(MAX_REDIRECT_URIS),
  // Shown on the consent page and in the console: a name people read (no overrides, no invisibles).
  client_name: text(200).trim().min(1).superRefine(displayText).optional(),
  token_endpoint_auth_method: z.literal('none', 'only public clients (none) are supported').optional(),
  grant_types: z
    .array(z.enum(['authorization_code', 'refresh_token'], 'only authorization_code and refresh_token'))
    .max(2)
    .optional(),
  response_types: z.array(z.literal('code', 'only code')).max(1).optional(),
  // Missing is fine (many clients send none); what is asked for is narrowed to what exists.
  scope: text(500).optional(),
  client_uri: text(MAX_URI_LENGTH).url().optional(),
  logo_uri: text(MAX_URI_LENGTH).url().optional(),
  software_id: text(200).optional(),
  software_version: text(100).optional(),
});
export type ClientRegistration = z.infer<typeof ClientRegistration>;

export interface ClientRow {
  id: string;
  kind: 'dcr' | 'cimd';
  client_name: string;
  redirect_uris: string[];
  created_at: Date;
  fetched_at: Date | null;
}

export async function registerClient(db: Db, reg: ClientRegistration, scope: string) {
  const id = newClientId();
  const name = reg.client_name ?? 'Unnamed MCP client';
  const metadata = {
    redirect_uris: reg.redirect_uris,
    client_name: name,
    token_endpoint_auth_method: 'none',
    grant_types: ['authorization_code', 'refresh_token'],
    response_types: ['code'],
    scope,
    ...(reg.client_uri ? { client_uri: reg.client_uri } : {}),
    ...(reg.software_id ? { software_id: reg.software_id } : {}),
    ...(reg.software_version ? { software_version: reg.software_version } : {}),
  };
  const r = await db.query<{ created_at: Date }>(
    `INSERT INTO oauth_clients (id, kind, client_name, redirect_uris, metadata) VALUES ($1, 'dcr', $2, $3, $4) RETURNING created_at`,
    [id, name, reg.redirect_uris, metadata],
  );
  return { client_id: id, client_id_issued_at: Math.floor(r.rows[0]!.created_at.getTime() / 1000), ...metadata };
}

export async function findClient(db: Db, id: string): Promise<ClientRow | undefined> {
  if (id.length > MAX_URI_LENGTH) return undefined;
  const r = await db.query<ClientRow>('SELECT id, kind, client_name, redirect_uris, created_at, fetched_at FROM oauth_clients WHERE id = $1', [id]);
  return r.rows[0];
}

/**
 * Registration is refused (503) while this many never-used registered clients are younger than the
 * idle bound: the per-address limit does not bound a caller with many addresses, and each such
 * client is a row until maintenance removes it. Null when there is room; otherwise the seconds
 * until the oldest of them ages out of the count (the Retry-After). Two registrations racing at the
 * bound may both pass: the bound is approximate by a few, never unbounded.
 */
export async function unusedClientsFull(db: Db, a: { max: number; idleHours: number }): Promise<number | null> {
  const r = await db.query<{ n: number; retry: number | null }>(
    `SELECT count(*)::int AS n, ceil(extract(epoch FROM min(created_at) + make_interval(hours => $2) - now()))::int AS retry
       FROM (SELECT created_at FROM oauth_clients
              WHERE kind = 'dcr' AND last_used_at IS NULL AND created_at > now() - make_interval(hours => $2)
              ORDER BY created_at LIMIT $1) recent`,
    [a.max, a.idleHours],
  );
  const row = r.rows[0]!;
  return row.n >= a.max ? Math.max(1, row.retry ?? 1) : null;
}

/**
 * Housekeeping (the maintenance Schedule's retention step): remove clients nobody uses. A client
 * goes once it has no live token (access or refresh, rotated or not) in any grant, no unexpired
 * unredeemed code, and its last use (tokens issued to it, its metadata document fetched, or else
 * its registration) is older than `idleHours`. So a registration never completed goes `idleHours`
 * after it was made, a client whose grants all ended (revoked, refresh tokens expired) `idleHours`
 * after it last got tokens, and a cached metadata document `idleHours` after it was last fetched
 * (it is fetched again when named). A client with a live grant is never removed. Its grants, codes
 * and tokens (all ended) go with it by the foreign keys. The rows are locked first, skipping any a
 * request holds; a code being created for one meanwhile fails its foreign key (createCode: null).
 */
export async function deleteIdleClients(db: Db, a: { idleHours: number; batchSize: number }): Promise<number> {
  const r = await db.query(
    `DELETE FROM oauth_clients WHERE id IN (
       SELECT c.id FROM oauth_clients c
        WHERE greatest(c.created_at, c.fetched_at, c.last_used_at) < now() - make_interval(hours => $1)
          AND NOT EXISTS (SELECT 1 FROM oauth_grants g JOIN oauth_tokens t ON t.grant_id = g.id WHERE g.client_id = c.id AND t.expires_at > now())
          AND NOT EXISTS (SELECT 1 FROM oauth_codes k WHERE k.client_id = c.id AND k.expires_at > now() AND k.used_at IS NULL)
        LIMIT $2
        FOR UPDATE SKIP LOCKED)`,
    [a.idleHours, a.batchSize],
  );
  return r.rowCount ?? 0;
}
