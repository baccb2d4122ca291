// Members (Owners and Administrators): invite someone by email, withdraw an invitation, change a
// role, remove. The rules (last Owner, who may touch the Owner role) live in
// shared/accounts/users.ts; invitations (which grant nothing until accepted) in invitations.ts.
// Inviting answers with the page itself, showing the invitation's link once (like a new API key):
// only its hash is stored, and it is for the inviter to send, since the service mails nothing.
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import { z } from 'zod';
import { AccountError, changeMember, listMembers, normalizeEmail, ROLES } from '../../../../shared/accounts/users.ts';
import { INVITATION_ID_RE, INVITATION_TTL_DAYS, inviteMember, orgInvitations, revokeInvitation, type InvitationLink } from '../../../../shared/accounts/invitations.ts';
import { needManager, needSession, notFound, sessionOf, type ConsoleContext } from '../context.ts';
import { invitationLinkPath } from './invitations.ts';
import { keyCreators } from '../../../../shared/db/orgs.ts';
import { keysCreatedByPath, revokeCreatedByPath, USER_ID_RE } from './keys.ts';

const AddForm = z.object({ _csrf: z.string(), email: z.string().max(254), role: z.enum(ROLES) });
const RoleForm = z.object({ _csrf: z.string(), role: z.enum(ROLES) });
/** The one answer to an invitation, whether or not the address has an account. */
export const INVITED = 'Invitation recorded; it takes effect when that person accepts it.';

export default async function memberPages(app: FastifyInstance, ctx: ConsoleContext) {
  const guard = { schema: { hide: true }, preHandler: [needSession, needManager] };

  /**
   * `invited`: the address just invited and its link, shown this once. `removed`: a user id from
   * `?removed=` after a removal; said only when that user is no longer a member and still has keys
   * of this organization that work (all of it this organization's own data, whoever crafts the URL).
   */
  async function page(request: FastifyRequest, reply: FastifyReply, error: string | null, status = 200, invited: { email: string; link: string } | null = null, removed?: string) {
    const s = sessionOf(request);
    const [members, invitations, creators] = await Promise.all([
      listMembers(app.db, s.orgId),
      orgInvitations(app.db, s.orgId),
      removed ? keyCreators(app.db, s.orgId, removed) : [],
    ]);
    const c = creators[0];
    const removedKeys = c && !c.member && c.active_keys > 0 ? { email: c.email, active: c.active_keys, listPath: keysCreatedByPath(c.user_id), revokeAction: revokeCreatedByPath(c.user_id) } : null;
    return ctx.render(request, reply, 'members.eta', { title: 'Members', members, invitations, roles: ROLES, ttlDays: INVITATION_TTL_DAYS, error, notice: invited ? INVITED : null, invited, removedKeys }, status);
  }

  /** A refused change re-renders the page with the reason; a member id from the URL that is not one is 404. */
  function refused(request: FastifyRequest, reply: FastifyReply, err: unknown, idInUrl = false) {
    if (!(err instanceof AccountError)) throw err;
    if (err.code === 'not_found' && idInUrl) throw notFound();
    const status = err.code === 'forbidden' ? 403 : err.code === 'not_found' ? 404 : err.code === 'invalid_email' ? 400 : 409;
    return page(request, reply, `${err.message[0]!.toUpperCase()}${err.message.slice(1)}.`, status);
  }

  async function attempt(request: FastifyRequest, reply: FastifyReply, fn: () => Promise<unknown>, idInUrl = false, then = '/console/members') {
    try {
      await fn();
    } catch (err) {
      return refused(request, reply, err, idInUrl);
    }
    return reply.redirect(then, 303);
  }

  app.get<{ Querystring: { removed?: unknown } }>('/console/members', guard, async (request, reply) => {
    const removed = request.query.removed;
    return page(request, reply, null, 200, null, typeof removed === 'string' && USER_ID_RE.test(removed) ? removed : undefined);
  });

  // One notice and a link of one shape, whether or not the address has an account (or declined).
  app.post('/console/members', guard, async (request, reply) => {
    const s = sessionOf(request);
    const f = AddForm.safeParse(request.body);
    if (!f.success) return page(request, reply, 'Give an email and a role.', 400);
    let made: InvitationLink;
    try {
      made = await inviteMember(app.db, { actor: s.role, actorUserId: s.userId, orgId: s.orgId, email: f.data.email, role: f.data.role });
    } catch (err) {
      return refused(request, reply, err);
    }
    return page(request, reply, null, 200, { email: normalizeEmail(f.data.email), link: `${app.baseUrl()}${invitationLinkPath(made.id, made.token)}` });
  });

  app.post<{ Params: { invitation_id: string } }>('/console/members/invitations/:invitation_id/revoke', guard, async (request, reply) => {
    const s = sessionOf(request);
    if (!INVITATION_ID_RE.test(request.params.invitation_id)) throw notFound();
    return attempt(request, reply, () => revokeInvitation(app.db, s.role, s.orgId, request.params.invitation_id), true);
  });

  app.post<{ Params: { user_id: string } }>('/console/members/:user_id/role', guard, async (request, reply) => {
    const s = sessionOf(request);
    if (!USER_ID_RE.test(request.params.user_id)) throw notFound();
    const f = RoleForm.safeParse(request.body);
    if (!f.success) return page(request, reply, 'Choose a role.', 400);
    return attempt(request, reply, () => changeMember(app.db, s.role, s.orgId, request.params.user_id, f.data.role), true);
  });

  app.post<{ Params: { user_id: string } }>('/console/members/:user_id/remove', guard, async (request, reply) => {
    const s = sessionOf(request);
    if (!USER_ID_RE.test(request.params.user_id)) throw notFound();
    // The keys they made are not revoked with them (integrations would break silently): the page
    // then says how many still work, with the list and a form to revoke them.
    const then = `/console/members?removed=${encodeURIComponent(request.params.user_id)}`;
    return attempt(request, reply, () => changeMember(app.db, s.role, s.orgId, request.params.user_id, null), true, then);
  });
}
