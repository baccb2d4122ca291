// The OAuth endpoints of the MCP authorization server: client registration (RFC 7591), the token
// endpoint (authorization code with PKCE, refresh with rotation) and revocation (RFC 7009). The
// authorization endpoint is a console page (apps/api/console/pages/oauth.ts): it needs the signed-in
// person. These endpoints answer RFC 6749 §5.2 error bodies (`error`, `error_description`), which
// OAuth clients parse, not the service's envelope (docs/contract-decisions.md, "MCP sign-in with OAuth").
import type { FastifyInstance, FastifyReply } from 'fastify';
import formbody from '@fastify/formbody';
import rateLimit from '@fastify/rate-limit';
import { z } from 'zod';
import { ClientRegistration, findClient, registerClient, unusedClientsFull } from '../../../shared/oauth/clients.ts';
import { GrantError, MCP_SCOPE, redeemCode, refresh, revokeToken } from '../../../shared/oauth/grants.ts';
import { documentOnly } from '../plugins/errors.ts';
import { errors } from '../../../shared/openapi/document.ts';
import { REGISTER_PATH, REVOKE_PATH, TOKEN_PATH, mcpResource } from './oauth-metadata.ts';
import { clientAddress } from '../services/client-address.ts';
import { ServiceError } from '../../../shared/errors.ts';

const OAuthError = z
  .strictObject({ error: z.string().describe('RFC 6749 §5.2 / RFC 7591 §3.2.2 error code'), error_description: z.string().optional() })
  .meta({ id: 'OAuthError' });
const TokenResponse = z
  .strictObject({
    access_token: z.string(),
    token_type: z.literal('Bearer'),
    expires_in: z.number().int(),
    refresh_token: z.string(),
    scope: z.string(),
  })
  .meta({ id: 'OAuthTokenResponse' });
const ClientInformation = z.looseObject({ client_id: z.string(), client_id_issued_at: z.number().int(), redirect_uris: z.array(z.string()) }).meta({ id: 'OAuthClientInformation' });

// PostgreSQL text cannot hold NUL: a parameter with one is the caller's mistake (400), never a 503.
const str = z.string().max(4096).regex(/^[^\u0000]*$/, 'must not contain NUL characters');
const TokenForm = z.discriminatedUnion('grant_type', [
  z.looseObject({
    grant_type: z.literal('authorization_code'),
    code: str,
    redirect_uri: str,
    code_verifier: str,
    client_id: str,
    resource: str,
  }),
  z.looseObject({ grant_type: z.literal('refresh_token'), refresh_token: str, client_id: str, resource: str.optional(), scope: str.optional() }),
]);
const RevokeForm = z.looseObject({ token: str, token_type_hint: z.string().max(50).optional(), client_id: str });

const unavailable = { description: 'temporarily_unavailable: the authorization server cannot answer right now (Retry-After)', content: { 'application/json': { schema: OAuthError } } };
const slowDown = { description: 'slow_down: too many requests from this address (Retry-After)', content: { 'application/json': { schema: OAuthError } } };
const tooLarge = { description: 'invalid_request: the body is larger than the endpoint accepts', content: { 'application/json': { schema: OAuthError } } };
const unsupported = {
  description: "invalid_request: the body is not of the endpoint's type (Content-Type), or is compressed (a Content-Encoding other than identity)",
  content: { 'application/json': { schema: OAuthError } },
};
/** What any OAuth endpoint may also answer. */
const commonFailures = { 413: tooLarge, 415: unsupported, 429: slowDown, 503: unavailable };
const formDoc = (schema: z.ZodType) => ({ content: { 'application/x-www-form-urlencoded': { schema: z.toJSONSchema(schema, { io: 'input' }) } } });

class OAuthFailure extends Error {
  constructor(
    readonly status: number,
    readonly error: string,
    description: string,
  ) {
    super(description);
  }
}

function describeIssues(err: z.ZodError): string {
  return err.issues.map((i) => `${i.path.join('.') || 'body'}: ${i.message}`).join('; ').slice(0, 500);
}

export interface OAuthRouteOptions {
  /** OAUTH_UNUSED_CLIENTS_MAX and OAUTH_CLIENT_IDLE_HOURS (shared/config.ts). */
  unusedClientsMax: number;
  clientIdleHours: number;
  /** Per client address and minute: registrations, and token or revocation requests (OAUTH_*_PER_MINUTE). */
  registrationsPerMinute: number;
  tokenRequestsPerMinute: number;
}

export default async function oauthRoutes(app: FastifyInstance, opts: OAuthRouteOptions) {
  // Token and revocation requests are form-encoded (RFC 6749 §4.1.3); only in this scope.
  await app.register(formbody, { bodyLimit: 16 * 1024 });
  // Registration and token attempts are bounded per client address: rows and guesses cost us. The
  // address is the one every per-address limit uses (an IPv6 /64, no port: services/client-address.ts).
  await app.register(rateLimit, { global: false, keyGenerator: clientAddress });

  app.setErrorHandler(async (err: Error & { statusCode?: number }, request, reply) => {
    if (err instanceof OAuthFailure) return send(reply, err.status, err.error, err.message);
    if (err instanceof GrantError) return send(reply, 400, err.code, err.message);
    // The service's own refusals of a request, before any endpoint runs: a Content-Encoding other
    // than identity (415, plugins/content-encoding.ts) and a JSON registration body that cannot be
    // parsed (plugins/json-body.ts). They keep their status and say why, as invalid_request; they
    // carry no statusCode, so they were taken for failures of ours (503 temporarily_unavailable).
    if (err instanceof ServiceError && err.status < 500) return send(reply.headers(err.headers ?? {}), err.status, 'invalid_request', err.message);
    const status = err.statusCode ?? 500;
    if (status === 429) return send(reply.header('retry-after', '60'), 429, 'slow_down', 'Too many requests from this address; retry later');
    if (status >= 400 && status < 500) return send(reply, status, 'invalid_request', 'The request could not be read');
    request.log.error({ err }, 'OAuth endpoint failed');
    return send(reply.header('retry-after', '5'), 503, 'temporarily_unavailable', 'The authorization server cannot answer right now');
  });
  function send(reply: FastifyReply, status: number, error: string, description: string) {
    return reply.code(status).header('cache-control', 'no-store').type('application/json').send(JSON.stringify({ error, error_description: description }));
  }

  const limit = (max: number) => ({ rateLimit: { max, timeWindow: '1 minute' } });

  app.post(
    REGISTER_PATH,
    {
      config: limit(opts.registrationsPerMinute),
      validatorCompiler: documentOnly(['body']),
      schema: {
        operationId: 'oauthRegister',
        summary: 'RFC 7591 dynamic client registration (public clients, MCP sign-in)',
        tags: ['MCP'],
        security: [],
        body: ClientRegistration,
        response: { 201: ClientInformation, 400: { description: 'invalid_redirect_uri or invalid_client_metadata', content: { 'application/json': { schema: OAuthError } } }, ...commonFailures },
        ...errors(408),
      },
    },
    async (request, reply) => {
      const parsed = ClientRegistration.safeParse(request.body);
      if (!parsed.success) {
        const redirect = parsed.error.issues.some((i) => i.path[0] === 'redirect_uris');
        throw new OAuthFailure(400, redirect ? 'invalid_redirect_uri' : 'invalid_client_metadata', describeIssues(parsed.error));
      }
      // Only one scope exists; a client asking for none (or for it) gets it.
      const asked = (parsed.data.scope ?? MCP_SCOPE).split(' ').filter(Boolean);
      if (asked.some((s) => s !== MCP_SCOPE)) throw new OAuthFailure(400, 'invalid_client_metadata', `scope: only "${MCP_SCOPE}" exists`);
      // A global bound on registrations nobody completed: the per-address limit above does not stop
      // a caller with many addresses, and each one is a row until maintenance removes it (idle).
      const retryAfter = await unusedClientsFull(app.db, { max: opts.unusedClientsMax, idleHours: opts.clientIdleHours });
      if (retryAfter !== null) {
        return send(reply.header('retry-after', String(retryAfter)), 503, 'temporarily_unavailable', 'Too many registered clients have not been used yet; retry later, or use a client metadata document (an https client_id)');
      }
      const client = await registerClient(app.db, parsed.data, MCP_SCOPE);
      return reply.code(201).header('cache-control', 'no-store').send(client);
    },
  );

  app.post(
    TOKEN_PATH,
    {
      config: limit(opts.tokenRequestsPerMinute),
      validatorCompiler: documentOnly(['body']),
      schema: {
        operationId: 'oauthToken',
        summary: 'OAuth token endpoint: authorization code (PKCE S256, RFC 8707 resource) or refresh token (rotating)',
        tags: ['MCP'],
        security: [],
        body: formDoc(TokenForm),
        response: {
          200: TokenResponse,
          400: { description: 'invalid_request, invalid_grant, invalid_target, invalid_scope (a refresh asking for more than its grant) or unsupported_grant_type', content: { 'application/json': { schema: OAuthError } } },
          401: { description: 'invalid_client: unknown client_id', content: { 'application/json': { schema: OAuthError } } },
          ...commonFailures,
        },
        // The socket-level refusal of a body not received in time is the service's envelope.
        ...errors(408),
      },
    },
    async (request, reply) => {
      const body = (request.body ?? {}) as Record<string, unknown>;
      if (body.grant_type !== 'authorization_code' && body.grant_type !== 'refresh_token') {
        throw new OAuthFailure(400, 'unsupported_grant_type', 'grant_type must be authorization_code or refresh_token');
      }
      const parsed = TokenForm.safeParse(body);
      if (!parsed.success) throw new OAuthFailure(400, 'invalid_request', describeIssues(parsed.error));
      const form = parsed.data;
      const client = await findClient(app.db, form.client_id);
      if (!client) throw new OAuthFailure(401, 'invalid_client', 'Unknown client_id');
      const resource = mcpResource(app.baseUrl());
      if (form.resource !== undefined && form.resource !== resource) throw new OAuthFailure(400, 'invalid_target', `resource must be ${resource}`);
      const tokens =
        form.grant_type === 'authorization_code'
          ? await redeemCode(app.db, { code: form.code, clientId: client.id, redirectUri: form.redirect_uri, verifier: form.code_verifier, resource: form.resource })
          : await refresh(app.db, { refreshToken: form.refresh_token, clientId: client.id, resource: form.resource, scope: form.scope });
      return reply.header('cache-control', 'no-store').header('pragma', 'no-cache').send(tokens);
    },
  );

  app.post(
    REVOKE_PATH,
    {
      config: limit(opts.tokenRequestsPerMinute),
      validatorCompiler: documentOnly(['body']),
      schema: {
        operationId: 'oauthRevoke',
        summary: 'RFC 7009 token revocation (a refresh token ends its whole grant)',
        tags: ['MCP'],
        security: [],
        body: formDoc(RevokeForm),
        response: {
          200: z.undefined().describe('Revoked, or nothing to revoke (unknown tokens are not told apart)'),
          400: { description: 'invalid_request', content: { 'application/json': { schema: OAuthError } } },
          401: { description: 'invalid_client: unknown client_id', content: { 'application/json': { schema: OAuthError } } },
          ...commonFailures,
        },
        // The socket-level refusal of a body not received in time is the service's envelope.
        ...errors(408),
      },
    },
    async (request, reply) => {
      const parsed = RevokeForm.safeParse(request.body ?? {});
      if (!parsed.success) throw new OAuthFailure(400, 'invalid_request', describeIssues(parsed.error));
      const client = await findClient(app.db, parsed.data.client_id);
      if (!client) throw new OAuthFailure(401, 'invalid_client', 'Unknown client_id');
      await revokeToken(app.db, parsed.data.token, client.id);
      return reply.code(200).header('cache-control', 'no-store').send();
    },
  );
}
