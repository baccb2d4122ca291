// Read-only queries of the console's lists. Every one is scoped by the session's organization.
import type { Db } from '../../../shared/db/pool.ts';
import type { RequestStatus } from '../../../shared/db/requests.ts';

export const REQUEST_STATUSES: readonly RequestStatus[] = ['reserving', 'processing', 'succeeded', 'rejected', 'refund_pending', 'failed', 'interrupted'];

export interface RequestListRow {
  id: string;
  status: RequestStatus;
  api: string | null;
  operation: string | null;
  billing_status: string;
  reserved_credits: number;
  charged_credits: number | null;
  error_code: string | null;
  created_at: Date;
  duration_ms: number | null;
}

/**
 * An opaque position in the list: the created_at (microseconds) and id of the last row shown. At
 * most 16 digits (until the year 2286): the query casts them to bigint, and a longer number a
 * hand-made cursor carried (20 nines) overflowed it, a 500 instead of the 400 "Bad filter" page.
 */
export const encodeCursor = (r: { created_at: Date; id: string; micros: string }) => Buffer.from(`${r.micros}|${r.id}`).toString('base64url');

export function decodeCursor(cursor: string | undefined): { micros: string; id: string } | null | 'bad' {
  if (!cursor) return null;
  const m = /^(\d{1,16})\|(req_[A-Za-z0-9_-]{10,64})$/.exec(Buffer.from(cursor, 'base64url').toString('utf8'));
  return m ? { micros: m[1]!, id: m[2]! } : 'bad';
}

/** Newest first, `limit` rows, plus the cursor of the next page when there is one. */
export async function listRequests(
  db: Db,
  orgId: string,
  f: { status?: string; api?: string; after?: { micros: string; id: string } | null; limit: number },
): Promise<{ rows: RequestListRow[]; next: string | null }> {
  const r = await db.query(
    `SELECT id, status, api, operation, billing_status, reserved_credits, charged_credits, error_code, created_at,
            (extract(epoch FROM created_at) * 1000000)::bigint::text AS micros,
            CASE WHEN completed_at IS NULL THEN NULL ELSE (extract(epoch FROM completed_at - created_at) * 1000)::int END AS duration_ms
       FROM requests
      WHERE org_id = $1 AND ($2::text IS NULL OR status = $2) AND ($3::text IS NULL OR api = $3)
        AND ($4::bigint IS NULL OR ((extract(epoch FROM created_at) * 1000000)::bigint, id) < ($4::bigint, $5::text))
      ORDER BY created_at DESC, id DESC
      LIMIT $6`,
    [orgId, f.status ?? null, f.api ?? null, f.after?.micros ?? null, f.after?.id ?? null, f.limit + 1],
  );
  const rows = r.rows.slice(0, f.limit);
  const last = rows[rows.length - 1];
  return { rows, next: r.rows.length > f.limit && last ? encodeCursor(last) : null };
}

/** Workflows the organization has run, for the filter's choices. */
export async function requestedApis(db: Db, orgId: string): Promise<string[]> {
  const r = await db.query('SELECT DISTINCT api FROM requests WHERE org_id = $1 AND api IS NOT NULL ORDER BY api LIMIT 200', [orgId]);
  return r.rows.map((x) => x.api);
}

export interface OwnedApi {
  handle: string;
  name: string;
  visibility: 'public' | 'private';
  status: string;
  operations: number;
  /** The latest builder version; null for a workflow not built in the console or CLI. */
  latest_version: number | null;
  updated_at: Date;
}

/** The organization's own workflows: private ones and public ones it owns. */
export async function ownedApis(db: Db, orgId: string): Promise<OwnedApi[]> {
  const r = await db.query(
    `SELECT a.handle, a.name, a.visibility, a.status, a.updated_at, (SELECT count(*)::int FROM operations o WHERE o.api_id = a.id) AS operations,
            (SELECT max(v.version)::int FROM builder_versions v WHERE v.api_id = a.id) AS latest_version
       FROM apis a WHERE a.owner_org_id = $1 ORDER BY a.visibility, a.handle`,
    [orgId],
  );
  return r.rows;
}

/**
 * Whether this organization has a passing test run of exactly this definition (its canonical hash)
 * recent enough for publish to accept: the Build page enables `Publish` only then.
 */
export async function hasPassingTestRun(db: Db, orgId: string, definitionHash: string, validHours: number): Promise<boolean> {
  const r = await db.query(
    `SELECT 1 FROM builder_test_runs
      WHERE org_id = $1 AND definition_hash = $2 AND status = 'passed' AND created_at > now() - $3::int * interval '1 hour' LIMIT 1`,
    [orgId, definitionHash, validHours],
  );
  return (r.rowCount ?? 0) > 0;
}
