// Server-side console sessions. The browser holds a random id; PostgreSQL holds its SHA-256, so a
// leaked table cannot be replayed as cookies. Every lookup re-reads the membership: a removed member
// or a changed role takes effect on the next request.
import { randomBytes } from 'node:crypto';
import { sha256 } from '../ids.ts';
import { tx, type Db } from '../db/pool.ts';
import { grantCredits } from '../db/credits.ts';
import { newOrgId } from '../ids.ts';
import { AccountError, insertUser, type Role } from './users.ts';
import { displayTextProblem } from './display-text.ts';

export interface SessionTimes {
  /** A session unused this long ends. */
  idleMs: number;
  /** A session ends this long after sign-in, used or not. */
  maxMs: number;
}

export interface Session {
  userId: string;
  email: string;
  orgId: string;
  orgName: string;
  role: Role;
}

/** A new session for a user on one of their organizations; returns the cookie value. */
export async function createSession(db: Db, userId: string, orgId: string, t: SessionTimes): Promise<string> {
  const id = randomBytes(32).toString('base64url');
  await db.query(`INSERT INTO console_sessions (id_hash, user_id, org_id, expires_at) VALUES ($1, $2, $3, now() + $4 * interval '1 millisecond')`, [
    sha256(id),
    userId,
    orgId,
    t.maxMs,
  ]);
  return id;
}

const SESSION_ID_RE = /^[A-Za-z0-9_-]{43}$/;
/** Whether `id` has the shape of a session id (32 random bytes, base64url): only such ids are looked up. */
export const isSessionId = (id: string): boolean => SESSION_ID_RE.test(id);

/**
 * The live session of a cookie value, or null (unknown, idle too long, past its absolute end, or the
 * membership is gone). `last_seen_at` is written at most once a minute per session.
 */
export async function loadSession(db: Db, id: string | undefined, t: SessionTimes): Promise<Session | null> {
  if (!id || !SESSION_ID_RE.test(id)) return null;
  const r = await db.query(
    `SELECT s.user_id, u.email, s.org_id, o.name AS org_name, m.role, s.last_seen_at < now() - interval '1 minute' AS stale
       FROM console_sessions s
       JOIN users u ON u.id = s.user_id
       JOIN memberships m ON m.org_id = s.org_id AND m.user_id = s.user_id
       JOIN organizations o ON o.id = s.org_id
      WHERE s.id_hash = $1 AND s.expires_at > now() AND s.last_seen_at > now() - $2 * interval '1 millisecond'`,
    [sha256(id), t.idleMs],
  );
  const row = r.rows[0];
  if (!row) return null;
  if (row.stale) await db.query('UPDATE console_sessions SET last_seen_at = now() WHERE id_hash = $1', [sha256(id)]);
  return { userId: row.user_id, email: row.email, orgId: row.org_id, orgName: row.org_name, role: row.role };
}

export async function deleteSession(db: Db, id: string | undefined): Promise<void> {
  if (!id || !SESSION_ID_RE.test(id)) return;
  await db.query('DELETE FROM console_sessions WHERE id_hash = $1', [sha256(id)]);
}

/** Point the session at another of the user's organizations; false when they are not a member there. */
export async function switchOrg(db: Db, id: string, orgId: string): Promise<boolean> {
  const r = await db.query(
    `UPDATE console_sessions s SET org_id = $2 FROM memberships m
      WHERE s.id_hash = $1 AND m.user_id = s.user_id AND m.org_id = $2`,
    [sha256(id), orgId],
  );
  return r.rowCount === 1;
}

/** Expired rows are useless; deleted now and then by sign-ins (no scheduler needed for a small table). */
export async function deleteExpiredSessions(db: Db, t: SessionTimes): Promise<void> {
  await db.query(`DELETE FROM console_sessions WHERE expires_at <= now() OR last_seen_at <= now() - $1 * interval '1 millisecond'`, [t.idleMs]);
}

/**
 * Sign-up: a new user, Owner of a new organization with `credits` granted, in one transaction. The
 * user's address is unverified: nothing proves it is theirs (invitations to it need their link).
 * A name with a control, direction or invisible character is `invalid_name` (display-text.ts).
 */
export async function signUp(db: Db, a: { email: string; password: string; orgName: string; credits: number }) {
  // The name is shown to the people it invites (their switcher, the invitation's page, OAuth consent).
  const bad = displayTextProblem(a.orgName);
  if (bad) throw new AccountError('invalid_name', `organization name ${bad}`);
  return tx(db, async (c) => {
    const user = await insertUser(c, a.email, a.password, false);
    const orgId = newOrgId();
    await c.query('INSERT INTO organizations (id, name) VALUES ($1, $2)', [orgId, a.orgName]);
    await c.query('INSERT INTO credit_balances (org_id) VALUES ($1)', [orgId]);
    if (a.credits > 0) await grantCredits(c, orgId, a.credits, 'sign-up grant');
    await c.query(`INSERT INTO memberships (org_id, user_id, role) VALUES ($1, $2, 'owner')`, [orgId, user.user_id]);
    return { ...user, org_id: orgId };
  });
}
