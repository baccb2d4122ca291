// The signed-in user's own invitations (any role, any organization they are in): Accept makes the
// membership, Decline refuses it for good. A user whose address is vouched for (an operator created
// them) finds theirs on the Overview page; anyone else answers through the invitation's link (the
// page below, its secret posted back with the answer), since anyone may have signed up with an
// address. An invitation addressed to someone else, already answered, expired, void, or asked for
// with a wrong or missing secret is the same 404 page: ids are looked up with the user's email.
import type { FastifyInstance, FastifyRequest } from 'fastify';
import { z } from 'zod';
import { acceptInvitation, declineInvitation, INVITATION_ID_RE, LINK_TOKEN_RE, linkInvitation } from '../../../../shared/accounts/invitations.ts';
import { AccountError } from '../../../../shared/accounts/users.ts';
import { ConsolePageError, needSession, needSessionOrSignIn, sessionOf, type ConsoleContext } from '../context.ts';

const AnswerForm = z.object({ _csrf: z.string(), token: z.string().max(100).optional() });

/** The path of an invitation's link (`invitationLinkPath`): the one kind of `next` besides OAuth's. */
const LINK_PATH_RE = /^\/console\/invitations\/inv_[0-9a-f]{24}\?token=[A-Za-z0-9_-]{43}$/;
export const invitationLinkPath = (id: string, token: string) => `/console/invitations/${id}?token=${token}`;
export const isInvitationLink = (next: unknown): next is string => typeof next === 'string' && LINK_PATH_RE.test(next);

const noInvitation = () =>
  new ConsolePageError(404, 'Not found', 'There is no invitation here for the account you are signed in with. It may have expired, been withdrawn or replaced by a newer link.');

export default async function invitationPages(app: FastifyInstance, ctx: ConsoleContext) {
  const guard = { schema: { hide: true }, preHandler: needSession };

  app.get<{ Params: { invitation_id: string }; Querystring: { token?: string } }>(
    '/console/invitations/:invitation_id',
    // The link, signed out: sign in first, then back here (sign-in accepts only this exact shape).
    { schema: { hide: true }, preHandler: needSessionOrSignIn(isInvitationLink) },
    async (request, reply) => {
      const s = sessionOf(request);
      const { invitation_id: id } = request.params;
      const token = request.query.token;
      if (!INVITATION_ID_RE.test(id) || typeof token !== 'string' || !LINK_TOKEN_RE.test(token)) throw noInvitation();
      const invitation = await linkInvitation(app.db, s.userId, id, token);
      if (!invitation) throw noInvitation();
      return ctx.render(request, reply, 'invitation.eta', { title: 'Invitation', invitation, token });
    },
  );

  async function answer(request: FastifyRequest<{ Params: { invitation_id: string } }>, fn: (id: string, token: string | undefined) => Promise<unknown>) {
    const id = request.params.invitation_id;
    const form = AnswerForm.safeParse(request.body);
    if (!INVITATION_ID_RE.test(id) || !form.success) throw noInvitation();
    try {
      await fn(id, form.data.token);
    } catch (err) {
      if (err instanceof AccountError && err.code === 'not_found') throw noInvitation();
      throw err;
    }
  }

  // Accepting does not move the session: the new organization is in the switcher from now on.
  app.post<{ Params: { invitation_id: string } }>('/console/invitations/:invitation_id/accept', guard, async (request, reply) => {
    const s = sessionOf(request);
    await answer(request, (id, token) => acceptInvitation(app.db, s.userId, id, token));
    return reply.redirect('/console?invitation=accepted', 303);
  });

  app.post<{ Params: { invitation_id: string } }>('/console/invitations/:invitation_id/decline', guard, async (request, reply) => {
    const s = sessionOf(request);
    await answer(request, (id, token) => declineInvitation(app.db, s.userId, id, token));
    return reply.redirect('/console?invitation=declined', 303);
  });
}
