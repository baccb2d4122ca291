// Members (Owners and Administrators): add an existing user by email, change a role, remove.
// The rules (last Owner, who may touch the Owner role) live in shared/accounts/users.ts.
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import { z } from 'zod';
import { addMember, AccountError, changeMember, listMembers, ROLES } from '../../../../shared/accounts/users.ts';
import { needManager, needSession, notFound, sessionOf, type ConsoleContext } from '../context.ts';

const AddForm = z.object({ _csrf: z.string(), email: z.string().max(254), role: z.enum(ROLES) });
const RoleForm = z.object({ _csrf: z.string(), role: z.enum(ROLES) });
const USER_ID_RE = /^usr_[0-9a-f]{24}$/;

export default async function memberPages(app: FastifyInstance, ctx: ConsoleContext) {
  const guard = { schema: { hide: true }, preHandler: [needSession, needManager] };

  async function page(request: FastifyRequest, reply: FastifyReply, error: string | null, status = 200) {
    const s = sessionOf(request);
    return ctx.render(request, reply, 'members.eta', { title: 'Members', members: await listMembers(app.db, s.orgId), roles: ROLES, error }, status);
  }

  /** A refused change re-renders the page with the reason; a member id from the URL that is not one is 404. */
  async function attempt(request: FastifyRequest, reply: FastifyReply, fn: () => Promise<unknown>, idInUrl = false) {
    try {
      await fn();
    } catch (err) {
      if (!(err instanceof AccountError)) throw err;
      if (err.code === 'not_found' && idInUrl) throw notFound();
      const status = err.code === 'forbidden' ? 403 : err.code === 'not_found' ? 404 : 409;
      return page(request, reply, `${err.message[0]!.toUpperCase()}${err.message.slice(1)}.`, status);
    }
    return reply.redirect('/console/members', 303);
  }

  app.get('/console/members', guard, async (request, reply) => page(request, reply, null));

  app.post('/console/members', guard, async (request, reply) => {
    const s = sessionOf(request);
    const f = AddForm.safeParse(request.body);
    if (!f.success) return page(request, reply, 'Give an email and a role.', 400);
    return attempt(request, reply, () => addMember(app.db, s.role, s.orgId, f.data.email, f.data.role));
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
