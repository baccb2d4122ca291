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
    const key = await insertKey(c, id);
    return { org_id: id, name, api_key: key.api_key, key_id: key.key_id, credits };
  });
}

async function insertKey(c: Db | DbClient, orgId: string, expiresAt: Date | null = null) {
  const apiKey = newApiKey();
  const keyId = newApiKeyId();
  await c.query('INSERT INTO api_keys (id, org_id, key_hash, prefix, expires_at) VALUES ($1, $2, $3, $4, $5)', [
    keyId,
    orgId,
    sha256(apiKey),
    apiKey.slice(0, 12),
    expiresAt,
  ]);
  return { api_key: apiKey, key_id: keyId };
}

export async function createKey(db: Db, orgId: string, expiresAt: Date | null = null) {
  const org = await db.query('SELECT 1 FROM organizations WHERE id = $1', [orgId]);
  if (org.rowCount === 0) throw new Error(`organization ${orgId} not found`);
  const key = await insertKey(db, orgId, expiresAt);
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
  const r = await db.query(
    `SELECT k.id, k.org_id, k.expires_at, k.revoked_at, o.plan,
            k.last_used_at IS NULL OR k.last_used_at < now() - interval '1 minute' AS stale_use
       FROM api_keys k JOIN organizations o ON o.id = k.org_id
      WHERE k.key_hash = $1`,
    [sha256(apiKey)],
  );
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
}

/** An organization's keys, newest first (never the key itself: only its hash is stored). */
export async function listKeys(db: Db, orgId: string): Promise<KeyInfo[]> {
  const r = await db.query(
    'SELECT id AS key_id, prefix, created_at, last_used_at, expires_at, revoked_at FROM api_keys WHERE org_id = $1 ORDER BY created_at DESC, id',
    [orgId],
  );
  return r.rows;
}

/** Revoke one of an organization's keys by id; false when it is not that organization's key. */
export async function revokeKeyOfOrg(db: Db, orgId: string, keyId: string): Promise<boolean> {
  const r = await db.query('UPDATE api_keys SET revoked_at = COALESCE(revoked_at, now()) WHERE id = $1 AND org_id = $2', [keyId, orgId]);
  return r.rowCount === 1;
}

/** The credit balance of an organization, or undefined when there is none. */
export async function balanceOf(db: Db, orgId: string): Promise<{ granted: number; available: number; reserved: number; charged: number } | undefined> {
  const r = await db.query('SELECT granted, available, reserved, charged FROM credit_balances WHERE org_id = $1', [orgId]);
  return r.rows[0];
}
