// Invitations to an organization: the one writer of `member_invitations`. The console's "Add a
// member" records one; only the invited user, signed in to their own console, turns it into a
// membership (accept) or refuses it (decline). Until then it grants nothing: memberships, sessions,
// the org switcher, API keys, OAuth consent and MCP all read `memberships` only.
//
// An invitation is recorded for the email as typed, whether or not a user has it, and the answer
// is the same either way: the form must not tell a stranger which addresses have accounts.
import { randomBytes } from 'node:crypto';
import { tx, type Db } from '../db/pool.ts';
import { AccountError, EMAIL_RE, checkActor, normalizeEmail, type Role } from './users.ts';

export const newInvitationId = () => `inv_${randomBytes(12).toString('hex')}`;
export const INVITATION_ID_RE = /^inv_[0-9a-f]{24}$/;

export interface OrgInvitation {
  id: string;
  email: string;
  role: Role;
  created_at: Date;
}

export interface UserInvitation {
  id: string;
  org_name: string;
  role: Role;
  created_at: Date;
}

/**
 * Record an invitation of `email` to the organization with `role`. Refuses only what the inviter
 * can see anyway: a malformed address, a role they may not grant, someone already in their member
 * list. Anything else is the same silent success: a new invitation, a pending one re-sent with the
 * new role, or one the person declined (which stays declined: no re-inviting after a no).
 */
export async function inviteMember(db: Db, a: { actor: Role; actorUserId: string; orgId: string; email: string; role: Role }): Promise<void> {
  checkActor(a.actor, null, a.role);
  const email = normalizeEmail(a.email);
  if (!EMAIL_RE.test(email)) throw new AccountError('invalid_email', 'email must look like name@example.com');
  const member = await db.query('SELECT 1 FROM memberships m JOIN users u ON u.id = m.user_id WHERE m.org_id = $1 AND u.email = $2', [a.orgId, email]);
  if (member.rowCount) throw new AccountError('already_member', 'that person is already a member (see the list above)');
  await db.query(
    `INSERT INTO member_invitations AS i (id, org_id, email, role, invited_by) VALUES ($1, $2, $3, $4, $5)
       ON CONFLICT (org_id, email) DO UPDATE SET role = EXCLUDED.role, invited_by = EXCLUDED.invited_by, created_at = now()
       WHERE i.status = 'pending'`,
    [newInvitationId(), a.orgId, email, a.role, a.actorUserId],
  );
}

/** The organization's pending invitations (its managers see them; declined ones are not listed). */
export async function orgInvitations(db: Db, orgId: string): Promise<OrgInvitation[]> {
  const r = await db.query(
    `SELECT id, email, role, created_at FROM member_invitations WHERE org_id = $1 AND status = 'pending' ORDER BY created_at DESC, id`,
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

/** The pending invitations addressed to a signed-in user's email. */
export async function userInvitations(db: Db, userId: string): Promise<UserInvitation[]> {
  const r = await db.query(
    `SELECT i.id, o.name AS org_name, i.role, i.created_at
       FROM member_invitations i JOIN users u ON u.email = i.email JOIN organizations o ON o.id = i.org_id
      WHERE u.id = $1 AND i.status = 'pending' ORDER BY i.created_at, i.id`,
    [userId],
  );
  return r.rows;
}

/** The invited user accepts: the membership is created and the invitation is gone, in one step. */
export async function acceptInvitation(db: Db, userId: string, id: string): Promise<{ org_id: string; role: Role }> {
  return tx(db, async (c) => {
    const r = await c.query(
      `SELECT i.org_id, i.role FROM member_invitations i JOIN users u ON u.email = i.email
        WHERE i.id = $1 AND u.id = $2 AND i.status = 'pending' FOR UPDATE OF i`,
      [id, userId],
    );
    if (!r.rowCount) throw new AccountError('not_found', 'no such invitation');
    const { org_id, role } = r.rows[0] as { org_id: string; role: Role };
    await c.query('INSERT INTO memberships (org_id, user_id, role) VALUES ($1, $2, $3) ON CONFLICT DO NOTHING', [org_id, userId, role]);
    await c.query('DELETE FROM member_invitations WHERE id = $1', [id]);
    return { org_id, role };
  });
}

/** The invited user declines: the invitation stays, declined, so the organization cannot re-send it. */
export async function declineInvitation(db: Db, userId: string, id: string): Promise<void> {
  const r = await db.query(
    `UPDATE member_invitations i SET status = 'declined', decided_at = now() FROM users u
      WHERE i.id = $1 AND u.id = $2 AND u.email = i.email AND i.status = 'pending'`,
    [id, userId],
  );
  if (!r.rowCount) throw new AccountError('not_found', 'no such invitation');
}
