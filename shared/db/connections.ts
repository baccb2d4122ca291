// Connected accounts and access keys of organizations, encrypted at rest.
//
// A connection holds a JSON object of secrets (an account: `{"email": …, "password": …}`; an access
// key: `{"WEATHER_API_KEY": …}`), encrypted with AES-256-GCM under the configured key
// (CONNECTIONS_ENCRYPTION_KEY; in dev a key generated into $DATA_DIR/connections-key). The
// additional authenticated data binds a ciphertext to its row (id, organization, kind, name, site),
// so a ciphertext copied into another organization's row does not decrypt.
//
// Rules kept here and by the callers:
// - Secrets are decrypted only in the execute activity, only for the calling organization (a public
//   workflow never reaches its creator's connections), and are handed to the recipe runner only.
// - Nothing returned by this module to the API or the admin command contains a secret value: only
//   ids, names, statuses and the *names* of the secret fields. Errors never include values.
// - Results of runs that used a connection are never cached. The service has no result cache; the
//   only retained results are the idempotent replays of one request to the same organization
//   (spec: idempotent result retention), which is not a cache shared across requests.
import { createCipheriv, createDecipheriv, createHash, createSecretKey, randomBytes, type KeyObject } from 'node:crypto';
import fs from 'node:fs/promises';
import path from 'node:path';
import type { AccessRequirement } from '../catalog/types.ts';
import type { Config } from '../config.ts';
import { tx, type Db, type DbClient } from './pool.ts';
import { ServiceError } from '../errors.ts';
import { MIN_SECRET_LENGTH, isProtectableSecret } from '../secrets.ts';
import { HOST_NAME_PATTERN } from '../host-name.ts';

export type ConnectionKind = AccessRequirement['kind'];
export type ConnectionStatus = 'active' | 'needs_reauth' | 'revoked';
/** What an organization has for one access requirement. */
export type AccessStatus = 'connected' | 'missing' | 'needs_reauth' | 'revoked';

export interface AccessItem {
  kind: ConnectionKind;
  name: string;
  site: string;
  status: AccessStatus;
}

/** A connection as shown to operators and the API: never the secret values. */
export interface ConnectionInfo {
  connection_id: string;
  org_id: string;
  kind: ConnectionKind;
  name: string;
  site: string;
  status: ConnectionStatus;
  secret_names: string[];
  created_at: string;
  updated_at: string;
}

/**
 * A bad argument to add/revoke/expire: `invalid_input`, `param` naming the field (`secret.password`
 * for a field of the secret) and `details.issues` (the same path and message), as the spec's error
 * envelope has it. The message never contains a secret value.
 */
export class ConnectionError extends ServiceError {
  constructor(message: string, param: string) {
    super('invalid_input', message, { param, details: { issues: [{ path: param, message }] } });
    this.name = 'ConnectionError';
  }
}

const NAME_RE = /^[A-Za-z_][A-Za-z0-9_]{0,99}$/;
/**
 * A host name of at most 253 characters, as workflows' access requirements name sites
 * (shared/host-name.ts). `shop.example.test:8443` or `..` matched no requirement, so such a
 * connection was stored, listed and never used.
 */
const SITE_RE = new RegExp(`^(?=.{1,253}$)${HOST_NAME_PATTERN.slice(1)}`);
const ID_RE = /^conn_[0-9a-f]{24}$/;
const KEY_VERSION = 1;

/** The console page that adds a connection, filled in: `details.access[].add_url` of access errors, after its base URL. */
export const ADD_CONNECTION_PATH = '/console/connections/new';
export const addConnectionPath = (a: { kind: ConnectionKind; name: string; site: string }) =>
  `${ADD_CONNECTION_PATH}?${new URLSearchParams({ kind: a.kind, name: a.name, site: a.site })}`;

/**
 * The fields of an add-connection link (`addConnectionPath`), or null for anything else: only the
 * exact path the service writes, with a valid kind, name and site, so the console can return to it
 * after sign-in (never an open redirect) and fill its form from it.
 */
export function addConnectionLink(v: unknown): { kind: ConnectionKind; name: string; site: string } | null {
  if (typeof v !== 'string' || v.length > 1024 || !v.startsWith(`${ADD_CONNECTION_PATH}?`)) return null;
  const q = new URLSearchParams(v.slice(ADD_CONNECTION_PATH.length + 1));
  const kind = q.get('kind');
  const name = q.get('name') ?? '';
  const site = q.get('site') ?? '';
  if ((kind !== 'account' && kind !== 'access_key') || !NAME_RE.test(name) || !SITE_RE.test(site)) return null;
  const fields = { kind, name, site } as const;
  return addConnectionPath(fields) === v ? fields : null;
}

export const newConnectionId = () => `conn_${randomBytes(12).toString('hex')}`;

// --- keys ----------------------------------------------------------------------------------------

export interface Keyring {
  /**
   * Encrypts new rows. Keys are KeyObjects, made once: given raw bytes, Node 24's createCipheriv
   * checks and wraps them on every call, which took three times the cipher's own work for a
   * Temporal payload (26 against 9 µs).
   */
  current: { id: string; key: KeyObject };
  /** Every key that may decrypt (current and previous), by id. */
  byId: Map<string, KeyObject>;
}

/** A key's id: a digest prefix, so rows (and Temporal payloads) name their key without revealing it. */
const keyId = (key: Buffer) => createHash('sha256').update(key).digest('hex').slice(0, 16);

function decodeKey(b64: string, setting: string): Buffer {
  const key = Buffer.from(b64.trim(), 'base64');
  if (key.length !== 32) throw new Error(`${setting} must be base64 of exactly 32 bytes (openssl rand -base64 32)`);
  return key;
}

/** A dev key in $DATA_DIR/<fileName>: created once (atomically, mode 0600), then reused. Also the
 *  Temporal payload key's (shared/temporal/payload-keys.ts), in its own file. */
const DEV_KEY_FILE = 'connections-key';

async function devKey(dataDir: string, fileName = DEV_KEY_FILE): Promise<Buffer> {
  const file = path.join(dataDir, fileName);
  const read = async () => decodeKey(await fs.readFile(file, 'utf8'), file);
  try {
    return await read();
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code !== 'ENOENT') throw err;
  }
  await fs.mkdir(dataDir, { recursive: true });
  try {
    await fs.writeFile(file, `${randomBytes(32).toString('base64')}\n`, { mode: 0o600, flag: 'wx' });
  } catch (err) {
    // Another process (API, worker, admin) created it first: use theirs.
    if ((err as NodeJS.ErrnoException).code !== 'EEXIST') throw err;
  }
  for (let i = 0; ; i++) {
    try {
      return await read();
    } catch (err) {
      if (i >= 20) throw err;
      await new Promise((r) => setTimeout(r, 25)); // the creator is between open and write
    }
  }
}

const keyrings = new Map<string, Promise<Keyring>>();

/** Where one keyring's keys come from: the configured key and earlier ones, or a dev key file. */
export interface KeyringSource {
  /** Setting names, for error messages: e.g. CONNECTIONS_ENCRYPTION_KEY, CONNECTIONS_PREVIOUS_KEYS. */
  names: { current: string; previous: string };
  current: string | undefined;
  /** Comma-separated earlier keys, still accepted for decryption after a rotation. */
  previous: string | undefined;
  /** Without a configured key: a key generated once in `dataDir/devFile`. */
  dataDir: string;
  devFile: string;
}

/**
 * A keyring from configuration (base64 keys), loaded once per distinct source; the connections
 * keyring and the Temporal payload keyring are both built here.
 */
export function keyringFrom(src: KeyringSource): Promise<Keyring> {
  const cacheKey = [src.names.current, src.current ?? `dev:${src.dataDir}/${src.devFile}`, src.previous ?? ''].join('|');
  let k = keyrings.get(cacheKey);
  if (!k) {
    k = (async () => {
      const key = src.current ? decodeKey(src.current, src.names.current) : await devKey(src.dataDir, src.devFile);
      const current = { id: keyId(key), key: createSecretKey(key) };
      const byId = new Map<string, KeyObject>([[current.id, current.key]]);
      for (const prev of (src.previous ?? '').split(',').filter((s) => s.trim())) {
        const p = decodeKey(prev, src.names.previous);
        byId.set(keyId(p), createSecretKey(p));
      }
      return { current, byId };
    })();
    k.catch(() => keyrings.delete(cacheKey));
    keyrings.set(cacheKey, k);
  }
  return k;
}

/** The process's connections keyring from configuration; loaded once. */
export function loadKeyring(config: Pick<Config, 'CONNECTIONS_ENCRYPTION_KEY' | 'CONNECTIONS_PREVIOUS_KEYS' | 'dataDir'>): Promise<Keyring> {
  return keyringFrom({
    names: { current: 'CONNECTIONS_ENCRYPTION_KEY', previous: 'CONNECTIONS_PREVIOUS_KEYS' },
    current: config.CONNECTIONS_ENCRYPTION_KEY,
    previous: config.CONNECTIONS_PREVIOUS_KEYS,
    dataDir: config.dataDir,
    devFile: DEV_KEY_FILE,
  });
}

interface Identity {
  id: string;
  org_id: string;
  kind: string;
  name: string;
  site: string;
}

const aad = (r: Identity) => Buffer.from(`wqs-connection:v${KEY_VERSION}|${r.id}|${r.org_id}|${r.kind}|${r.name}|${r.site}`);

function encrypt(ring: Keyring, row: Identity, secret: Record<string, string>) {
  const iv = randomBytes(12);
  const cipher = createCipheriv('aes-256-gcm', ring.current.key, iv);
  cipher.setAAD(aad(row));
  const ciphertext = Buffer.concat([cipher.update(JSON.stringify(secret), 'utf8'), cipher.final()]);
  return { ciphertext, iv, tag: cipher.getAuthTag(), keyId: ring.current.id };
}

function decrypt(ring: Keyring, row: Identity & { secret_ciphertext: Buffer; secret_iv: Buffer; secret_tag: Buffer; key_id: string }): Record<string, string> {
  const key = ring.byId.get(row.key_id);
  if (!key) throw new Error(`connection ${row.id} was encrypted with a key that is not configured (key id ${row.key_id})`);
  try {
    const d = createDecipheriv('aes-256-gcm', key, row.secret_iv);
    d.setAAD(aad(row));
    d.setAuthTag(row.secret_tag);
    const plain = Buffer.concat([d.update(row.secret_ciphertext), d.final()]).toString('utf8');
    return JSON.parse(plain) as Record<string, string>;
  } catch {
    // Never include the plaintext or the cause (which could quote it).
    throw new Error(`connection ${row.id} cannot be decrypted (wrong key or altered row)`);
  }
}

// --- secrets as the recipe sees them -------------------------------------------------------------

/** Validate and normalize what an operator supplies: a JSON object of strings, or (for an access key) one string. */
export function normalizeSecret(kind: ConnectionKind, name: string, secret: unknown): Record<string, string> {
  if (typeof secret === 'string') {
    if (kind !== 'access_key') throw new ConnectionError('an account connection needs a JSON object of secrets, e.g. {"email": "…", "password": "…"}', 'secret');
    secret = { [name]: secret };
  }
  if (!secret || typeof secret !== 'object' || Array.isArray(secret)) throw new ConnectionError('the secret must be a JSON object of strings', 'secret');
  const entries = Object.entries(secret as Record<string, unknown>);
  if (entries.length === 0 || entries.length > 20) throw new ConnectionError('the secret must have 1 to 20 fields', 'secret');
  for (const [k, v] of entries) {
    if (!NAME_RE.test(k)) throw new ConnectionError(`secret field name "${k.slice(0, 100)}" must match ${NAME_RE.source}`, 'secret');
    if (typeof v !== 'string' || v.length === 0 || v.length > 8192) throw new ConnectionError(`secret field "${k}" must be a non-empty string of at most 8192 characters`, `secret.${k}`);
    // Redaction and the secret-host check cannot protect a shorter value (shared/secrets.ts).
    if (v.length < MIN_SECRET_LENGTH)
      throw new ConnectionError(`secret field "${k}" must be at least ${MIN_SECRET_LENGTH} characters: a shorter value cannot be kept out of outputs and errors`, `secret.${k}`);
  }
  return Object.fromEntries(entries) as Record<string, string>;
}

/**
 * The names under which a connection's fields reach `{{secrets.NAME}}`. Every field is available
 * under its own name; fields of an account are also available upper-cased behind the connection's
 * prefix (its name without `_account`): `shop_account` {email, password} → SHOP_EMAIL,
 * SHOP_PASSWORD. An access key stored as `{"WEATHER_API_KEY": "…"}` is WEATHER_API_KEY.
 */
export function flattenSecrets(conn: { kind: ConnectionKind; name: string }, secret: Record<string, string>): Record<string, string> {
  const out: Record<string, string> = {};
  const prefix = conn.name.replace(/_(account|key|access_key)$/i, '').toUpperCase();
  for (const [k, v] of Object.entries(secret)) {
    out[k] = v;
    if (conn.kind === 'account') {
      const upper = k.toUpperCase();
      out[upper.startsWith(`${prefix}_`) ? upper : `${prefix}_${upper}`] = v;
    }
  }
  return out;
}

// --- rows ----------------------------------------------------------------------------------------

const INFO_COLUMNS = 'id, org_id, kind, name, site, status, secret_names, created_at, updated_at';

function info(r: Record<string, any>): ConnectionInfo {
  return {
    connection_id: r.id,
    org_id: r.org_id,
    kind: r.kind,
    name: r.name,
    site: r.site,
    status: r.status,
    secret_names: r.secret_names,
    created_at: new Date(r.created_at).toISOString(),
    updated_at: new Date(r.updated_at).toISOString(),
  };
}

/** A site as stored and compared: trimmed, lower case, without the root's trailing dot (`shop.example.test.` is the same host). */
const normSite = (site: string) => site.trim().toLowerCase().replace(/\.$/, '');

/** Add a connection; a live one with the same (org, kind, name, site) is revoked and replaced. */
export async function addConnection(
  db: Db,
  ring: Keyring,
  a: { orgId: string; kind: ConnectionKind; name: string; site: string; secret: unknown },
): Promise<ConnectionInfo> {
  if (a.kind !== 'account' && a.kind !== 'access_key') throw new ConnectionError('kind must be account or access_key', 'kind');
  if (!NAME_RE.test(a.name)) throw new ConnectionError(`name must match ${NAME_RE.source}`, 'name');
  const site = normSite(a.site);
  if (!SITE_RE.test(site)) throw new ConnectionError('site must be a host name, e.g. shop.example.test', 'site');
  const secret = normalizeSecret(a.kind, a.name, a.secret);
  const row = { id: newConnectionId(), org_id: a.orgId, kind: a.kind, name: a.name, site };
  const enc = encrypt(ring, row, secret);
  return tx(db, async (c) => {
    const org = await c.query('SELECT 1 FROM organizations WHERE id = $1', [a.orgId]);
    if (org.rowCount === 0) throw new ConnectionError(`organization ${a.orgId} not found`, 'org');
    await c.query(
      `UPDATE connections SET status = 'revoked', revoked_at = now(), updated_at = now()
        WHERE org_id = $1 AND kind = $2 AND name = $3 AND site = $4 AND status <> 'revoked'`,
      [row.org_id, row.kind, row.name, row.site],
    );
    const ins = await c.query(
      `INSERT INTO connections (id, org_id, kind, name, site, status, secret_ciphertext, secret_iv, secret_tag, key_id, key_version, secret_names)
       VALUES ($1, $2, $3, $4, $5, 'active', $6, $7, $8, $9, $10, $11) RETURNING ${INFO_COLUMNS}`,
      [row.id, row.org_id, row.kind, row.name, row.site, enc.ciphertext, enc.iv, enc.tag, enc.keyId, KEY_VERSION, Object.keys(secret)],
    );
    return info(ins.rows[0]);
  });
}

/** `orgId`, when given, scopes the change to that organization's connection (the console's); the
 *  operator's CLI names a connection by id alone. Another organization's id is "not found". */
async function setStatus(db: Db | DbClient, id: string, to: 'revoked' | 'needs_reauth', orgId?: string): Promise<ConnectionInfo> {
  if (!ID_RE.test(id)) throw new ConnectionError('the connection id must look like conn_<24 hex>', 'id');
  const r = await db.query(
    `UPDATE connections SET status = $2::text, updated_at = now(), revoked_at = CASE WHEN $2::text = 'revoked' THEN now() ELSE revoked_at END
      WHERE id = $1 AND ($3::text IS NULL OR org_id = $3)
        AND (status = 'active' OR ($2::text = 'revoked' AND status = 'needs_reauth'))
      RETURNING ${INFO_COLUMNS}`,
    [id, to, orgId ?? null],
  );
  if (r.rowCount) return info(r.rows[0]);
  const cur = await db.query(`SELECT ${INFO_COLUMNS} FROM connections WHERE id = $1 AND ($2::text IS NULL OR org_id = $2)`, [id, orgId ?? null]);
  if (cur.rowCount === 0) throw new ConnectionError(`connection ${id} not found`, 'id');
  const existing = info(cur.rows[0]);
  if (existing.status === to) return existing; // already there: idempotent
  throw new ConnectionError(`connection ${id} is ${existing.status}; it cannot become ${to}`, 'id');
}

/** Disconnect: queries needing it fail with auth_revoked until a new connection is added. */
export const revokeConnection = (db: Db, id: string, orgId?: string) => setStatus(db, id, 'revoked', orgId);
/** Mark as needing a fresh sign-in: queries needing it fail with auth_required until it is re-added. */
export const expireConnection = (db: Db, id: string, orgId?: string) => setStatus(db, id, 'needs_reauth', orgId);

/**
 * Remove a connection's row for good, secret included (`npm run admin -- connection delete`). Only a
 * row that can no longer serve a query: a revoked one (history that still holds a secret), or one
 * no key of the ring decrypts (`connection rekey` lists those; until it is gone it counts among the
 * rows on old keys, so the old key could never be dropped). A live row this ring reads is refused:
 * revoke it first, so that a typo cannot silently disconnect an organization. The row is deleted
 * only as it was read: one revoked, replaced or re-encrypted meanwhile is judged again.
 */
export async function deleteConnection(db: Db, ring: Keyring, id: string): Promise<ConnectionInfo & { reason: 'revoked' | 'undecryptable' }> {
  if (!ID_RE.test(id)) throw new ConnectionError('the connection id must look like conn_<24 hex>', 'id');
  for (let attempt = 0; attempt < 5; attempt++) {
    const cur = await db.query(`SELECT ${INFO_COLUMNS}, key_id, secret_ciphertext, secret_iv, secret_tag FROM connections WHERE id = $1`, [id]);
    if (cur.rowCount === 0) throw new ConnectionError(`connection ${id} not found`, 'id');
    const row = cur.rows[0];
    let reason: 'revoked' | 'undecryptable' = 'revoked';
    if (row.status !== 'revoked') {
      try {
        decrypt(ring, row);
      } catch {
        reason = 'undecryptable';
      }
      if (reason === 'revoked') throw new ConnectionError(`connection ${id} is ${row.status} and readable; revoke it first`, 'id');
    }
    const del = await db.query(
      `DELETE FROM connections WHERE id = $1 AND status = $2 AND key_id = $3 AND secret_iv = $4 AND secret_tag = $5 AND secret_ciphertext = $6 RETURNING ${INFO_COLUMNS}`,
      [id, row.status, row.key_id, row.secret_iv, row.secret_tag, row.secret_ciphertext],
    );
    if (del.rowCount === 1) return { ...info(del.rows[0]), reason };
  }
  throw new Error(`connection ${id} kept changing while it was being deleted; run the command again`);
}

export async function listConnections(db: Db, orgId: string): Promise<ConnectionInfo[]> {
  const r = await db.query(`SELECT ${INFO_COLUMNS} FROM connections WHERE org_id = $1 ORDER BY created_at`, [orgId]);
  return r.rows.map(info);
}

const reqKey = (kind: string, name: string, site: string) => `${kind}\u0000${name}\u0000${site}`;

/**
 * The state of each requirement for an organization: the live connection (active or needing sign-in)
 * if there is one, else the latest revoked one, else missing. Reads only the calling
 * organization's rows.
 */
async function lookup(db: Db | DbClient, orgId: string, reqs: AccessRequirement[], withSecrets: boolean) {
  const out = new Map<string, Record<string, any>>();
  if (reqs.length === 0) return out;
  const cols = withSecrets ? `${INFO_COLUMNS}, secret_ciphertext, secret_iv, secret_tag, key_id` : INFO_COLUMNS;
  const r = await db.query(
    `SELECT DISTINCT ON (kind, name, site) ${cols}
       FROM connections
      WHERE org_id = $1 AND (kind, name, site) IN (SELECT * FROM unnest($2::text[], $3::text[], $4::text[]))
      ORDER BY kind, name, site, (status = 'revoked'), updated_at DESC`,
    [orgId, reqs.map((q) => q.kind), reqs.map((q) => q.name), reqs.map((q) => normSite(q.site))],
  );
  for (const row of r.rows) out.set(reqKey(row.kind, row.name, row.site), row);
  return out;
}

const statusOf = (row: Record<string, any> | undefined): AccessStatus =>
  !row ? 'missing' : row.status === 'active' ? 'connected' : (row.status as 'needs_reauth' | 'revoked');

/** One item per requirement, in order, with what the organization has for it. */
export async function checkAccess(db: Db | DbClient, orgId: string, reqs: AccessRequirement[]): Promise<AccessItem[]> {
  const rows = await lookup(db, orgId, reqs, false);
  return reqs.map((q) => ({ kind: q.kind, name: q.name, site: q.site, status: statusOf(rows.get(reqKey(q.kind, q.name, normSite(q.site)))) }));
}

/** The error code an unusable set of access items maps to at the API (before anything runs). */
export function accessFailureCode(items: AccessItem[]): 'access_required' | 'auth_required' | 'auth_revoked' | null {
  if (items.some((i) => i.status === 'missing')) return 'access_required';
  if (items.some((i) => i.status === 'needs_reauth')) return 'auth_required';
  if (items.some((i) => i.status === 'revoked')) return 'auth_revoked';
  return null;
}

export type LoadedSecrets =
  /** `sites`: the site of the connection each secret name comes from; the engines send a secret to that host only. */
  | { ok: true; secrets: Record<string, string>; sites: Record<string, string> }
  /**
   * `secret_too_short`: a connection stored before the minimum length (shared/secrets.ts) holds a
   * shorter value; its item is `needs_reauth` (the organization adds it again) and nothing runs.
   */
  | { ok: false; items: AccessItem[]; reason?: 'secret_too_short' };

/**
 * Decrypt the secrets an operation needs, for the calling organization only, flattened into the
 * names recipes use. When a requirement is not connected, returns the access items instead.
 */
export async function loadSecrets(db: Db | DbClient, ring: Keyring, orgId: string, reqs: AccessRequirement[]): Promise<LoadedSecrets> {
  const rows = await lookup(db, orgId, reqs, true);
  const items = reqs.map((q) => ({ kind: q.kind, name: q.name, site: q.site, status: statusOf(rows.get(reqKey(q.kind, q.name, normSite(q.site)))) }));
  if (items.some((i) => i.status !== 'connected')) return { ok: false, items };
  const secrets: Record<string, string> = {};
  const sites: Record<string, string> = {};
  /** Requirement index → row id of the connections stored before the minimum secret length. */
  const tooShort = new Map<number, string>();
  reqs.forEach((q, i) => {
    const row = rows.get(reqKey(q.kind, q.name, normSite(q.site)))!;
    const secret = decrypt(ring, row as any);
    // Stored before the minimum: redaction could not protect it, so it is never run with (fails closed).
    if (!Object.values(secret).every(isProtectableSecret)) tooShort.set(i, row.id as string);
    const flat = flattenSecrets(q, secret);
    Object.assign(secrets, flat);
    for (const name of Object.keys(flat)) sites[name] = normSite(q.site);
  });
  if (tooShort.size > 0) {
    // The row says so too, only from active (never over a revoke): the console shows it must be
    // added again, and the API refuses the next query before reserving anything.
    await db.query(`UPDATE connections SET status = 'needs_reauth', updated_at = now() WHERE id = ANY($1::text[]) AND org_id = $2 AND status = 'active'`, [[...tooShort.values()], orgId]);
    return { ok: false, reason: 'secret_too_short', items: items.map((it, i) => (tooShort.has(i) ? { ...it, status: 'needs_reauth' as const } : it)) };
  }
  return { ok: true, secrets, sites };
}

// --- re-encryption after a key rotation ----------------------------------------------------------

/** A row no configured key decrypts: named by ids, never by content. */
export interface UndecryptableConnection {
  connection_id: string;
  org_id: string;
  /** The id (digest prefix) of the key the row names; never the key. */
  key_id: string;
  reason: 'key not configured' | 'cannot be decrypted (wrong key or altered row)';
}

export interface RekeyReport {
  dry_run: boolean;
  /** Id of CONNECTIONS_ENCRYPTION_KEY: every row should end up naming it. */
  current_key_id: string;
  /** Rows moved to the current key (in a dry run: `would_reencrypt`, nothing written). */
  reencrypted?: number;
  would_reencrypt?: number;
  /** Rows already under the current key: not read, not written. */
  already_current: number;
  /** Left as they are; the command exits non-zero while there is one. */
  undecryptable: UndecryptableConnection[];
  /** Rows not under the current key when the run ended: at 0, previous keys can be dropped. */
  remaining_on_old_keys: number;
}

type SecretRow = Identity & { secret_ciphertext: Buffer; secret_iv: Buffer; secret_tag: Buffer; key_id: string };

const SECRET_COLUMNS = 'id, org_id, kind, name, site, key_id, secret_ciphertext, secret_iv, secret_tag';

/**
 * Re-encrypt every connection not under the ring's current key with it, so previous keys can
 * eventually be dropped. Rows are read in batches by id; each is written by one UPDATE (its own
 * short transaction) that compares the key id, IV, tag and ciphertext it decrypted: a row changed
 * in between is never overwritten with what was read before, and is read again. Only the secret
 * columns change (status, updated_at and the rest stay as they are), so a concurrent revoke or
 * replace keeps its effect. Rows already under the current key are recognized by their `key_id`
 * without decrypting; a rerun re-encrypts nothing. Safe while the service runs.
 */
export async function rekeyConnections(db: Db, ring: Keyring, opts: { dryRun?: boolean; batchSize?: number; orgId?: string } = {}): Promise<RekeyReport> {
  const batchSize = opts.batchSize ?? 100;
  const current = ring.current.id;
  // One organization's rows only (`--org`), or every row.
  const org = opts.orgId ?? null;
  const alreadyCurrent = await db.query('SELECT count(*)::int AS n FROM connections WHERE key_id = $1 AND ($2::text IS NULL OR org_id = $2)', [current, org]);
  let moved = 0;
  let turnedCurrent = 0;
  const undecryptable: UndecryptableConnection[] = [];

  /** One row: decrypt with the ring, re-encrypt, compare-and-set; again if it changed meanwhile. */
  const rekeyRow = async (first: SecretRow) => {
    let row: SecretRow | undefined = first;
    for (let attempt = 0; row; attempt++) {
      if (row.key_id === current) {
        turnedCurrent++; // another run (or process) got there first
        return;
      }
      if (attempt === 5) throw new Error(`connection ${row.id} kept changing while it was being re-encrypted; run the command again`);
      const { id, org_id, key_id } = row;
      if (!ring.byId.has(key_id)) return void undecryptable.push({ connection_id: id, org_id, key_id, reason: 'key not configured' });
      let secret: Record<string, string>;
      try {
        secret = decrypt(ring, row);
      } catch {
        // The cause is not kept: it could quote the plaintext.
        return void undecryptable.push({ connection_id: id, org_id, key_id, reason: 'cannot be decrypted (wrong key or altered row)' });
      }
      if (opts.dryRun) {
        moved++;
        return;
      }
      const enc = encrypt(ring, row, secret);
      const r = await db.query(
        `UPDATE connections SET secret_ciphertext = $2, secret_iv = $3, secret_tag = $4, key_id = $5, key_version = $6
          WHERE id = $1 AND key_id = $7 AND secret_iv = $8 AND secret_tag = $9 AND secret_ciphertext = $10`,
        [id, enc.ciphertext, enc.iv, enc.tag, enc.keyId, KEY_VERSION, key_id, row.secret_iv, row.secret_tag, row.secret_ciphertext],
      );
      if (r.rowCount === 1) {
        moved++;
        return;
      }
      // Changed since it was read: read it again (gone: nothing to do).
      row = (await db.query(`SELECT ${SECRET_COLUMNS} FROM connections WHERE id = $1`, [id])).rows[0] as SecretRow | undefined;
    }
  };

  for (let after = ''; ; ) {
    const batch = await db.query(`SELECT ${SECRET_COLUMNS} FROM connections WHERE id > $1 AND key_id <> $2 AND ($4::text IS NULL OR org_id = $4) ORDER BY id LIMIT $3`, [
      after,
      current,
      batchSize,
      org,
    ]);
    for (const row of batch.rows as SecretRow[]) await rekeyRow(row);
    if (batch.rows.length < batchSize) break;
    after = (batch.rows[batch.rows.length - 1] as SecretRow).id;
  }
  const remaining = await db.query('SELECT count(*)::int AS n FROM connections WHERE key_id <> $1 AND ($2::text IS NULL OR org_id = $2)', [current, org]);
  return {
    dry_run: Boolean(opts.dryRun),
    current_key_id: current,
    ...(opts.dryRun ? { would_reencrypt: moved } : { reencrypted: moved }),
    already_current: alreadyCurrent.rows[0].n + turnedCurrent,
    undecryptable,
    remaining_on_old_keys: remaining.rows[0].n,
  };
}
