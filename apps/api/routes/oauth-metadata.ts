// OAuth discovery for the MCP server. The service is its own authorization server:
// - RFC 9728 protected resource metadata, named by /mcp's 401 challenge (`resource_metadata`), for
//   the service as a whole and (path insertion) for /mcp, the canonical MCP resource;
// - RFC 8414 authorization server metadata at the issuer's well-known path.
// Clients may also keep using the organization's API key as a bearer token.
import type { FastifyInstance } from 'fastify';
import type { ZodTypeProvider } from 'fastify-type-provider-zod';
import { MCP_SCOPE } from '../../../shared/oauth/grants.ts';
import { AuthorizationServerMetadata, ProtectedResourceMetadata } from '../../../shared/openapi/schemas.ts';

export const PROTECTED_RESOURCE_PATH = '/.well-known/oauth-protected-resource';
export const MCP_RESOURCE_METADATA_PATH = `${PROTECTED_RESOURCE_PATH}/mcp`;
export const AUTHORIZATION_SERVER_PATH = '/.well-known/oauth-authorization-server';
export const AUTHORIZE_PATH = '/console/oauth/authorize';
export const TOKEN_PATH = '/oauth/token';
export const REGISTER_PATH = '/oauth/register';
export const REVOKE_PATH = '/oauth/revoke';

/** The RFC 8707 resource every access token is bound to: the MCP endpoint (per-workflow paths are under it). */
export const mcpResource = (base: string) => `${base}/mcp`;

export function protectedResourceMetadata(base: string, resourcePath = '') {
  return {
    resource: `${base}${resourcePath}`,
    resource_name: 'Workflow Query Service',
    bearer_methods_supported: ['header'],
    resource_documentation: `${base}/docs`,
    // The issuer is the service's own origin (no path): its metadata is at AUTHORIZATION_SERVER_PATH.
    authorization_servers: [base],
    scopes_supported: [MCP_SCOPE],
  };
}

export function authorizationServerMetadata(base: string) {
  return {
    issuer: base,
    authorization_endpoint: `${base}${AUTHORIZE_PATH}`,
    token_endpoint: `${base}${TOKEN_PATH}`,
    registration_endpoint: `${base}${REGISTER_PATH}`,
    revocation_endpoint: `${base}${REVOKE_PATH}`,
    scopes_supported: [MCP_SCOPE],
    response_types_supported: ['code' as const],
    grant_types_supported: ['authorization_code', 'refresh_token'],
    code_challenge_methods_supported: ['S256' as const],
    // Public clients only (PKCE is their proof); no client secrets are issued.
    token_endpoint_auth_methods_supported: ['none'],
    revocation_endpoint_auth_methods_supported: ['none'],
    client_id_metadata_document_supported: true,
    authorization_response_iss_parameter_supported: true,
    service_documentation: `${base}/docs`,
  };
}

export default async function oauthMetadataRoutes(fastify: FastifyInstance) {
  const app = fastify.withTypeProvider<ZodTypeProvider>();
  const send = (resourcePath: string) => async () => protectedResourceMetadata(app.baseUrl(), resourcePath);
  const schema = (operationId: string, summary: string) => ({ operationId, summary, tags: ['MCP'], security: [], response: { 200: ProtectedResourceMetadata } });
  // The resource as a whole and, by RFC 9728's path insertion, /mcp itself (named in the challenge).
  app.get(PROTECTED_RESOURCE_PATH, { schema: schema('protectedResource', 'RFC 9728 protected resource metadata') }, send(''));
  app.get(MCP_RESOURCE_METADATA_PATH, { schema: schema('protectedResourceMcp', 'RFC 9728 protected resource metadata of /mcp') }, send('/mcp'));
  app.get(
    AUTHORIZATION_SERVER_PATH,
    {
      schema: {
        operationId: 'authorizationServerMetadata',
        summary: 'RFC 8414 authorization server metadata (MCP sign-in with OAuth)',
        tags: ['MCP'],
        security: [],
        response: { 200: AuthorizationServerMetadata },
      },
    },
    async () => authorizationServerMetadata(app.baseUrl()),
  );
}
