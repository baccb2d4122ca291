// Ratings of requests (the `request_feedback` table) and their weight in the catalog's `popular`
// order (rating columns of catalog_api_stats, catalog_rating_buckets): the only writer of both.
import type { Db, DbClient } from './pool.ts';
import { tx } from './pool.ts';

export type FeedbackValue = 1 | -1;
export type FeedbackUnavailableReason = 'own_api' | 'private_api' | 'request_incomplete' | 'expired' | 'not_independent';

/** A request can be rated until this long after it completed. */
export const FEEDBACK_WINDOW_MS = 30 * 24 * 3_600_000;
/**
 * Independence: one organization's ratings of one workflow are one voice, not many. It may have at
 * most this many rated requests of the same workflow made within FEEDBACK_WINDOW_MS; a further
 * request is `not_independent` (re-rating or removing an existing rating is always counted as the
 * same voice).
 */
export const MAX_RATINGS_PER_API = 3;

/** What deciding about one request's rating needs. */
export interface RatingContext {
  request_id: string;
  status: string;
  completed_at: Date | null;
  is_public_api: boolean;
  api_id: number | null;
  api_visibility: string | null;
  api_owner_org: string | null;
  /** The current rating of this request, if any. */
  value: FeedbackValue | null;
  /** The organization's other rated requests of this workflow within the window. */
  other_ratings: number;
}

/** The request as its organization sees it for rating; null when unknown or another organization's. */
export async function loadRatingContext(db: Db | DbClient, orgId: string, requestId: string, now: Date = new Date()): Promise<RatingContext | null> {
  const r = await db.query(
    `SELECT r.id AS request_id, r.status, r.completed_at, r.is_public_api, a.id AS api_id, a.visibility AS api_visibility,
            a.owner_org_id AS api_owner_org, f.value,
            (SELECT count(*)::int FROM request_feedback g
              WHERE g.org_id = r.org_id AND g.api_id = a.id AND g.request_id <> r.id AND g.created_at > $3::timestamptz - $4 * interval '1 millisecond') AS other_ratings
       FROM requests r
       LEFT JOIN operations o ON o.id = r.operation_id
       LEFT JOIN apis a ON a.id = o.api_id
       LEFT JOIN request_feedback f ON f.request_id = r.id
      WHERE r.id = $1 AND r.org_id = $2`,
    [requestId, orgId, now, FEEDBACK_WINDOW_MS],
  );
  const row = r.rows[0];
  if (!row) return null;
  return { ...row, api_id: row.api_id === null ? null : Number(row.api_id), value: row.value === null ? null : (Number(row.value) as FeedbackValue) };
}

/** Why the organization cannot rate this request now, or null when it can. The first reason wins. */
export function feedbackUnavailableReason(c: RatingContext, orgId: string, now: Date = new Date()): FeedbackUnavailableReason | null {
  // Ratings feed the public catalog only.
  if (!c.is_public_api || (c.api_visibility !== null && c.api_visibility !== 'public')) return 'private_api';
  if (c.api_owner_org === orgId) return 'own_api';
  if (c.status !== 'succeeded' || c.api_id === null) return 'request_incomplete';
  if (c.completed_at && now.getTime() - c.completed_at.getTime() > FEEDBACK_WINDOW_MS) return 'expired';
  if (c.value === null && c.other_ratings >= MAX_RATINGS_PER_API) return 'not_independent';
  return null;
}

export type SetFeedbackResult =
  | { ok: true; request_id: string; value: FeedbackValue | null }
  | { ok: false; reason: FeedbackUnavailableReason }
  | null;

/** What a call asking for `value` gets without writing anything, given what the request shows now; undefined when it needs a write. */
function withoutWrite(ctx: RatingContext, orgId: string, requestId: string, value: FeedbackValue | null, now: Date): SetFeedbackResult | undefined {
  if (value !== null) {
    const reason = feedbackUnavailableReason(ctx, orgId, now);
    if (reason) return { ok: false, reason };
  }
  if (ctx.value === value) return { ok: true, request_id: requestId, value };
  return undefined;
}

/**
 * Rate a request (1 or -1, replacing an earlier rating) or remove its rating (null; always
 * allowed, a no-op when there is none). Null result: no such request for this organization.
 *
 * The request is read first without any lock, on a connection of its own for one statement: an
 * unknown id or another organization's (the same null), a refusal, and a value already stored
 * are answered from that read, as of its instant, and never wait on the organization's lock. Only
 * a change takes the lock and reads again under it, so two at once cannot both pass the cap.
 * Old rows of the `popular` cursors' rating changes are pruned after the commit (pruneRatingChanges).
 */
export async function setFeedback(db: Db, orgId: string, requestId: string, value: FeedbackValue | null, now: Date = new Date()): Promise<SetFeedbackResult> {
  const seen = await loadRatingContext(db, orgId, requestId, now);
  if (!seen) return null;
  const settled = withoutWrite(seen, orgId, requestId, value, now);
  if (settled !== undefined) return settled;
  const result = await tx<{ result: SetFeedbackResult; changed: boolean }>(db, async (c) => {
    // One organization's rating changes one after another, so two at once cannot both pass the cap.
    await c.query(`SELECT pg_advisory_xact_lock(hashtextextended('feedback:' || $1, 0))`, [orgId]);
    const ctx = await loadRatingContext(c, orgId, requestId, now);
    if (!ctx) return { result: null, changed: false };
    const decided = withoutWrite(ctx, orgId, requestId, value, now);
    if (decided !== undefined) return { result: decided, changed: false };
    const old = ctx.value;
    if (value === null) {
      await c.query('DELETE FROM request_feedback WHERE request_id = $1', [requestId]);
    } else {
      await c.query(
        `INSERT INTO request_feedback (request_id, org_id, api_id, value, created_at, updated_at) VALUES ($1, $2, $3, $4, $5, $5)
         ON CONFLICT (request_id) DO UPDATE SET value = EXCLUDED.value, updated_at = EXCLUDED.updated_at`,
        [requestId, orgId, ctx.api_id, value, now],
      );
    }
    if (ctx.api_id !== null) await countRating(c, ctx.api_id, old, value);
    return { result: { ok: true as const, request_id: requestId, value }, changed: true };
  });
  // Popular cursors live 24 hours; older changes are no longer needed. About one change in a
  // hundred prunes them, after its commit: no longer inside the transaction, where the deletes ran
  // holding the organization's lock and the workflow's catalog_api_stats row (every organization's
  // ratings of that workflow waited on them), and a failed prune rolled the rating back.
  if (result.changed && Math.random() < RATING_PRUNE_CHANCE) await pruneRatingChangesOnce(db);
  return result.result;
}

/** Move the workflow's rating counters and record the change for "as of" paging. */
async function countRating(c: DbClient, apiId: number, from: FeedbackValue | null, to: FeedbackValue | null) {
  const up = Number(to === 1) - Number(from === 1);
  const down = Number(to === -1) - Number(from === -1);
  await c.query(
    `INSERT INTO catalog_api_stats AS s (api_id, rating_up, rating_down) VALUES ($1, greatest($2::bigint, 0), greatest($3::bigint, 0))
     ON CONFLICT (api_id) DO UPDATE SET rating_up = s.rating_up + $2::bigint, rating_down = s.rating_down + $3::bigint`,
    [apiId, up, down],
  );
  // Added to the workflow's 10-second bucket (migration 1700000002800): a rating toggled in a loop
  // moves one row, where each change was a row of its own that every `popular` cursor summed.
  await c.query(
    `INSERT INTO catalog_rating_buckets AS b (api_id, at, points) VALUES ($1, catalog_event_bucket(clock_timestamp()), catalog_rating_weight() * $2::bigint)
     ON CONFLICT (api_id, at) DO UPDATE SET points = b.points + excluded.points`,
    [apiId, up - down],
  );
}

/** The share of rating changes that prune old rating changes afterwards. */
const RATING_PRUNE_CHANCE = 0.01;
/** Rows one prune deletes at most (per table): a backlog goes in several, each statement short. */
const RATING_PRUNE_BATCH = 5_000;
let pruning = false;

/** pruneRatingChanges, one at a time in this process; a failure is left for the next one (nothing needs it now). */
async function pruneRatingChangesOnce(db: Db): Promise<void> {
  if (pruning) return;
  pruning = true;
  try {
    await pruneRatingChanges(db, 25, RATING_PRUNE_BATCH);
  } catch {
    // The rating is committed: its caller gets it. Old rows wait for the next prune.
  } finally {
    pruning = false;
  }
}

/**
 * Delete rating changes older than `olderThanHours` (the `popular` cursors' 24 hours and an hour),
 * at most `limit` rows of each table, each DELETE a statement of its own outside any transaction:
 * the rows are hours old, so no rating in progress holds them and nothing waits on this.
 */
export async function pruneRatingChanges(db: Db, olderThanHours: number, limit: number): Promise<number> {
  let deleted = 0;
  for (const table of ['catalog_rating_buckets', 'catalog_rating_events']) {
    const r = await db.query(
      `DELETE FROM ${table} WHERE ctid IN (SELECT ctid FROM ${table} WHERE at < now() - $1::int * interval '1 hour' LIMIT $2)`,
      [olderThanHours, limit],
    );
    deleted += r.rowCount ?? 0;
  }
  return deleted;
}
