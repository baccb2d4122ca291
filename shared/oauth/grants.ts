// Authorization codes, grants and tokens. A grant is one consent (user, organization, client,
// resource); its tokens are opaque and stored as SHA-256 hashes. Every check joins the membership,
// so a removed member's tokens stop at once (the grant's foreign key also deletes them).
import { tx, type Db, type DbClient } from '../db/pool.ts';
import { ACCESS_PREFIX, CODE_PREFIX, REFRESH_PREFIX, hashSecret, newGrantId, newSecret, pkceMatches } from './secrets.ts';

export const CODE_TTL_SECONDS = 60;
export const ACCESS_TTL_SECONDS = 3600;
export const REFRESH_TTL_DAYS = 30;
/** A rotated refresh token works once more within this window: two concurrent refreshes both succeed. */
export const REFRESH_GRACE_SECONDS = 30;
/** The one scope: use the organization's MCP tools (run workflows, charged to the organization). */
export const MCP_SCOPE = 'mcp';

export type OAuthErrorCode = 'invalid_grant' | 'invalid_target' | 'invalid_request' | 'invalid_scope';
export class GrantError extends Error {
  constructor(
    readonly code: OAuthErrorCode,
    message: string,
  ) {
    super(message);
    this.name = 'GrantError';
  }
}

export interface CodeRequest {
  clientId: string;
  userId: string;
  orgId: string;
  redirectUri: string;
  codeChallenge: string;
  resource: string;
  scope: string;
}

/** A code, or null when the client was removed meanwhile (maintenance removes idle clients). */
export async function createCode(db: Db, c: CodeRequest): Promise<string | null> {
  const code = newSecret(CODE_PREFIX);
  try {
    await db.query(
      `INSERT INTO oauth_codes (code_hash, client_id, user_id, org_id, redirect_uri, code_challenge, resource, scope, expires_at)
       VALUES ($1, $2, $3, $4, $5, $6, $7, $8, now() + make_interval(secs => $9))`,
      [hashSecret(code), c.clientId, c.userId, c.orgId, c.redirectUri, c.codeChallenge, c.resource, c.scope, CODE_TTL_SECONDS],
    );
  } catch (err) {
    if ((err as { code?: string; constraint?: string }).code === '23503' && (err as { constraint?: string }).constraint === 'oauth_codes_client_id_fkey') return null;
    throw err;
  }
  // Housekeeping: codes expired an hour ago, redeemed or not (a replay of one is then just unknown).
  if (Math.random() < 0.05) await db.query(`DELETE FROM oauth_codes WHERE expires_at < now() - interval '1 hour'`);
  return code;
}

export interface TokenSet {
  access_token: string;
  token_type: 'Bearer';
  expires_in: number;
  refresh_token: string;
  scope: string;
}

async function issue(db: Db | DbClient, grantId: string, clientId: string, scope: string): Promise<TokenSet> {
  const access = newSecret(ACCESS_PREFIX);
  const refresh = newSecret(REFRESH_PREFIX);
  await db.query(
    `INSERT INTO oauth_tokens (token_hash, grant_id, kind, expires_at) VALUES
       ($1, $3, 'access', now() + make_interval(secs => $4)),
       ($2, $3, 'refresh', now() + make_interval(days => $5))`,
    [hashSecret(access), hashSecret(refresh), grantId, ACCESS_TTL_SECONDS, REFRESH_TTL_DAYS],
  );
  // The client's last use: maintenance removes a client only once it is idle (clients.ts,
  // deleteIdleClients), and registration counts the clients never used.
  await db.query('UPDATE oauth_clients SET last_used_at = now() WHERE id = $1', [clientId]);
  return { access_token: access, token_type: 'Bearer', expires_in: ACCESS_TTL_SECONDS, refresh_token: refresh, scope };
}

/**
 * Redeem a code. The code's row is locked and marked used first (single use even under concurrent
 * exchanges), then checked. Any mismatch is invalid_grant, as RFC 6749 §5.2 says; the code is spent
 * either way. A code presented again after it was used is a replay (it leaked, or someone raced the
 * client): the grant it created ends, every token of it (RFC 6749 §4.1.2), and the answer is the
 * same invalid_grant. A used code is kept, hashed, until the housekeeping delete after it expires.
 */
export async function redeemCode(db: Db, a: { code: string; clientId: string; redirectUri: string; verifier: string; resource: string }): Promise<TokenSet> {
  const outcome = await tx(db, async (c): Promise<TokenSet | GrantError> => {
    const r = await c.query(
      `SELECT c.client_id, c.user_id, c.org_id, c.redirect_uri, c.code_challenge, c.resource, c.scope, c.used_at, c.grant_id, c.expires_at > now() AS live
         FROM oauth_codes c WHERE c.code_hash = $1 FOR UPDATE`,
      [hashSecret(a.code)],
    );
    const row = r.rows[0];
    const gone = new GrantError('invalid_grant', 'The authorization code is unknown, used or expired');
    if (!row) return gone;
    if (row.used_at) {
      if (row.grant_id) await c.query('DELETE FROM oauth_grants WHERE id = $1', [row.grant_id]);
      return gone;
    }
    await c.query('UPDATE oauth_codes SET used_at = now() WHERE code_hash = $1', [hashSecret(a.code)]);
    if (!row.live) return gone;
    if (row.client_id !== a.clientId) return new GrantError('invalid_grant', 'The authorization code was issued to another client');
    if (row.redirect_uri !== a.redirectUri) return new GrantError('invalid_grant', 'redirect_uri differs from the authorization request');
    if (!pkceMatches(a.verifier, row.code_challenge)) return new GrantError('invalid_grant', 'code_verifier does not match the code_challenge');
    if (row.resource !== a.resource) return new GrantError('invalid_target', 'resource differs from the authorization request');
    // The grant and its first tokens together: no grant without tokens, no tokens without a grant.
    // The code row's foreign key cascades from the membership, so a member removed before this
    // exchange left no code; one removed meanwhile fails the grant's foreign key (23503, below).
    const grantId = newGrantId();
    await c.query(`INSERT INTO oauth_grants (id, client_id, user_id, org_id, resource, scope) VALUES ($1, $2, $3, $4, $5, $6)`, [
      grantId, row.client_id, row.user_id, row.org_id, row.resource, row.scope,
    ]);
    await c.query('UPDATE oauth_codes SET grant_id = $1 WHERE code_hash = $2', [grantId, hashSecret(a.code)]);
    return issue(c, grantId, row.client_id, row.scope);
  }).catch((err: { code?: string }) => {
    if (err.code === '23503') throw new GrantError('invalid_grant', 'The person is no longer a member of the organization');
    throw err;
  });
  if (outcome instanceof GrantError) throw outcome;
  return outcome;
}

/**
 * Rotate a refresh token. The presented token is marked rotated; a token already rotated is honored
 * once more within the grace window (the race of two concurrent refreshes), never after. A rotated
 * token presented beyond that is a replay: either the client or someone who copied the token is
 * using an old one, and which is unknowable, so the whole grant ends (RFC 9700 §4.14.2). Without
 * that, whoever refreshed first with a stolen token kept the grant while the client was refused.
 */
export async function refresh(db: Db, a: { refreshToken: string; clientId: string; resource: string | undefined; scope?: string | undefined }): Promise<TokenSet> {
  // RFC 6749 §6: a requested scope must not exceed what the grant holds (omitted: the grant's own).
  // Checked before the token is rotated, so a refused request leaves the token as it was.
  const asked = (a.scope ?? '').split(' ').filter(Boolean);
  if (asked.length > 0) {
    const g = await db.query<{ scope: string }>(
      `SELECT g.scope FROM oauth_tokens t JOIN oauth_grants g ON g.id = t.grant_id
        WHERE t.token_hash = $1 AND t.kind = 'refresh' AND g.client_id = $2`,
      [hashSecret(a.refreshToken), a.clientId],
    );
    const held = new Set((g.rows[0]?.scope ?? '').split(' '));
    if (g.rows[0] && asked.some((s) => !held.has(s))) throw new GrantError('invalid_scope', `scope may only name scopes the grant holds: ${g.rows[0].scope}`);
  }
  const r = await db.query(
    `UPDATE oauth_tokens t
        SET rotated_at = COALESCE(t.rotated_at, now()),
            grace_used = t.rotated_at IS NOT NULL
       FROM oauth_grants g JOIN memberships m ON m.org_id = g.org_id AND m.user_id = g.user_id
      WHERE t.token_hash = $1 AND t.kind = 'refresh' AND g.id = t.grant_id AND g.client_id = $2
        AND t.expires_at > now()
        AND (t.rotated_at IS NULL OR (NOT t.grace_used AND t.rotated_at > now() - make_interval(secs => $3)))
      RETURNING g.id, g.resource, g.scope`,
    [hashSecret(a.refreshToken), a.clientId, REFRESH_GRACE_SECONDS],
  );
  const row = r.rows[0];
  if (!row) {
    await db.query(
      `DELETE FROM oauth_grants g USING oauth_tokens t
        WHERE t.token_hash = $1 AND t.kind = 'refresh' AND t.rotated_at IS NOT NULL AND g.id = t.grant_id AND g.client_id = $2`,
      [hashSecret(a.refreshToken), a.clientId],
    );
    throw new GrantError('invalid_grant', 'The refresh token is unknown, expired, revoked or already used');
  }
  if (a.resource !== undefined && a.resource !== row.resource) throw new GrantError('invalid_target', 'resource differs from the grant');
  // Expired tokens are of no further use. Rotated refresh tokens stay until they expire: a replay of
  // one is recognized (above) for as long as it could have been used.
  if (Math.random() < 0.05) await db.query(`DELETE FROM oauth_tokens WHERE expires_at < now()`);
  return issue(db, row.id, a.clientId, row.scope);
}

/**
 * RFC 7009: a refresh token revokes its whole grant (every token of it); an access token only
 * itself. Unknown tokens and other clients' tokens are ignored (the answer is 200 either way).
 */
export async function revokeToken(db: Db, token: string, clientId: string): Promise<void> {
  const r = await db.query(
    `SELECT t.kind, t.grant_id FROM oauth_tokens t JOIN oauth_grants g ON g.id = t.grant_id WHERE t.token_hash = $1 AND g.client_id = $2`,
    [hashSecret(token), clientId],
  );
  const row = r.rows[0];
  if (!row) return;
  if (row.kind === 'refresh') await db.query('DELETE FROM oauth_grants WHERE id = $1', [row.grant_id]);
  else await db.query('DELETE FROM oauth_tokens WHERE token_hash = $1', [hashSecret(token)]);
}

export type AccessCheck =
  | { ok: true; orgId: string; userId: string; grantId: string; clientId: string; plan: string }
  | { ok: false; reason: string };

/** An access token for `resource`, of a member still in the organization, not expired. */
export async function checkAccessToken(db: Db, token: string, resource: string): Promise<AccessCheck> {
  const r = await db.query(
    `SELECT g.id, g.org_id, g.user_id, g.client_id, g.resource, o.plan, t.expires_at > now() AS live,
            g.last_used_at IS NULL OR g.last_used_at < now() - interval '1 minute' AS stale_use
       FROM oauth_tokens t
       JOIN oauth_grants g ON g.id = t.grant_id
       JOIN memberships m ON m.org_id = g.org_id AND m.user_id = g.user_id
       JOIN organizations o ON o.id = g.org_id
      WHERE t.token_hash = $1 AND t.kind = 'access'`,
    [hashSecret(token)],
  );
  const row = r.rows[0];
  if (!row) return { ok: false, reason: 'unknown or revoked access token' };
  if (!row.live) return { ok: false, reason: 'the access token has expired' };
  if (row.resource !== resource) return { ok: false, reason: 'the access token is for another resource' };
  if (row.stale_use) await db.query(`UPDATE oauth_grants SET last_used_at = now() WHERE id = $1`, [row.id]);
  return { ok: true, orgId: row.org_id, userId: row.user_id, grantId: row.id, clientId: row.client_id, plan: row.plan };
}

export interface ConnectedClient {
  client_id: string;
  client_name: string;
  users: number;
  connected_at: Date;
  last_used_at: Date | null;
}

/** The organization's connected MCP clients (grants grouped by client), for the console. */
export async function connectedClients(db: Db, orgId: string): Promise<ConnectedClient[]> {
  const r = await db.query<ConnectedClient>(
    `SELECT c.id AS client_id, c.client_name, count(DISTINCT g.user_id)::int AS users, min(g.created_at) AS connected_at, max(g.last_used_at) AS last_used_at
       FROM oauth_grants g JOIN oauth_clients c ON c.id = g.client_id
      WHERE g.org_id = $1
        -- A grant whose refresh tokens have all expired connects nothing any more.
        AND EXISTS (SELECT 1 FROM oauth_tokens t WHERE t.grant_id = g.id AND t.kind = 'refresh' AND t.rotated_at IS NULL AND t.expires_at > now())
      GROUP BY c.id, c.client_name ORDER BY min(g.created_at) DESC`,
    [orgId],
  );
  return r.rows;
}

/** Revoke every grant (and so every token) of a client in one organization. */
export async function revokeClientInOrg(db: Db, orgId: string, clientId: string): Promise<boolean> {
  const r = await db.query('DELETE FROM oauth_grants WHERE org_id = $1 AND client_id = $2', [orgId, clientId]);
  return (r.rowCount ?? 0) > 0;
}
