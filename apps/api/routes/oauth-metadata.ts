// RFC 9728 protected resource metadata for the MCP server, named by the 401 challenge's
// `resource_metadata`. Sign-in through OAuth is not offered yet, so no authorization server is
// listed: clients authenticate with the organization's API key as a bearer token
// (docs/contract-decisions.md, "MCP").
import type { FastifyInstance } from 'fastify';
import type { ZodTypeProvider } from 'fastify-type-provider-zod';
import { ProtectedResourceMetadata } from '../../../shared/openapi/schemas.ts';

export const PROTECTED_RESOURCE_PATH = '/.well-known/oauth-protected-resource';

export function protectedResourceMetadata(base: string, resourcePath = '') {
  return {
    resource: `${base}${resourcePath}`,
    resource_name: 'Workflow Query Service',
    bearer_methods_supported: ['header'],
    resource_documentation: `${base}/docs`,
    // RFC 9728 §2: optional. Empty until account sign-in through OAuth exists; API keys are the credential.
    authorization_servers: [],
  };
}

export default async function oauthMetadataRoutes(fastify: FastifyInstance) {
  const app = fastify.withTypeProvider<ZodTypeProvider>();
  const send = (resourcePath: string) => async () => protectedResourceMetadata(app.baseUrl(), resourcePath);
  const schema = (operationId: string, summary: string) => ({ operationId, summary, tags: ['MCP'], security: [], response: { 200: ProtectedResourceMetadata } });
  // The resource as a whole (named in the challenge) and, by RFC 9728's path insertion, /mcp itself.
  app.get(PROTECTED_RESOURCE_PATH, { schema: schema('protectedResource', 'RFC 9728 protected resource metadata') }, send(''));
  app.get(`${PROTECTED_RESOURCE_PATH}/mcp`, { schema: schema('protectedResourceMcp', 'RFC 9728 protected resource metadata of /mcp') }, send('/mcp'));
}
