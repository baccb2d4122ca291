// Users and their memberships in organizations. The one writer of `users` and `memberships`.
// The console never adds anyone directly: it records an invitation (invitations.ts) that becomes a
// membership only when the invited user accepts it. Operators (apps/admin) add members directly.
// `email_verified`: someone vouches for the address. The service mails nothing, so console sign-up
// proves nothing about an address (unverified); a user an operator creates is verified.
// The last Owner rule is enforced here, in one transaction that locks the organization row, so two
// concurrent demotions or removals cannot both pass the check.
import { randomBytes } from 'node:crypto';
import { tx, type Db, type DbClient } from '../db/pool.ts';
import { hashPassword, passwordProblem } from './passwords.ts';
import { addressTextProblem } from './display-text.ts';

export const ROLES = ['owner', 'admin', 'member'] as const;
export type Role = (typeof ROLES)[number];
export const isRole = (v: unknown): v is Role => typeof v === 'string' && (ROLES as readonly string[]).includes(v);

/** Owners and Administrators manage keys, connections and members; Members run, read and build. */
export const canManage = (role: Role) => role === 'owner' || role === 'admin';

export const newUserId = () => `usr_${randomBytes(12).toString('hex')}`;

// Deliberately loose (one @, no spaces): the address is a sign-in name, never mailed by this service.
export const EMAIL_RE = /^[^\s@]{1,64}@[^\s@]{1,189}$/;
/**
 * An address as stored and compared: trimmed, in Unicode compatibility form (NFKC: full-width
 * "ｃｅｏ" is "ceo", a decomposed accent is the composed one), lower case. Two spellings that read
 * the same are one address: one account, one sign-in throttle (migration 1700000002500).
 */
export const normalizeEmail = (email: string) => email.trim().normalize('NFKC').toLowerCase();

/**
 * Why a (normalized) address cannot be a user's or an invitation's, or null. Besides the loose
 * shape, no control, direction or invisible character (display-text.ts): the address is what
 * Members and the keys page show of a person, and "ceo@acme.test" with a zero-width space or an
 * override in it would read as someone else's.
 */
export function emailProblem(email: string): string | null {
  if (!EMAIL_RE.test(email)) return 'must look like name@example.com';
  return addressTextProblem(email);
}

export class AccountError extends Error {
  constructor(
    readonly code: 'invalid_email' | 'invalid_name' | 'weak_password' | 'email_taken' | 'not_found' | 'last_owner' | 'already_member' | 'forbidden',
    message: string,
  ) {
    super(message);
    this.name = 'AccountError';
  }
}

export interface UserRow {
  id: string;
  email: string;
  password_hash: string;
}

export interface Membership {
  org_id: string;
  org_name: string;
  role: Role;
}

export async function findUserByEmail(db: Db | DbClient, email: string): Promise<UserRow | undefined> {
  const r = await db.query('SELECT id, email, password_hash FROM users WHERE email = $1', [normalizeEmail(email)]);
  return r.rows[0];
}

/**
 * Create a user (hashing the password); `email_taken` when the address is already used.
 * `emailVerified` only when an operator vouches for the address (never for a self sign-up).
 */
export async function insertUser(c: Db | DbClient, email: string, password: string, emailVerified = false): Promise<{ user_id: string; email: string }> {
  const e = normalizeEmail(email);
  const bad = emailProblem(e);
  if (bad) throw new AccountError('invalid_email', `email ${bad}`);
  const problem = passwordProblem(password);
  if (problem) throw new AccountError('weak_password', `password ${problem}`);
  const id = newUserId();
  const r = await c.query('INSERT INTO users (id, email, password_hash, email_verified) VALUES ($1, $2, $3, $4) ON CONFLICT (email) DO NOTHING RETURNING id', [
    id,
    e,
    await hashPassword(password),
    emailVerified,
  ]);
  if (r.rowCount === 0) throw new AccountError('email_taken', 'a user with that email already exists');
  return { user_id: id, email: e };
}

/** Operators: create a user (its address vouched for) and make them a member of an existing organization with a role. */
export async function createUserInOrg(db: Db, a: { email: string; password: string; orgId: string; role: Role }) {
  return tx(db, async (c) => {
    const org = await c.query('SELECT 1 FROM organizations WHERE id = $1', [a.orgId]);
    if (org.rowCount === 0) throw new AccountError('not_found', `organization ${a.orgId} not found`);
    const user = await insertUser(c, a.email, a.password, true);
    await c.query('INSERT INTO memberships (org_id, user_id, role) VALUES ($1, $2, $3)', [a.orgId, user.user_id, a.role]);
    return { ...user, org_id: a.orgId, role: a.role };
  });
}

/**
 * Operators: vouch for a user's address (users created by sign-up are not vouched for). Invitations
 * to it can then be accepted without their link. Undefined when no user has the address.
 */
export async function verifyUserEmail(db: Db | DbClient, email: string): Promise<{ user_id: string; email: string; email_verified: true } | undefined> {
  const r = await db.query('UPDATE users SET email_verified = true WHERE email = $1 RETURNING id', [normalizeEmail(email)]);
  return r.rows[0] ? { user_id: r.rows[0].id, email: normalizeEmail(email), email_verified: true } : undefined;
}

export async function membershipsOf(db: Db | DbClient, userId: string): Promise<Membership[]> {
  const r = await db.query(
    `SELECT m.org_id, o.name AS org_name, m.role FROM memberships m JOIN organizations o ON o.id = m.org_id
      WHERE m.user_id = $1 ORDER BY o.name, m.org_id`,
    [userId],
  );
  return r.rows;
}

/**
 * The organization a sign-in opens: the user's oldest membership. Never chosen by name: names are
 * set by whoever creates an organization, and sorting by them let any organization a user was added
 * to (named "AAA…") choose where that user's next sign-in landed, and what they then did there.
 */
export async function firstMembership(db: Db | DbClient, userId: string): Promise<Membership | undefined> {
  const r = await db.query(
    `SELECT m.org_id, o.name AS org_name, m.role FROM memberships m JOIN organizations o ON o.id = m.org_id
      WHERE m.user_id = $1 ORDER BY m.created_at, m.org_id LIMIT 1`,
    [userId],
  );
  return r.rows[0];
}

export async function roleIn(db: Db | DbClient, userId: string, orgId: string): Promise<Role | undefined> {
  const r = await db.query('SELECT role FROM memberships WHERE user_id = $1 AND org_id = $2', [userId, orgId]);
  return r.rows[0]?.role;
}

export interface MemberRow {
  user_id: string;
  email: string;
  role: Role;
  created_at: Date;
}

export async function listMembers(db: Db, orgId: string): Promise<MemberRow[]> {
  const r = await db.query(
    `SELECT m.user_id, u.email, m.role, m.created_at FROM memberships m JOIN users u ON u.id = m.user_id
      WHERE m.org_id = $1 ORDER BY array_position(ARRAY['owner','admin','member'], m.role), u.email`,
    [orgId],
  );
  return r.rows;
}

/** Only an Owner may grant the Owner role or change an Owner's role. */
export function checkActor(actor: Role, from: Role | null, to: Role | null) {
  if (!canManage(actor)) throw new AccountError('forbidden', 'only Owners and Administrators manage members');
  if (actor !== 'owner' && (from === 'owner' || to === 'owner')) throw new AccountError('forbidden', 'only an Owner can grant or change the Owner role');
}

/**
 * Change a member's role (`to`) or remove them (`to` = null). The organization row is locked first,
 * so the count of Owners read here cannot change before this transaction commits.
 */
export async function changeMember(db: Db, actor: Role, orgId: string, userId: string, to: Role | null): Promise<void> {
  await tx(db, async (c) => {
    await c.query('SELECT 1 FROM organizations WHERE id = $1 FOR UPDATE', [orgId]);
    const cur = await c.query('SELECT role FROM memberships WHERE org_id = $1 AND user_id = $2', [orgId, userId]);
    const from: Role | undefined = cur.rows[0]?.role;
    if (!from) throw new AccountError('not_found', 'no such member');
    checkActor(actor, from, to);
    if (from === 'owner' && to !== 'owner') {
      const owners = await c.query(`SELECT count(*)::int AS n FROM memberships WHERE org_id = $1 AND role = 'owner'`, [orgId]);
      if (owners.rows[0].n <= 1) throw new AccountError('last_owner', 'the last Owner cannot be removed or demoted; make another member Owner first');
    }
    // Removing the membership deletes that user's sessions on this organization (foreign key cascade).
    if (to === null) {
      await c.query('DELETE FROM memberships WHERE org_id = $1 AND user_id = $2', [orgId, userId]);
      // And any invitation of their address to it still pending (invitations.ts): one sent before an
      // operator added them directly, or re-sent while they were accepting, outlived the membership,
      // so a removed member accepted it afterwards and was back, with the invitation's role (admin
      // for a former member, say). Under the organization's row lock, as accepting takes it.
      await c.query(
        `DELETE FROM member_invitations WHERE org_id = $1 AND status = 'pending' AND email = (SELECT email FROM users WHERE id = $2)`,
        [orgId, userId],
      );
    } else await c.query('UPDATE memberships SET role = $3 WHERE org_id = $1 AND user_id = $2', [orgId, userId, to]);
  });
}

/** Operators and the dev bootstrap: set a user's password (their sessions end: a reset means distrust). */
export async function setPassword(db: Db, userId: string, password: string): Promise<void> {
  const problem = passwordProblem(password);
  if (problem) throw new AccountError('weak_password', `password ${problem}`);
  const hashed = await hashPassword(password);
  await tx(db, async (c) => {
    await c.query('UPDATE users SET password_hash = $2 WHERE id = $1', [userId, hashed]);
    await c.query('DELETE FROM console_sessions WHERE user_id = $1', [userId]);
  });
}

/** Make a user a member with a role if they are not one yet (the dev bootstrap). */
export async function ensureMembership(db: Db, orgId: string, userId: string, role: Role): Promise<void> {
  await db.query('INSERT INTO memberships (org_id, user_id, role) VALUES ($1, $2, $3) ON CONFLICT DO NOTHING', [orgId, userId, role]);
}
