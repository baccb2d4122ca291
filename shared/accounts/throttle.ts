// Sign-in throttling: fixed-window counters of failed attempts in PostgreSQL (so every API process
// shares them), one bucket per client IP and one per email (hashed: the table never holds addresses
// of people who have no account); refused sign-ups have a per-IP bucket of their own.
import { sha256Hex } from '../ids.ts';
import type { Db } from '../db/pool.ts';

export interface ThrottleLimits {
  windowMs: number;
  perIp: number;
  perEmail: number;
}

// `email` null: sign-up, whose refusals have a per-IP bucket of their own (same limit as sign-in's),
// so that failed sign-ins do not close sign-up to an address or the reverse.
const buckets = (ip: string, email: string | null) =>
  email === null ? [`signup-ip:${ip}`] : [`ip:${ip}`, `email:${sha256Hex(email.trim().toLowerCase())}`];

/** Seconds until the caller may try again, or 0 when under both limits. */
export async function throttled(db: Db, ip: string, email: string | null, l: ThrottleLimits): Promise<number> {
  const r = await db.query(
    `SELECT bucket, attempts, ceil(extract(epoch FROM window_start + $2 * interval '1 millisecond' - now()))::int AS wait
       FROM sign_in_throttle WHERE bucket = ANY($1) AND window_start > now() - $2 * interval '1 millisecond'`,
    [buckets(ip, email), l.windowMs],
  );
  let wait = 0;
  for (const row of r.rows) {
    const limit = row.bucket.startsWith('email:') ? l.perEmail : l.perIp;
    if (row.attempts >= limit) wait = Math.max(wait, row.wait, 1);
  }
  return wait;
}

/** Count one failed attempt in both buckets (a window older than windowMs starts over). */
export async function recordFailure(db: Db, ip: string, email: string | null, l: ThrottleLimits): Promise<void> {
  await db.query(
    `INSERT INTO sign_in_throttle AS t (bucket, window_start, attempts) SELECT b, now(), 1 FROM unnest($1::text[]) AS b
     ON CONFLICT (bucket) DO UPDATE SET
       attempts = CASE WHEN t.window_start <= now() - $2 * interval '1 millisecond' THEN 1 ELSE t.attempts + 1 END,
       window_start = CASE WHEN t.window_start <= now() - $2 * interval '1 millisecond' THEN now() ELSE t.window_start END`,
    [buckets(ip, email), l.windowMs],
  );
}

/** Windows that have ended count for nothing; deleted now and then by sign-ins. */
export async function deleteEndedWindows(db: Db, l: ThrottleLimits): Promise<void> {
  await db.query(`DELETE FROM sign_in_throttle WHERE window_start <= now() - $1 * interval '1 millisecond'`, [l.windowMs]);
}
