// Members (Owners and Administrators): invite someone by email, withdraw an invitation, change a
// role, remove. The rules (last Owner, who may touch the Owner role) live in
// shared/accounts/users.ts; invitations (which grant nothing until accepted) in invitations.ts.
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import { z } from 'zod';
import { AccountError, changeMember, listMembers, ROLES } from '../../../../shared/accounts/users.ts';
import { INVITATION_ID_RE, INVITATION_TTL_DAYS, inviteMember, orgInvitations, revokeInvitation } from '../../../../shared/accounts/invitations.ts';
import { needManager, needSession, notFound, sessionOf, type ConsoleContext } from '../context.ts';

const AddForm = z.object({ _csrf: z.string(), email: z.string().max(254), role: z.enum(ROLES) });
const RoleForm = z.object({ _csrf: z.string(), role: z.enum(ROLES) });
const USER_ID_RE = /^usr_[0-9a-f]{24}$/;
/** The one answer to an invitation, whether or not the address has an account. */
export const INVITED = 'Invitation recorded; it takes effect when that person accepts it.';

export default async function memberPages(app: FastifyInstance, ctx: ConsoleContext) {
  const guard = { schema: { hide: true }, preHandler: [needSession, needManager] };

  async function page(request: FastifyRequest, reply: FastifyReply, error: string | null, status = 200, notice: string | null = null) {
    const s = sessionOf(request);
    const [members, invitations] = await Promise.all([listMembers(app.db, s.orgId), orgInvitations(app.db, s.orgId)]);
    return ctx.render(request, reply, 'members.eta', { title: 'Members', members, invitations, roles: ROLES, ttlDays: INVITATION_TTL_DAYS, error, notice }, status);
  }

  /** A refused change re-renders the page with the reason; a member id from the URL that is not one is 404. */
  async function attempt(request: FastifyRequest, reply: FastifyReply, fn: () => Promise<unknown>, idInUrl = false, then = '/console/members') {
    try {
      await fn();
    } catch (err) {
      if (!(err instanceof AccountError)) throw err;
      if (err.code === 'not_found' && idInUrl) throw notFound();
      const status = err.code === 'forbidden' ? 403 : err.code === 'not_found' ? 404 : err.code === 'invalid_email' ? 400 : 409;
      return page(request, reply, `${err.message[0]!.toUpperCase()}${err.message.slice(1)}.`, status);
    }
    return reply.redirect(then, 303);
  }

  app.get('/console/members', guard, async (request, reply) => {
    const invited = (request.query as Record<string, unknown> | undefined)?.invited === '1';
    return page(request, reply, null, 200, invited ? INVITED : null);
  });

  // Post/redirect/get with one notice: a known and an unknown address answer byte for byte alike.
  app.post('/console/members', guard, async (request, reply) => {
    const s = sessionOf(request);
    const f = AddForm.safeParse(request.body);
    if (!f.success) return page(request, reply, 'Give an email and a role.', 400);
    const invite = () => inviteMember(app.db, { actor: s.role, actorUserId: s.userId, orgId: s.orgId, email: f.data.email, role: f.data.role });
    return attempt(request, reply, invite, false, '/console/members?invited=1');
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
    return attempt(request, reply, () => changeMember(app.db, s.role, s.orgId, request.params.user_id, null), true);
  });
}
