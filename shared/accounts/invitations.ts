// Invitations to an organization: the one writer of `member_invitations`, but for removing a member
// (users.ts changeMember deletes their address's pending ones in the same step). The console's "Add
// a member" records one; only the invited user, signed in to their own console, turns it into a
// membership (accept) or refuses it (decline). Until then it grants nothing: memberships, sessions,
// the org switcher, API keys, OAuth consent and MCP all read `memberships` only.
//
// An invitation is recorded for the email as typed, whether or not a user has it, and the answer
// is the same either way: the form must not tell a stranger which addresses have accounts.
//
// An invitation is the inviter's grant, so it holds only while the inviter could still make it: it
// expires INVITATION_TTL_DAYS after it was sent (or re-sent), and accepting re-checks that the
// inviter is still a member whose role may grant the invited one (checkActor). An expired one, one
// whose inviter was removed or demoted below it, a withdrawn one and an unknown one all answer
// alike (`not_found`), and the invited person's list shows only those they can accept.
//
// An email address alone does not say who may accept: with sign-up open anyone can create an
// account with any address (the service mails nothing, so nothing proves it). So each invitation
// has a link with a secret (32 random bytes; only its SHA-256 is stored) that whoever invites sees
// once and sends to the person themselves. Accepting or declining needs the signed-in user's email
// to be the invited one AND either their address vouched for (`users.email_verified`: an operator
// created them) or the link's secret. Sending again makes a new secret; the old link stops working.
import { randomBytes, timingSafeEqual } from 'node:crypto';
import { sha256 } from '../ids.ts';
import { tx, type Db, type DbClient } from '../db/pool.ts';
import { AccountError, checkActor, emailProblem, normalizeEmail, type Role } from './users.ts';

export const newInvitationId = () => `inv_${randomBytes(12).toString('hex')}`;
export const INVITATION_ID_RE = /^inv_[0-9a-f]{24}$/;
const newLinkToken = () => randomBytes(32).toString('base64url');
export const LINK_TOKEN_RE = /^[A-Za-z0-9_-]{43}$/;
/** How long an invitation can be accepted after it was sent or last re-sent. */
export const INVITATION_TTL_DAYS = 7;

export interface OrgInvitation {
  id: string;
  email: string;
  role: Role;
  created_at: Date;
  expires_at: Date;
  expired: boolean;
}

export interface UserInvitation {
  id: string;
  org_name: string;
  role: Role;
  created_at: Date;
}

/** What "Invite" answers with: the invitation's id and its link's secret (to show once, never stored). */
export interface InvitationLink {
  id: string;
  token: string;
}

/**
 * Record an invitation of `email` to the organization with `role`. Refuses only what the inviter
 * can see anyway: a malformed address, a role they may not grant, someone already in their member
 * list. Anything else is the same silent success with a link: a new invitation, a pending one
 * re-sent with the new role (a new expiry, even if it had expired, and a new link: the old one stops
 * working), or one the person declined (which stays declined: no re-inviting after a no; its link,
 * of the same shape, opens nothing).
 */
export async function inviteMember(db: Db, a: { actor: Role; actorUserId: string; orgId: string; email: string; role: Role }): Promise<InvitationLink> {
  checkActor(a.actor, null, a.role);
  const email = normalizeEmail(a.email);
  const bad = emailProblem(email);
  if (bad) throw new AccountError('invalid_email', `email ${bad}`);
  const member = await db.query('SELECT 1 FROM memberships m JOIN users u ON u.id = m.user_id WHERE m.org_id = $1 AND u.email = $2', [a.orgId, email]);
  if (member.rowCount) throw new AccountError('already_member', 'that person is already a member (see the list above)');
  // Sending again replaces the pending invitation's role, link and expiry: that is changing it, so
  // the Owner rule applies to what it was too (an Administrator may not turn an Owner's pending
  // Owner invitation into another one, nor void its link; they see it listed, so refusing tells
  // nothing new). The statement below re-checks it, so a concurrent Owner invitation is not touched.
  const pending = await db.query(`SELECT role FROM member_invitations WHERE org_id = $1 AND email = $2 AND status = 'pending'`, [a.orgId, email]);
  if (pending.rowCount) checkActor(a.actor, pending.rows[0].role, a.role);
  const token = newLinkToken();
  const r = await db.query(
    `INSERT INTO member_invitations AS i (id, org_id, email, role, invited_by, expires_at, token_hash)
       VALUES ($1, $2, $3, $4, $5, now() + make_interval(days => $6), $7)
       ON CONFLICT (org_id, email) DO UPDATE SET role = EXCLUDED.role, invited_by = EXCLUDED.invited_by, created_at = now(),
         expires_at = EXCLUDED.expires_at, token_hash = EXCLUDED.token_hash
       WHERE i.status = 'pending' AND (i.role <> 'owner' OR $8)
       RETURNING id`,
    [newInvitationId(), a.orgId, email, a.role, a.actorUserId, INVITATION_TTL_DAYS, sha256(token), a.actor === 'owner'],
  );
  return { id: r.rows[0]?.id ?? newInvitationId(), token };
}

/** Whether `token` is the secret of the link whose hash is `hash` (compared in constant time). */
function linkMatches(hash: Buffer | null, token: string | undefined): boolean {
  if (!hash || token === undefined || !LINK_TOKEN_RE.test(token)) return false;
  const given = sha256(token);
  return given.length === hash.length && timingSafeEqual(given, hash);
}

/** Whether the signed-in invited user may answer: their address vouched for, or the link's secret. */
const mayAnswer = (row: { email_verified: boolean; token_hash: Buffer | null }, token: string | undefined) =>
  row.email_verified || linkMatches(row.token_hash, token);

/**
 * The organization's pending invitations (its managers see them, expired ones marked so that they
 * can be sent again or withdrawn; declined ones are not listed).
 */
export async function orgInvitations(db: Db, orgId: string): Promise<OrgInvitation[]> {
  const r = await db.query(
    `SELECT id, email, role, created_at, expires_at, expires_at <= now() AS expired
       FROM member_invitations WHERE org_id = $1 AND status = 'pending' ORDER BY created_at DESC, id`,
    [orgId],
  );
  return r.rows;
}

/** An Owner or Administrator withdraws a pending invitation (only an Owner one of the Owner role). */
export async function revokeInvitation(db: Db, actor: Role, orgId: string, id: string): Promise<void> {
  await tx(db, async (c) => {
    const r = await c.query(`SELECT role FROM member_invitations WHERE id = $1 AND org_id = $2 AND status = 'pending' FOR UPDATE`, [id, orgId]);
    if (!r.rowCount) throw new AccountError('not_found', 'no such invitation');
    checkActor(actor, r.rows[0].role, null);
    await c.query('DELETE FROM member_invitations WHERE id = $1', [id]);
  });
}

/** Whether an inviter of role `inviter` (undefined: no longer a member) may grant `role` now. */
function inviterMayGrant(inviter: Role | null | undefined, role: Role): boolean {
  if (!inviter) return false;
  try {
    checkActor(inviter, null, role);
    return true;
  } catch {
    return false;
  }
}

/** The invited user's pending, unexpired invitations, with their inviter's current role there. */
const LIVE_FOR_USER = `
  SELECT i.id, o.name AS org_name, i.role, i.created_at, im.role AS inviter_role, i.token_hash, u.email_verified
    FROM member_invitations i
    JOIN users u ON u.email = i.email
    JOIN organizations o ON o.id = i.org_id
    LEFT JOIN memberships im ON im.org_id = i.org_id AND im.user_id = i.invited_by
   WHERE u.id = $1 AND i.status = 'pending' AND i.expires_at > now()`;

const userInvitation = ({ id, org_name, role, created_at }: UserInvitation): UserInvitation => ({ id, org_name, role, created_at });

/**
 * The invitations a signed-in user can accept now without a link (expired ones and void ones are
 * not shown): none unless their address is vouched for, since anyone may have signed up with it.
 */
export async function userInvitations(db: Db, userId: string): Promise<UserInvitation[]> {
  const r = await db.query(`${LIVE_FOR_USER} AND u.email_verified ORDER BY i.created_at, i.id`, [userId]);
  return r.rows.filter((x) => inviterMayGrant(x.inviter_role, x.role)).map(userInvitation);
}

/** The invitation a link opens for the signed-in user, if they may answer it now; else undefined. */
export async function linkInvitation(db: Db, userId: string, id: string, token: string): Promise<UserInvitation | undefined> {
  const r = await db.query(`${LIVE_FOR_USER} AND i.id = $2`, [userId, id]);
  const x = r.rows[0];
  return x && mayAnswer(x, token) && inviterMayGrant(x.inviter_role, x.role) ? userInvitation(x) : undefined;
}

/**
 * One invitation the user can answer now (with `token`, the link's secret, unless their address is
 * vouched for), locked; `not_found` for anything else, a wrong or missing secret included. The
 * organization's row is then locked, as changeMember locks it, so a concurrent removal or demotion
 * of the inviter either commits before the inviter's role is read here (and is seen) or waits for
 * this answer.
 */
async function liveInvitation(c: DbClient, userId: string, id: string, token: string | undefined): Promise<{ org_id: string; role: Role }> {
  const r = await c.query(`SELECT i.org_id, i.role, i.invited_by, i.token_hash, u.email_verified FROM member_invitations i JOIN users u ON u.email = i.email
      WHERE i.id = $1 AND u.id = $2 AND i.status = 'pending' AND i.expires_at > now() FOR UPDATE OF i`, [id, userId]);
  const row = r.rows[0] as { org_id: string; role: Role; invited_by: string | null; token_hash: Buffer | null; email_verified: boolean } | undefined;
  if (!row || !mayAnswer(row, token)) throw new AccountError('not_found', 'no such invitation');
  await c.query('SELECT 1 FROM organizations WHERE id = $1 FOR UPDATE', [row.org_id]);
  const inviter = row.invited_by ? await c.query('SELECT role FROM memberships WHERE org_id = $1 AND user_id = $2', [row.org_id, row.invited_by]) : null;
  if (!inviterMayGrant(inviter?.rows[0]?.role, row.role)) throw new AccountError('not_found', 'no such invitation');
  return { org_id: row.org_id, role: row.role };
}

/** The invited user accepts: the membership is created and the invitation is gone, in one step. */
export async function acceptInvitation(db: Db, userId: string, id: string, token?: string): Promise<{ org_id: string; role: Role }> {
  return tx(db, async (c) => {
    const { org_id, role } = await liveInvitation(c, userId, id, token);
    await c.query('INSERT INTO memberships (org_id, user_id, role) VALUES ($1, $2, $3) ON CONFLICT DO NOTHING', [org_id, userId, role]);
    await c.query('DELETE FROM member_invitations WHERE id = $1', [id]);
    return { org_id, role };
  });
}

/**
 * The invited user declines: the invitation stays, declined, so the organization cannot re-send it.
 * It needs what accepting needs, so a sign-up squatting the address cannot refuse it for its owner.
 */
export async function declineInvitation(db: Db, userId: string, id: string, token?: string): Promise<void> {
  await tx(db, async (c) => {
    await liveInvitation(c, userId, id, token);
    await c.query(`UPDATE member_invitations SET status = 'declined', decided_at = now() WHERE id = $1`, [id]);
  });
}
