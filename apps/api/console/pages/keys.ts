// API keys (Owners and Administrators): create (the key is shown once), list with who made each,
// filter by who made them, revoke one, or revoke all that still work of one member (after removing
// them: pages/members.ts points here).
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import { z } from 'zod';
import { createKey, keyCreators, listKeys, revokeKeyOfOrg, revokeKeysCreatedBy, type KeyCreatorInfo, type KeyInfo } from '../../../../shared/db/orgs.ts';
import { ConsolePageError, needManager, needSession, notFound, sessionOf, type ConsoleContext } from '../context.ts';

const KEY_ID_RE = /^key_[0-9a-f]{24}$/;
export const USER_ID_RE = /^usr_[0-9a-f]{24}$/;
const Filters = z.object({ created_by: z.string().regex(USER_ID_RE).optional().or(z.literal('').transform(() => undefined)) });

/** The keys listed for a member's user id, `created_by` (pages/members.ts links here). */
export const keysCreatedByPath = (userId: string) => `/console/keys?created_by=${encodeURIComponent(userId)}`;
/** Where the one-step "revoke all their keys" form posts. */
export const revokeCreatedByPath = (userId: string) => `/console/keys/created-by/${encodeURIComponent(userId)}/revoke`;

/**
 * Who made a key, as this organization may see it: a member's address; a former member's address
 * as it was when they made the key (this organization's own record), marked removed; an operator;
 * or unknown for keys made before creators were recorded.
 */
export function creatorLabel(c: { created_via: KeyInfo['created_via']; created_by_email: string | null; created_by_member: boolean }): string {
  if (c.created_via === 'operator') return 'an operator';
  if (c.created_via !== 'console' || !c.created_by_email) return 'unknown';
  return memberLabel(c.created_by_email, c.created_by_member);
}

/** A member who made keys here, by their address; a former one marked removed. */
const memberLabel = (email: string, member: boolean) => (member ? email : `removed member (${email})`);
const creatorOption = (c: KeyCreatorInfo) => memberLabel(c.email, c.member);

export default async function keyPages(app: FastifyInstance, ctx: ConsoleContext) {
  const guard = { schema: { hide: true }, preHandler: [needSession, needManager] };

  async function page(request: FastifyRequest, reply: FastifyReply, createdBy: string | undefined, created: Awaited<ReturnType<typeof createKey>> | null) {
    const s = sessionOf(request);
    const [keys, creators] = await Promise.all([listKeys(app.db, s.orgId, createdBy), keyCreators(app.db, s.orgId)]);
    const chosen = createdBy ? creators.find((c) => c.user_id === createdBy) : undefined;
    return ctx.render(request, reply, 'keys.eta', {
      title: 'API keys',
      keys: keys.map((k) => ({ ...k, creator: creatorLabel(k), creatorLink: k.created_by && k.created_via === 'console' ? keysCreatedByPath(k.created_by) : null })),
      created,
      creators: creators.map((c) => ({ user_id: c.user_id, label: creatorOption(c) })),
      // A user id that made no key here (another organization's, say) lists nothing and names no one.
      filter: createdBy ? { user_id: createdBy, label: chosen ? creatorOption(chosen) : 'no one in this organization', active: chosen?.active_keys ?? 0, revokeAction: revokeCreatedByPath(createdBy) } : null,
    });
  }

  app.get('/console/keys', guard, async (request, reply) => {
    const f = Filters.safeParse(request.query);
    if (!f.success) throw new ConsolePageError(400, 'Bad filter', 'That filter is not valid. Clear it and try again.');
    return page(request, reply, f.data.created_by, null);
  });

  app.post('/console/keys', guard, async (request, reply) => {
    const s = sessionOf(request);
    const created = await createKey(app.db, s.orgId, null, { via: 'console', userId: s.userId, email: s.email });
    // The only time the full key is shown: only its hash is stored.
    return page(request, reply, undefined, created);
  });

  app.post<{ Params: { key_id: string } }>('/console/keys/:key_id/revoke', guard, async (request, reply) => {
    const s = sessionOf(request);
    if (!KEY_ID_RE.test(request.params.key_id) || !(await revokeKeyOfOrg(app.db, s.orgId, request.params.key_id))) throw notFound();
    return reply.redirect('/console/keys', 303);
  });

  // Only this organization's keys: a user who made no key here (another organization's member
  // included) is the 404 page, and nothing anywhere is revoked.
  app.post<{ Params: { user_id: string } }>('/console/keys/created-by/:user_id/revoke', guard, async (request, reply) => {
    const s = sessionOf(request);
    if (!USER_ID_RE.test(request.params.user_id)) throw notFound();
    const revoked = await revokeKeysCreatedBy(app.db, s.orgId, request.params.user_id);
    // None left to revoke (the form sent twice) is fine for a user who made keys here.
    if (revoked.length === 0 && (await keyCreators(app.db, s.orgId, request.params.user_id)).length === 0) throw notFound();
    return reply.redirect(keysCreatedByPath(request.params.user_id), 303);
  });
}
