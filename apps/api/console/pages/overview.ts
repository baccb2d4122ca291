// Overview: the signed-in user's pending invitations, the credit balance, the latest requests, quick links.
import type { FastifyInstance } from 'fastify';
import { balanceOf } from '../../../../shared/db/orgs.ts';
import { userInvitations } from '../../../../shared/accounts/invitations.ts';
import { needSession, sessionOf, type ConsoleContext } from '../context.ts';
import { listRequests } from '../reads.ts';

export default async function overviewPage(app: FastifyInstance, ctx: ConsoleContext) {
  app.get('/console', { schema: { hide: true }, preHandler: needSession }, async (request, reply) => {
    const s = sessionOf(request);
    const balance = (await balanceOf(app.db, s.orgId)) ?? { granted: 0, available: 0, reserved: 0, charged: 0 };
    const recent = await listRequests(app.db, s.orgId, { limit: 5 });
    const invitations = await userInvitations(app.db, s.userId);
    const answered = (request.query as Record<string, unknown> | undefined)?.invitation;
    const notice = answered === 'accepted' ? 'Invitation accepted: switch to that organization with the organization menu.' : answered === 'declined' ? 'Invitation declined.' : null;
    return ctx.render(request, reply, 'overview.eta', { title: 'Overview', balance, recent: recent.rows, invitations, notice });
  });
}
