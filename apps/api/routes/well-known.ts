// GET /.well-known/api-catalog: RFC 9727 API catalog, a linkset (RFC 9264) pointing to the
// OpenAPI document, the reference page and /health.
import type { FastifyInstance } from 'fastify';
import { API_CATALOG_PATH, OPENAPI_PATH, REFERENCE_PATH } from '../../../shared/openapi/document.ts';

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
  app.get(API_CATALOG_PATH, async (_request, reply) =>
    reply
      .type(LINKSET_TYPE)
      .header('link', `<${API_CATALOG_PATH}>; rel="api-catalog"`)
      .header('cache-control', 'public, max-age=3600')
      .send(JSON.stringify(apiCatalog(app.baseUrl()))),
  );
}
