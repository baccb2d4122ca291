// MCP sign-in with OAuth, the person's side: the authorization endpoint's consent page (sign in if
// needed, the account with "use a different account", the organization picker, the client and what
// it may do; Approve or Deny), and the organization's connected MCP clients (Owners and
// Administrators revoke them). The token endpoint and metadata are API routes (routes/oauth*.ts).
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import { z } from 'zod';
import { membershipsOf } from '../../../../shared/accounts/users.ts';
import { clientDocumentFetcher } from '../../../../shared/oauth/client-documents.ts';
import { authorizeParams, checkAuthorize, redirectWith, AUTHORIZE_FIELDS, type AuthorizeParams } from '../../../../shared/oauth/authorize.ts';
import { connectedClients, createCode, revokeClientInOrg } from '../../../../shared/oauth/grants.ts';
import { AUTHORIZE_PATH, mcpResource } from '../../routes/oauth-metadata.ts';
import { clientAddress } from '../../services/client-address.ts';
import { ConsolePageError, consoleCsp, needManager, needSession, notFound, sessionOf, type ConsoleContext } from '../context.ts';

const Decision = z.object({ _csrf: z.string(), decision: z.enum(['approve', 'deny']), org_id: z.string().max(100) });
const RevokeForm = z.object({ _csrf: z.string(), client_id: z.string().max(2048) });

/** Where sign-in returns after an authorization request (auth.ts accepts only this path). */
export const isAuthorizeReturn = (next: unknown): next is string =>
  typeof next === 'string' && next.length <= 8192 && next.startsWith(`${AUTHORIZE_PATH}?`) && !/[\r\n\\]/.test(next);

/** A refusal shown to the person: the request's fault (400), or the service busy (503, Retry-After). */
const cannotConnect = (c: { message: string; status?: 503 }) =>
  c.status === 503
    ? new ConsolePageError(503, 'Try again in a moment', c.message, { 'retry-after': '5' })
    : new ConsolePageError(400, 'This app cannot connect', c.message);

export default async function oauthPages(app: FastifyInstance, ctx: ConsoleContext) {
  const issuer = () => app.baseUrl();
  // SITE_HOST_MAP (dev and tests) may route a client document's host to a local server.
  const fetchDocument = clientDocumentFetcher(ctx.config.siteHostMap);
  // Cached documents never used are bounded like registrations never used (OAUTH_UNUSED_CLIENTS_MAX).
  const unusedDocumentsMax = ctx.config.OAUTH_UNUSED_CLIENTS_MAX;
  // The requester's address bounds the document fetches it can hold at once (client-documents.ts).
  const check = (request: FastifyRequest, p: AuthorizeParams | null) =>
    checkAuthorize(app.db, p, { issuer: issuer(), resource: mcpResource(app.baseUrl()), fetchDocument, unusedDocumentsMax, address: clientAddress(request) });
  const authorizeUrl = (p: AuthorizeParams) => `${AUTHORIZE_PATH}?${new URLSearchParams(p as Record<string, string>).toString()}`;

  async function consent(request: FastifyRequest, reply: FastifyReply, p: AuthorizeParams) {
    const checked = await check(request, p);
    if (checked.kind === 'show') throw cannotConnect(checked);
    if (checked.kind === 'redirect') return reply.redirect(checked.to, 303);
    if (!request.consoleSession) return reply.redirect(`/console/sign-in?next=${encodeURIComponent(authorizeUrl(p))}`, 303);
    const s = sessionOf(request);
    const redirect = new URL(checked.redirectUri);
    // The form's answer is a redirect to the client: the page's form-action must allow its origin.
    reply.header('content-security-policy', consoleCsp(`'self' ${redirect.origin}`));
    return ctx.render(request, reply, 'oauth-consent.eta', {
      title: 'Connect an MCP client',
      client: { name: checked.client.client_name, kind: checked.client.kind, host: checked.client.kind === 'cimd' ? new URL(checked.client.id).host : null },
      redirectHost: redirect.host,
      account: s.email,
      orgs: await membershipsOf(app.db, s.userId),
      currentOrg: s.orgId,
      fields: AUTHORIZE_FIELDS.filter((f) => p[f] !== undefined).map((f) => ({ name: f, value: p[f] })),
      next: authorizeUrl(p),
    });
  }

  app.get(AUTHORIZE_PATH, { schema: { hide: true } }, async (request, reply) => consent(request, reply, authorizeParams(request.query) ?? {}));

  app.post(AUTHORIZE_PATH, { schema: { hide: true }, preHandler: needSession }, async (request, reply) => {
    const s = sessionOf(request);
    const p = authorizeParams(request.body);
    const checked = await check(request, p);
    if (checked.kind === 'show') throw cannotConnect(checked);
    if (checked.kind === 'redirect') return reply.redirect(checked.to, 303);
    const form = Decision.safeParse(request.body);
    if (!form.success) throw new ConsolePageError(400, 'Bad request', 'Choose an organization and Approve or Deny.');
    if (form.data.decision === 'deny') {
      return reply.redirect(redirectWith(checked.redirectUri, { error: 'access_denied', error_description: 'The person denied access', state: checked.state }, issuer()), 303);
    }
    // Only an organization this person belongs to now (the list on the page could be stale).
    const orgs = await membershipsOf(app.db, s.userId);
    if (!orgs.some((o) => o.org_id === form.data.org_id)) throw new ConsolePageError(403, 'Not allowed', 'You are not a member of that organization.');
    const code = await createCode(app.db, {
      clientId: checked.client.id,
      userId: s.userId,
      orgId: form.data.org_id,
      redirectUri: checked.redirectUri,
      codeChallenge: checked.codeChallenge,
      resource: checked.resource,
      scope: checked.scope,
    });
    // Maintenance removed the client (idle) between the check and the code: as if it never existed.
    if (code === null) throw cannotConnect({ message: 'This client is not registered with this service.' });
    return reply.redirect(redirectWith(checked.redirectUri, { code, state: checked.state }, issuer()), 303);
  });

  // "Use a different account": end this session, sign in again, come back to the same request.
  app.post('/console/oauth/switch-account', { schema: { hide: true } }, async (request, reply) => {
    const next = (request.body as Record<string, unknown> | undefined)?.next;
    await ctx.sessions.end(request, reply);
    return reply.redirect(isAuthorizeReturn(next) ? `/console/sign-in?next=${encodeURIComponent(next)}` : '/console/sign-in', 303);
  });

  app.get('/console/mcp-clients', { schema: { hide: true }, preHandler: [needSession, needManager] }, async (request, reply) => {
    const s = sessionOf(request);
    return ctx.render(request, reply, 'mcp-clients.eta', { title: 'MCP clients', clients: await connectedClients(app.db, s.orgId) });
  });

  app.post('/console/mcp-clients/revoke', { schema: { hide: true }, preHandler: [needSession, needManager] }, async (request, reply) => {
    const s = sessionOf(request);
    const form = RevokeForm.safeParse(request.body);
    if (!form.success || !(await revokeClientInOrg(app.db, s.orgId, form.data.client_id))) throw notFound();
    return reply.redirect('/console/mcp-clients', 303);
  });
}
