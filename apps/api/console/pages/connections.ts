// Connections (Owners and Administrators): connected accounts and access keys of the organization.
// Add and replace go through shared/db/connections.ts (encrypted with its keyring); secret values
// are never shown again, only the names of their fields.
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import { z } from 'zod';
import { addConnection, addConnectionLink, ConnectionError, listConnections, loadKeyring, revokeConnection, type Keyring } from '../../../../shared/db/connections.ts';
import { MIN_SECRET_LENGTH } from '../../../../shared/secrets.ts';
import { needManager, needSession, needSessionOrSignIn, notFound, sessionOf, type ConsoleContext } from '../context.ts';

const AddForm = z.object({
  _csrf: z.string(),
  kind: z.enum(['account', 'access_key']),
  name: z.string().trim().max(100),
  site: z.string().trim().max(253),
  email: z.string().max(8192).optional(),
  password: z.string().max(8192).optional(),
  value: z.string().max(8192).optional(),
});

/** The form field for a ConnectionError's `param`: the secret's fields are the form's email, password or (an access key's) value. */
function formField(kind: 'account' | 'access_key', param: string | undefined): string | null {
  if (param === 'kind' || param === 'name' || param === 'site') return param;
  if (param === 'secret.email' || param === 'secret.password') return param.slice('secret.'.length);
  if (param?.startsWith('secret')) return kind === 'access_key' ? 'value' : 'password';
  return null;
}

const STATE_LABELS = { active: 'connected', needs_reauth: 'needs sign-in', revoked: 'revoked' } as const;

export default async function connectionPages(app: FastifyInstance, ctx: ConsoleContext) {
  const guard = { schema: { hide: true }, preHandler: [needSession, needManager] };
  let ring: Promise<Keyring> | undefined;
  const keyring = () => (ring ??= loadKeyring(ctx.config));

  /** `invalid`: the form field the error's `param` points at (marked aria-invalid and described by the alert). */
  async function page(request: FastifyRequest, reply: FastifyReply, form: Record<string, string>, error: string | null, status = 200, invalid: string | null = null) {
    const s = sessionOf(request);
    const connections = await listConnections(app.db, s.orgId);
    return ctx.render(request, reply, 'connections.eta', { title: 'Connections', connections, STATE_LABELS, form, error, invalid, minSecret: MIN_SECRET_LENGTH }, status);
  }

  app.get<{ Querystring: { replace?: string } }>('/console/connections', guard, async (request, reply) => {
    const s = sessionOf(request);
    const replace = typeof request.query.replace === 'string' ? (await listConnections(app.db, s.orgId)).find((c) => c.connection_id === request.query.replace) : undefined;
    const form = replace ? { kind: replace.kind, name: replace.name, site: replace.site } : { kind: 'account', name: '', site: '' };
    return page(request, reply, form, null);
  });

  // The link an access error gives a caller (`details.access[].add_url`): the form filled in with the
  // kind, name and site the workflow asked for. Signed out, sign in first and come back here.
  app.get('/console/connections/new', { schema: { hide: true }, preHandler: [needSessionOrSignIn(addConnectionLink), needManager] }, async (request, reply) => {
    const asked = addConnectionLink(request.url);
    return page(request, reply, asked ?? { kind: 'account', name: '', site: '' }, null);
  });

  app.post('/console/connections', guard, async (request, reply) => {
    const s = sessionOf(request);
    const parsed = AddForm.safeParse(request.body);
    if (!parsed.success) return page(request, reply, { kind: 'account', name: '', site: '' }, 'Fill in the kind, name and site.', 400);
    const f = parsed.data;
    const form = { kind: f.kind, name: f.name, site: f.site };
    const secret = f.kind === 'account' ? { email: f.email ?? '', password: f.password ?? '' } : f.value ?? '';
    try {
      await addConnection(app.db, await keyring(), { orgId: s.orgId, kind: f.kind, name: f.name, site: f.site, secret });
    } catch (err) {
      // ConnectionError messages name fields, never values; its param (`secret.password`) names the form's field.
      if (err instanceof ConnectionError) return page(request, reply, form, `Not saved: ${err.message}.`, 400, formField(f.kind, err.param));
      throw err;
    }
    return reply.redirect('/console/connections', 303);
  });

  app.post<{ Params: { connection_id: string } }>('/console/connections/:connection_id/disconnect', guard, async (request, reply) => {
    const s = sessionOf(request);
    const own = (await listConnections(app.db, s.orgId)).some((c) => c.connection_id === request.params.connection_id);
    if (!own) throw notFound();
    // Scoped in SQL as well: the statement itself can only touch this organization's connection.
    await revokeConnection(app.db, request.params.connection_id, s.orgId);
    return reply.redirect('/console/connections', 303);
  });
}
