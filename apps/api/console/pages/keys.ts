// API keys (Owners and Administrators): create (the key is shown once), list, revoke.
import type { FastifyInstance } from 'fastify';
import { createKey, listKeys, revokeKeyOfOrg } from '../../../../shared/db/orgs.ts';
import { needManager, needSession, notFound, sessionOf, type ConsoleContext } from '../context.ts';

const KEY_ID_RE = /^key_[0-9a-f]{24}$/;

export default async function keyPages(app: FastifyInstance, ctx: ConsoleContext) {
  const guard = { schema: { hide: true }, preHandler: [needSession, needManager] };

  app.get('/console/keys', guard, async (request, reply) => {
    const s = sessionOf(request);
    return ctx.render(request, reply, 'keys.eta', { title: 'API keys', keys: await listKeys(app.db, s.orgId), created: null });
  });

  app.post('/console/keys', guard, async (request, reply) => {
    const s = sessionOf(request);
    const created = await createKey(app.db, s.orgId);
    // The only time the full key is shown: only its hash is stored.
    return ctx.render(request, reply, 'keys.eta', { title: 'API keys', keys: await listKeys(app.db, s.orgId), created });
  });

  app.post<{ Params: { key_id: string } }>('/console/keys/:key_id/revoke', guard, async (request, reply) => {
    const s = sessionOf(request);
    if (!KEY_ID_RE.test(request.params.key_id) || !(await revokeKeyOfOrg(app.db, s.orgId, request.params.key_id))) throw notFound();
    return reply.redirect('/console/keys', 303);
  });
}
