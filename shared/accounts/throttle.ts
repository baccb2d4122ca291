// Sign-in throttling: fixed-window counters of failed attempts in PostgreSQL (so every API process
// shares them), one bucket per client IP and one per email (hashed: the table never holds addresses
// of people who have no account); refused sign-ups have a per-IP bucket of their own. An attempt
// is counted before it is answered and given back if it succeeds (reserveAttempt / releaseAttempt).
// Accounts made by sign-up have a per-IP budget of their own, over a longer window (`signups:`).
import { sha256Hex } from '../ids.ts';
import { tx, type Db } from '../db/pool.ts';
import { normalizeEmail } from './users.ts';

export interface ThrottleLimits {
  windowMs: number;
  perIp: number;
  perEmail: number;
}

// `email` null: sign-up, whose refusals have a per-IP bucket of their own (same limit as sign-in's),
// so that failed sign-ins do not close sign-up to an address or the reverse.
const buckets = (ip: string, email: string | null) =>
  email === null ? [`signup-ip:${ip}`] : [`ip:${ip}`, `email:${sha256Hex(normalizeEmail(email))}`];

/** One counter: its bucket, how many attempts its window allows, and the window's length. */
interface Counter {
  bucket: string;
  limit: number;
  windowMs: number;
}

/**
 * Count one attempt in every counter, or in none and answer the seconds to wait when one of them is
 * at its limit already. Checking and counting in one transaction, the buckets' rows locked (in
 * bucket order, as releasing locks them), is what holds a limit against a concurrent burst.
 */
async function reserve(db: Db, counters: Counter[]): Promise<{ wait: number; full: string[] }> {
  const sorted = [...counters].sort((a, b) => (a.bucket < b.bucket ? -1 : a.bucket > b.bucket ? 1 : 0));
  const names = sorted.map((c) => c.bucket);
  const windows = sorted.map((c) => c.windowMs);
  return tx(db, async (c) => {
    await c.query(`INSERT INTO sign_in_throttle (bucket, window_start, attempts) SELECT b, now(), 0 FROM unnest($1::text[]) AS b ON CONFLICT (bucket) DO NOTHING`, [names]);
    const r = await c.query(
      `SELECT t.bucket, t.attempts, t.window_start <= now() - w.ms * interval '1 millisecond' AS ended,
              ceil(extract(epoch FROM t.window_start + w.ms * interval '1 millisecond' - now()))::int AS wait
         FROM sign_in_throttle t JOIN unnest($1::text[], $2::float8[]) AS w(bucket, ms) ON w.bucket = t.bucket
        ORDER BY t.bucket FOR UPDATE OF t`,
      [names, windows],
    );
    let wait = 0;
    const full: string[] = [];
    for (const row of r.rows) {
      const limit = sorted.find((x) => x.bucket === row.bucket)!.limit;
      if (!row.ended && row.attempts >= limit) {
        wait = Math.max(wait, row.wait, 1);
        full.push(row.bucket);
      }
    }
    if (wait > 0) return { wait, full };
    await c.query(
      `UPDATE sign_in_throttle t SET
         attempts = CASE WHEN t.window_start <= now() - w.ms * interval '1 millisecond' THEN 1 ELSE t.attempts + 1 END,
         window_start = CASE WHEN t.window_start <= now() - w.ms * interval '1 millisecond' THEN now() ELSE t.window_start END
        FROM unnest($1::text[], $2::float8[]) AS w(bucket, ms) WHERE t.bucket = w.bucket`,
      [names, windows],
    );
    return { wait: 0, full };
  });
}

/** Give back one attempt counted by `reserve` in each of `names`. */
async function release(db: Db, names: string[]): Promise<void> {
  // Rows locked in the order reserve locks them: the two never wait on each other crosswise.
  await db.query(
    `UPDATE sign_in_throttle t SET attempts = greatest(t.attempts - 1, 0)
      FROM (SELECT bucket FROM sign_in_throttle WHERE bucket = ANY($1) ORDER BY bucket FOR UPDATE) AS mine WHERE t.bucket = mine.bucket`,
    [names],
  );
}

/**
 * Sign-in (and sign-up, `email` null): count this attempt before its password is verified, or refuse it (the seconds to wait)
 * when a bucket is at its limit already. Checking first and counting a failure only after the slow
 * password check let every attempt of a concurrent burst pass the check (hundreds of guesses per
 * window, not perEmail). A refused attempt counts nowhere; a successful one is given back
 * (`releaseAttempt`), so only failures use up the limit, as before.
 */
export async function reserveAttempt(db: Db, ip: string, email: string | null, l: ThrottleLimits): Promise<number> {
  const r = await reserve(db, buckets(ip, email).map((bucket) => ({ bucket, limit: bucket.startsWith('email:') ? l.perEmail : l.perIp, windowMs: l.windowMs })));
  return r.wait;
}

/** A reserved attempt succeeded (signed in, or signed up): it does not count against the limits. */
export async function releaseAttempt(db: Db, ip: string, email: string | null): Promise<void> {
  await release(db, buckets(ip, email));
}

/**
 * Accounts made by sign-up, per client address: each is a new organization granted
 * CONSOLE_SIGNUP_CREDITS, so without a budget one address could make organizations (and collect
 * their credits) without end. Successes count here, refusals in the sign-up bucket above.
 */
export interface SignUpLimits {
  windowMs: number;
  perIp: number;
}

const signUpsBucket = (ip: string) => `signups:${ip}`;

/**
 * Sign-up: count one refusal (the `signup-ip` bucket, sign-in's per-IP limit) and one account made
 * (`signups`, `made`) before the form is answered, or neither and the seconds to wait when either
 * is used up (`accounts`: the budget of accounts made is, whatever the other). Then `settleSignUp`
 * gives back the one that did not happen.
 */
export async function reserveSignUp(db: Db, ip: string, l: ThrottleLimits, made: SignUpLimits): Promise<{ wait: number; accounts: boolean }> {
  const r = await reserve(db, [
    { bucket: buckets(ip, null)[0]!, limit: l.perIp, windowMs: l.windowMs },
    { bucket: signUpsBucket(ip), limit: made.perIp, windowMs: made.windowMs },
  ]);
  return { wait: r.wait, accounts: r.full.includes(signUpsBucket(ip)) };
}

/** After `reserveSignUp`: an account was made (a refusal was not), or the form was refused (no account made). */
export async function settleSignUp(db: Db, ip: string, accountMade: boolean): Promise<void> {
  await release(db, [accountMade ? buckets(ip, null)[0]! : signUpsBucket(ip)]);
}

/** Windows that have ended count for nothing; deleted now and then by sign-ins (each bucket after its own window). */
export async function deleteEndedWindows(db: Db, l: ThrottleLimits, made: SignUpLimits): Promise<void> {
  await db.query(
    `DELETE FROM sign_in_throttle WHERE window_start <= now() - (CASE WHEN bucket LIKE 'signups:%' THEN $2::float8 ELSE $1::float8 END) * interval '1 millisecond'`,
    [l.windowMs, made.windowMs],
  );
}
