// Organizations, API keys and credit grants: what the admin command and the dev bootstrap use.
import { newApiKey, newApiKeyId, newOrgId, sha256 } from '../ids.ts';
import { tx, type Db, type DbClient } from './pool.ts';
import { grantCredits } from './credits.ts';

/**
 * The platform organization: owner of the demo catalog and of every workflow published without
 * an owner. A fixed, well-known id, so its own key can be told apart (own_api) and the migration
 * that made owners mandatory can refer to it.
 */
export const PLATFORM_ORG_ID = 'org_platform';
export const PLATFORM_ORG_NAME = 'Platform';

/** Create the platform organization if it is missing (idempotent; no credits, no key). */
export async function ensurePlatformOrg(db: Db): Promise<void> {
  await tx(db, async (c) => {
    await c.query('INSERT INTO organizations (id, name) VALUES ($1, $2) ON CONFLICT (id) DO NOTHING', [PLATFORM_ORG_ID, PLATFORM_ORG_NAME]);
    await c.query('INSERT INTO credit_balances (org_id) VALUES ($1) ON CONFLICT (org_id) DO NOTHING', [PLATFORM_ORG_ID]);
  });
}

export interface CreatedOrg {
  org_id: string;
  name: string;
  api_key: string;
  key_id: string;
  credits: number;
}

export async function createOrg(db: Db, name: string, credits: number, id = newOrgId()): Promise<CreatedOrg> {
  return tx(db, async (c) => {
    await c.query('INSERT INTO organizations (id, name) VALUES ($1, $2)', [id, name]);
    await c.query('INSERT INTO credit_balances (org_id) VALUES ($1)', [id]);
    if (credits > 0) await grantCredits(c, id, credits, 'initial grant');
    const key = await insertKey(c, id, null, OPERATOR);
    return { org_id: id, name, api_key: key.api_key, key_id: key.key_id, credits };
  });
}

/**
 * Who makes a key: a member in the console (their user and the address they have in the
 * organization now), or an operator (the admin command, the dev bootstrap, a new organization's
 * first key). Recorded on the key (migration 1700000002200).
 */
export type KeyCreator = { via: 'operator' } | { via: 'console'; userId: string; email: string };
export const OPERATOR: KeyCreator = { via: 'operator' };

async function insertKey(c: Db | DbClient, orgId: string, expiresAt: Date | null, creator: KeyCreator) {
  const apiKey = newApiKey();
  const keyId = newApiKeyId();
  const by = creator.via === 'console' ? creator : null;
  await c.query(
    'INSERT INTO api_keys (id, org_id, key_hash, prefix, expires_at, created_via, created_by, created_by_email) VALUES ($1, $2, $3, $4, $5, $6, $7, $8)',
    [keyId, orgId, sha256(apiKey), apiKey.slice(0, 12), expiresAt, creator.via, by?.userId ?? null, by?.email ?? null],
  );
  return { api_key: apiKey, key_id: keyId };
}

export async function createKey(db: Db, orgId: string, expiresAt: Date | null = null, creator: KeyCreator = OPERATOR) {
  const org = await db.query('SELECT 1 FROM organizations WHERE id = $1', [orgId]);
  if (org.rowCount === 0) throw new Error(`organization ${orgId} not found`);
  const key = await insertKey(db, orgId, expiresAt, creator);
  return { org_id: orgId, ...key, expires_at: expiresAt?.toISOString() ?? null };
}

export async function revokeKey(db: Db, apiKey: string) {
  const r = await db.query(
    'UPDATE api_keys SET revoked_at = COALESCE(revoked_at, now()) WHERE key_hash = $1 RETURNING id, org_id, revoked_at',
    [sha256(apiKey)],
  );
  if (r.rowCount === 0) throw new Error('API key not found');
  const row = r.rows[0];
  return { key_id: row.id as string, org_id: row.org_id as string, revoked_at: (row.revoked_at as Date).toISOString() };
}

/**
 * Revoke a key by its id (`key_…`, what the console lists and a leak report can name): the operator
 * rarely holds the key itself, only its organization does.
 */
export async function revokeKeyById(db: Db, keyId: string) {
  const r = await db.query('UPDATE api_keys SET revoked_at = COALESCE(revoked_at, now()) WHERE id = $1 RETURNING id, org_id, revoked_at', [keyId]);
  if (r.rowCount === 0) throw new Error(`API key ${keyId} not found`);
  const row = r.rows[0];
  return { key_id: row.id as string, org_id: row.org_id as string, revoked_at: (row.revoked_at as Date).toISOString() };
}

export async function grant(db: Db, orgId: string, credits: number) {
  return tx(db, async (c) => {
    const org = await c.query('SELECT 1 FROM organizations WHERE id = $1', [orgId]);
    if (org.rowCount === 0) throw new Error(`organization ${orgId} not found`);
    await grantCredits(c, orgId, credits, 'admin grant');
    const b = await c.query('SELECT granted, available, reserved, charged FROM credit_balances WHERE org_id = $1', [orgId]);
    return { org_id: orgId, granted_now: credits, balance: b.rows[0] };
  });
}

export type KeyCheck =
  | { ok: true; orgId: string; keyId: string; plan: string }
  | { ok: false; code: 'invalid_api_key' | 'expired_api_key' | 'revoked_api_key' };

/** Look a key up by its hash; no cache, so a revocation takes effect on the next request. */
export async function checkApiKey(db: Db, apiKey: string): Promise<KeyCheck> {
  // Named: prepared once per pooled connection, so each request skips parsing and planning (issue 11).
  const r = await db.query({
    name: 'check_api_key',
    text: `SELECT k.id, k.org_id, k.expires_at, k.revoked_at, o.plan,
                  k.last_used_at IS NULL OR k.last_used_at < now() - interval '1 minute' AS stale_use
             FROM api_keys k JOIN organizations o ON o.id = k.org_id
            WHERE k.key_hash = $1`,
    values: [sha256(apiKey)],
  });
  const row = r.rows[0];
  if (!row) return { ok: false, code: 'invalid_api_key' };
  if (row.revoked_at) return { ok: false, code: 'revoked_api_key' };
  if (row.expires_at && (row.expires_at as Date).getTime() <= Date.now()) return { ok: false, code: 'expired_api_key' };
  // "Last used" for the console, minute-accurate: at most one write per key a minute, not one per request.
  if (row.stale_use) {
    await db.query(`UPDATE api_keys SET last_used_at = now() WHERE id = $1 AND (last_used_at IS NULL OR last_used_at < now() - interval '1 minute')`, [row.id]);
  }
  return { ok: true, orgId: row.org_id, keyId: row.id, plan: row.plan };
}

export interface KeyInfo {
  key_id: string;
  prefix: string;
  created_at: Date;
  last_used_at: Date | null;
  expires_at: Date | null;
  revoked_at: Date | null;
  /** 'console', 'operator', or null: made before this was recorded. */
  created_via: 'console' | 'operator' | null;
  /** The member who made it in the console (a user id), when known. */
  created_by: string | null;
  /** Their address in this organization when they made it. */
  created_by_email: string | null;
  /** Whether created_by is a member of this organization now. */
  created_by_member: boolean;
}

const KEY_COLUMNS = `k.id AS key_id, k.prefix, k.created_at, k.last_used_at, k.expires_at, k.revoked_at,
  k.created_via, k.created_by, k.created_by_email, m.user_id IS NOT NULL AS created_by_member`;
/** Membership of the key's creator in the key's own organization: never another organization's. */
const CREATOR_MEMBERSHIP = 'LEFT JOIN memberships m ON m.org_id = k.org_id AND m.user_id = k.created_by';
/** A key that still opens the API (what revoking all of a member's keys revokes). */
const ACTIVE = 'k.revoked_at IS NULL AND (k.expires_at IS NULL OR k.expires_at > now())';

/**
 * An organization's keys, newest first (never the key itself: only its hash is stored); with
 * `createdBy`, only those that user made in this organization.
 */
export async function listKeys(db: Db, orgId: string, createdBy?: string): Promise<KeyInfo[]> {
  const r = await db.query(
    `SELECT ${KEY_COLUMNS} FROM api_keys k ${CREATOR_MEMBERSHIP}
      WHERE k.org_id = $1 AND ($2::text IS NULL OR k.created_by = $2) ORDER BY k.created_at DESC, k.id`,
    [orgId, createdBy ?? null],
  );
  return r.rows;
}

export interface KeyCreatorInfo {
  user_id: string;
  /** Their address in this organization when they last made a key here. */
  email: string;
  member: boolean;
  active_keys: number;
}

/**
 * Everyone who made keys of this organization in the console, with how many of those still work;
 * with `userId`, only that user (none when they made no key here).
 */
export async function keyCreators(db: Db, orgId: string, userId?: string): Promise<KeyCreatorInfo[]> {
  const r = await db.query(
    `SELECT k.created_by AS user_id, (array_agg(k.created_by_email ORDER BY k.created_at DESC))[1] AS email,
            bool_or(m.user_id IS NOT NULL) AS member, (count(*) FILTER (WHERE ${ACTIVE}))::int AS active_keys
       FROM api_keys k ${CREATOR_MEMBERSHIP}
      WHERE k.org_id = $1 AND k.created_by IS NOT NULL AND ($2::text IS NULL OR k.created_by = $2)
      GROUP BY k.created_by ORDER BY member DESC, email, user_id`,
    [orgId, userId ?? null],
  );
  return r.rows;
}

/** Revoke one of an organization's keys by id; false when it is not that organization's key. */
export async function revokeKeyOfOrg(db: Db, orgId: string, keyId: string): Promise<boolean> {
  const r = await db.query('UPDATE api_keys SET revoked_at = COALESCE(revoked_at, now()) WHERE id = $1 AND org_id = $2', [keyId, orgId]);
  return r.rowCount === 1;
}

/**
 * Revoke every key a user made in this organization that still works (an Owner or Administrator,
 * typically after removing that member); the ids revoked, none for another organization's keys.
 */
export async function revokeKeysCreatedBy(db: Db, orgId: string, userId: string): Promise<string[]> {
  const r = await db.query(`UPDATE api_keys k SET revoked_at = now() WHERE k.org_id = $1 AND k.created_by = $2 AND ${ACTIVE} RETURNING k.id`, [orgId, userId]);
  return r.rows.map((row) => row.id as string);
}

/** The credit balance of an organization, or undefined when there is none. */
export async function balanceOf(db: Db, orgId: string): Promise<{ granted: number; available: number; reserved: number; charged: number } | undefined> {
  const r = await db.query('SELECT granted, available, reserved, charged FROM credit_balances WHERE org_id = $1', [orgId]);
  return r.rows[0];
}
