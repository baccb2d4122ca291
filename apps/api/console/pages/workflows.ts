// Workflows: the organization's own APIs (private, and public ones it owns). The builder pages
// (definition, test run, publish, versions, sharing) plug in beside this one (README.md).
import type { FastifyInstance } from 'fastify';
import { needSession, sessionOf, type ConsoleContext } from '../context.ts';
import { ownedApis } from '../reads.ts';

export default async function workflowPages(app: FastifyInstance, ctx: ConsoleContext) {
  app.get('/console/workflows', { schema: { hide: true }, preHandler: needSession }, async (request, reply) => {
    const s = sessionOf(request);
    return ctx.render(request, reply, 'workflows.eta', { title: 'Workflows', apis: await ownedApis(app.db, s.orgId) });
  });
}
