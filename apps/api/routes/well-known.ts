// GET /.well-known/api-catalog: RFC 9727 API catalog, a linkset (RFC 9264) pointing to the
// OpenAPI document, the reference page and /health.
import type { FastifyInstance } from 'fastify';
import { API_CATALOG_PATH, OPENAPI_PATH, REFERENCE_PATH } from '../../../shared/openapi/document.ts';
import { ApiCatalogLinkset } from '../../../shared/openapi/schemas.ts';

export const LINKSET_TYPE = 'application/linkset+json; profile="https://www.rfc-editor.org/info/rfc9727"';

export function apiCatalog(base: string) {
  return {
    linkset: [
      { anchor: `${base}${API_CATALOG_PATH}`, item: [{ href: `${base}/v1`, title: 'Workflow Query Service API v1' }] },
      {
        anchor: `${base}/v1`,
        'service-desc': [{ href: `${base}${OPENAPI_PATH}`, type: 'application/vnd.oai.openapi+json;version=3.1' }],
        'service-doc': [{ href: `${base}${REFERENCE_PATH}`, type: 'text/html' }],
        status: [{ href: `${base}/health`, type: 'application/json' }],
      },
    ],
  };
}

export default async function wellKnownRoutes(app: FastifyInstance) {
  // Untyped instance: the linkset is sent as text under its own media type.
  app.get(
    API_CATALOG_PATH,
    {
      schema: {
        operationId: 'apiCatalog',
        summary: 'RFC 9727 API catalog (linkset)',
        tags: ['Service'],
        security: [],
        response: { 200: { description: 'Linkset', content: { 'application/linkset+json': { schema: ApiCatalogLinkset } } } },
      },
    },
    async (_request, reply) =>
    reply
      .type(LINKSET_TYPE)
      .header('link', `<${API_CATALOG_PATH}>; rel="api-catalog"`)
      .header('cache-control', 'public, max-age=3600')
      .send(JSON.stringify(apiCatalog(app.baseUrl()))),
  );
}
