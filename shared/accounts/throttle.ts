// Sign-in throttling: fixed-window counters of failed attempts in PostgreSQL (so every API process
// shares them), one bucket per client IP and one per email (hashed: the table never holds addresses
// of people who have no account); refused sign-ups have a per-IP bucket of their own. An attempt
// is counted before it is answered and given back if it succeeds (reserveAttempt / releaseAttempt).
import { sha256Hex } from '../ids.ts';
import { tx, type Db } from '../db/pool.ts';

export interface ThrottleLimits {
  windowMs: number;
  perIp: number;
  perEmail: number;
}

// `email` null: sign-up, whose refusals have a per-IP bucket of their own (same limit as sign-in's),
// so that failed sign-ins do not close sign-up to an address or the reverse.
const buckets = (ip: string, email: string | null) =>
  email === null ? [`signup-ip:${ip}`] : [`ip:${ip}`, `email:${sha256Hex(email.trim().toLowerCase())}`];

/**
 * Sign-in (and sign-up, `email` null): count this attempt before its password is verified, or refuse it (the seconds to wait)
 * when a bucket is at its limit already. Checking and counting in one transaction, the buckets'
 * rows locked, is what holds the limit: checking first and counting a failure only after the slow
 * password check let every attempt of a concurrent burst pass the check (hundreds of guesses per
 * window, not perEmail). A refused attempt counts nowhere; a successful one is given back
 * (`releaseAttempt`), so only failures use up the limit, as before.
 */
export async function reserveAttempt(db: Db, ip: string, email: string | null, l: ThrottleLimits): Promise<number> {
  const names = buckets(ip, email).sort();
  return tx(db, async (c) => {
    await c.query(`INSERT INTO sign_in_throttle (bucket, window_start, attempts) SELECT b, now(), 0 FROM unnest($1::text[]) AS b ON CONFLICT (bucket) DO NOTHING`, [names]);
    const r = await c.query(
      `SELECT bucket, attempts, window_start <= now() - $2 * interval '1 millisecond' AS ended,
              ceil(extract(epoch FROM window_start + $2 * interval '1 millisecond' - now()))::int AS wait
         FROM sign_in_throttle WHERE bucket = ANY($1) ORDER BY bucket FOR UPDATE`,
      [names, l.windowMs],
    );
    let wait = 0;
    for (const row of r.rows) {
      const limit = row.bucket.startsWith('email:') ? l.perEmail : l.perIp;
      if (!row.ended && row.attempts >= limit) wait = Math.max(wait, row.wait, 1);
    }
    if (wait > 0) return wait;
    await c.query(
      `UPDATE sign_in_throttle SET
         attempts = CASE WHEN window_start <= now() - $2 * interval '1 millisecond' THEN 1 ELSE attempts + 1 END,
         window_start = CASE WHEN window_start <= now() - $2 * interval '1 millisecond' THEN now() ELSE window_start END
       WHERE bucket = ANY($1)`,
      [names, l.windowMs],
    );
    return 0;
  });
}

/** A reserved attempt succeeded (signed in, or signed up): it does not count against the limits. */
export async function releaseAttempt(db: Db, ip: string, email: string | null): Promise<void> {
  // Rows locked in the order reserveAttempt locks them: the two never wait on each other crosswise.
  await db.query(
    `UPDATE sign_in_throttle t SET attempts = greatest(t.attempts - 1, 0)
      FROM (SELECT bucket FROM sign_in_throttle WHERE bucket = ANY($1) ORDER BY bucket FOR UPDATE) AS mine WHERE t.bucket = mine.bucket`,
    [buckets(ip, email)],
  );
}

/** Windows that have ended count for nothing; deleted now and then by sign-ins. */
export async function deleteEndedWindows(db: Db, l: ThrottleLimits): Promise<void> {
  await db.query(`DELETE FROM sign_in_throttle WHERE window_start <= now() - $1 * interval '1 millisecond'`, [l.windowMs]);
}
