// The signed-in user's own invitations (any role, any organization they are in): Accept makes the
// membership, Decline refuses it for good. Listed on the Overview page. An invitation addressed to
// someone else, or one already answered, is the 404 page: ids are looked up with the user's email.
import type { FastifyInstance } from 'fastify';
import { acceptInvitation, declineInvitation, INVITATION_ID_RE } from '../../../../shared/accounts/invitations.ts';
import { AccountError } from '../../../../shared/accounts/users.ts';
import { needSession, notFound, sessionOf, type ConsoleContext } from '../context.ts';

export default async function invitationPages(app: FastifyInstance, _ctx: ConsoleContext) {
  const guard = { schema: { hide: true }, preHandler: needSession };

  async function answer(id: string, fn: (id: string) => Promise<unknown>) {
    if (!INVITATION_ID_RE.test(id)) throw notFound();
    try {
      await fn(id);
    } catch (err) {
      if (err instanceof AccountError && err.code === 'not_found') throw notFound();
      throw err;
    }
  }

  // Accepting does not move the session: the new organization is in the switcher from now on.
  app.post<{ Params: { invitation_id: string } }>('/console/invitations/:invitation_id/accept', guard, async (request, reply) => {
    const s = sessionOf(request);
    await answer(request.params.invitation_id, (id) => acceptInvitation(app.db, s.userId, id));
    return reply.redirect('/console?invitation=accepted', 303);
  });

  app.post<{ Params: { invitation_id: string } }>('/console/invitations/:invitation_id/decline', guard, async (request, reply) => {
    const s = sessionOf(request);
    await answer(request.params.invitation_id, (id) => declineInvitation(app.db, s.userId, id));
    return reply.redirect('/console?invitation=declined', 303);
  });
}
