// Uploaded files (the `files` table): the only module that writes it. Files are private to their
// organization and expire after 30 days; reads never return another organization's file or an
// expired one.
import { randomBytes } from 'node:crypto';
import { sha256Hex } from '../ids.ts';
import { ServiceError } from '../errors.ts';
import { tx, type Db, type DbClient } from './pool.ts';

export const FILE_ID_PATTERN = /^file_[0-9a-f]{32}$/;
/** 10 MB, as the spec's upload limit (10 * 1024 * 1024 bytes). */
export const MAX_FILE_BYTES = 10 * 1024 * 1024;
export const FILE_RETENTION_MS = 30 * 24 * 3_600_000;

export const newFileId = () => `file_${randomBytes(16).toString('hex')}`;

/** The File record as the API returns it. */
export interface FileRecord {
  id: string;
  name: string;
  size_bytes: number;
  content_type: string;
  sha256: string;
  created_at: string;
  expires_at: string;
}

export interface StoredFile extends FileRecord {
  org_id: string;
  bytes: Buffer;
}

interface FileRow {
  id: string;
  org_id: string;
  name: string;
  size: string | number;
  content_type: string;
  sha256: string;
  bytes?: Buffer;
  created_at: Date;
  expires_at: Date;
}

function recordOf(r: FileRow): FileRecord {
  return {
    id: r.id,
    name: r.name,
    size_bytes: Number(r.size),
    content_type: r.content_type,
    sha256: r.sha256,
    created_at: r.created_at.toISOString(),
    expires_at: r.expires_at.toISOString(),
  };
}

/** What one organization may keep at once (config FILES_MAX_BYTES_PER_ORG, FILES_MAX_PER_ORG). */
export interface FileQuota {
  maxBytes: number;
  maxFiles: number;
}

/** Namespace of the per-organization upload advisory locks (first key of the two-key form; admission uses 600). */
const FILES_LOCK_CLASS = 601;

/**
 * The 429 file_storage_limit for an upload of `size` bytes, or null when it fits the organization's
 * quota. `size` null: not known yet (a chunked body), counted as one byte (a file has at least one),
 * and `details.size_bytes` left out.
 */
async function storageRefusal(db: Db | DbClient, orgId: string, size: number | null, quota: FileQuota, now: Date): Promise<ServiceError | null> {
  const r = await db.query<{ n: number; bytes: string; oldest: Date | null }>(
    'SELECT count(*)::int AS n, coalesce(sum(size), 0)::text AS bytes, min(expires_at) AS oldest FROM files WHERE org_id = $1 AND expires_at > $2',
    [orgId, now],
  );
  const held = r.rows[0]!;
  const bytes = Number(held.bytes);
  const adding = size ?? 1;
  if (held.n + 1 <= quota.maxFiles && bytes + adding <= quota.maxBytes) return null;
  // When the oldest file expires (room frees then; whether enough depends on the sizes).
  const wait = held.oldest ? Math.max(1, Math.ceil((held.oldest.getTime() - now.getTime()) / 1000)) : 1;
  const what = size === null ? 'this one' : `this one (${size})`;
  return new ServiceError(
    'file_storage_limit',
    held.n + 1 > quota.maxFiles
      ? `The organization keeps ${held.n} files, its limit; files expire 30 days after upload`
      : `The organization's files take ${bytes} bytes; with ${what} they would pass its limit of ${quota.maxBytes}; files expire 30 days after upload`,
    {
      headers: { 'retry-after': String(wait) },
      details: { files: held.n, bytes, max_files: quota.maxFiles, max_bytes: quota.maxBytes, ...(size === null ? {} : { size_bytes: size }) },
    },
  );
}

/**
 * Before an upload's body is read: throws 429 file_storage_limit when an upload of `size` bytes
 * (its Content-Length; null for a chunked body) cannot fit the organization's quota now, so a body
 * that could never be stored is not taken in. Not under the organization's lock: createFile checks
 * again, atomically, when it stores the file.
 */
export async function checkFileStorage(db: Db, orgId: string, size: number | null, quota: FileQuota, now: Date = new Date()): Promise<void> {
  const refusal = await storageRefusal(db, orgId, size, quota, now);
  if (refusal) throw refusal;
}

/**
 * Store an upload; the id, hash and expiry are decided here. With `quota`, the organization's
 * unexpired files are summed and the new one inserted in one transaction under the organization's
 * lock, so uploads sent at once can never together pass the limit (file_storage_limit).
 */
export async function createFile(
  db: Db,
  f: { orgId: string; name: string; contentType: string; bytes: Buffer; now?: Date },
  quota?: FileQuota,
): Promise<FileRecord> {
  if (f.bytes.length > MAX_FILE_BYTES) throw new Error(`file of ${f.bytes.length} bytes exceeds ${MAX_FILE_BYTES}`);
  if (!quota) return insertFile(db, f);
  return tx(db, async (c) => {
    await c.query('SELECT pg_advisory_xact_lock($1, hashtext($2))', [FILES_LOCK_CLASS, f.orgId]);
    const refusal = await storageRefusal(c, f.orgId, f.bytes.length, quota, f.now ?? new Date());
    if (refusal) throw refusal;
    return insertFile(c, f);
  });
}

async function insertFile(db: Db | DbClient, f: { orgId: string; name: string; contentType: string; bytes: Buffer; now?: Date }): Promise<FileRecord> {
  const now = f.now ?? new Date();
  const r = await db.query<FileRow>(
    `INSERT INTO files (id, org_id, name, size, content_type, sha256, bytes, created_at, expires_at)
     VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9)
     RETURNING id, org_id, name, size, content_type, sha256, created_at, expires_at`,
    [newFileId(), f.orgId, f.name, f.bytes.length, f.contentType, sha256Hex(f.bytes), f.bytes, now, new Date(now.getTime() + FILE_RETENTION_MS)],
  );
  return recordOf(r.rows[0]!);
}

/**
 * One file of one organization with its bytes, or null when it does not exist, belongs to another
 * organization or has expired (the three are indistinguishable to the caller).
 */
export async function getFile(db: Db | DbClient, orgId: string, id: string, now: Date = new Date()): Promise<StoredFile | null> {
  if (!FILE_ID_PATTERN.test(id)) return null;
  const r = await db.query<FileRow>(
    `SELECT id, org_id, name, size, content_type, sha256, bytes, created_at, expires_at
       FROM files WHERE id = $1 AND org_id = $2 AND expires_at > $3`,
    [id, orgId, now],
  );
  const row = r.rows[0];
  return row ? { ...recordOf(row), org_id: row.org_id, bytes: row.bytes! } : null;
}

/**
 * What one purge statement deletes at most: the rows (RETENTION_BATCH_SIZE from maintenance) and
 * their bytes (at least one row whatever its size): a file is up to 10 MB, its bytes a few thousand
 * TOAST rows, so a statement over a large backlog could pass the statement timeout.
 */
export const FILE_PURGE_BATCH_ROWS = 1_000;
export const FILE_PURGE_BATCH_BYTES = 256 * 1024 * 1024;
/** No purge statement is begun after this long: the rest waits for the next run, so the steps after it run. */
export const FILE_PURGE_MAX_MS = 20_000;

export interface FilePurgeOptions {
  batchSize?: number;
  batchBytes?: number;
  maxMs?: number;
  /** Called after each statement with how many it deleted (maintenance heartbeats there). */
  onBatch?: (deleted: number) => void;
}

/**
 * Delete the files expired at `now`, oldest first, in statements of at most `batchSize` rows and
 * `batchBytes` bytes, each committed on its own, until none is left or `maxMs` has passed; returns
 * how many. Rows another transaction holds are skipped (left for a later run), never waited for.
 * Called by the retention schedule.
 */
export async function purgeExpiredFiles(db: Db | DbClient, now: Date = new Date(), o: FilePurgeOptions = {}): Promise<number> {
  const batchSize = Math.max(1, Math.floor(o.batchSize ?? FILE_PURGE_BATCH_ROWS));
  const batchBytes = Math.max(1, Math.floor(o.batchBytes ?? FILE_PURGE_BATCH_BYTES));
  const until = Date.now() + (o.maxMs ?? FILE_PURGE_MAX_MS);
  let deleted = 0;
  for (;;) {
    // The oldest expired rows nobody holds, as long as the bytes before each stay under the bound.
    const r = await db.query(
      `DELETE FROM files f
        USING (SELECT id
                 FROM (SELECT id, sum(size) OVER (ORDER BY expires_at, id) - size AS before
                         FROM (SELECT id, size, expires_at FROM files
                                WHERE expires_at <= $1
                                ORDER BY expires_at LIMIT $2
                                FOR UPDATE SKIP LOCKED) candidates) sized
                WHERE before < $3) doomed
        WHERE f.id = doomed.id`,
      [now, batchSize, batchBytes],
    );
    const n = r.rowCount ?? 0;
    deleted += n;
    o.onBatch?.(n);
    if (n === 0 || Date.now() >= until) return deleted;
  }
}
