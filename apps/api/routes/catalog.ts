// Public catalog discovery: search, detail, suggest, categories, sitemap (no key) and the tool
// definitions of an organization (key). The queries live in shared/db/catalog-search.ts and
// shared/db/catalog-tools.ts; the parameter and response schemas in shared/schemas/.
import type { FastifyInstance } from 'fastify';
import { ServiceError } from '../../../shared/errors.ts';
import { CATEGORIES } from '../../../shared/catalog/categories.ts';
import { catalogDetail, searchCatalog, sitemap, suggest } from '../../../shared/db/catalog-search.ts';
import { listTools } from '../../../shared/db/catalog-tools.ts';
import {
  CatalogDetailParams,
  CatalogSearchParams,
  CatalogSitemapParams,
  CatalogSuggestParams,
  EmptyParams,
} from '../../../shared/schemas/catalog.ts';
import { ToolsParams } from '../../../shared/schemas/tools.ts';
import { parseParams } from './catalog-params.ts';

const PUBLIC_CACHE = 'public, max-age=30';

export default async function catalogRoutes(app: FastifyInstance) {
  app.get('/v1/catalog', async (request, reply) => {
    const q = parseParams(CatalogSearchParams, request.query);
    const page = await searchCatalog(app.db, { ...q, baseUrl: app.baseUrl() });
    reply.header('cache-control', PUBLIC_CACHE);
    return { success: true, data: page };
  });

  app.get('/v1/catalog/detail', async (request, reply) => {
    const q = parseParams(CatalogDetailParams, request.query);
    const detail = await catalogDetail(app.db, { ...q, baseUrl: app.baseUrl() });
    // Private and unknown handles are indistinguishable.
    if (!detail) throw new ServiceError('unknown_api_slug', `No public workflow ${q.api}`, { param: 'api' });
    reply.header('cache-control', PUBLIC_CACHE);
    return { success: true, data: detail };
  });

  app.get('/v1/catalog/suggest', async (request, reply) => {
    const q = parseParams(CatalogSuggestParams, request.query);
    const items = await suggest(app.db, { ...q, baseUrl: app.baseUrl() });
    reply.header('cache-control', PUBLIC_CACHE);
    return { success: true, data: { items } };
  });

  app.get('/v1/catalog/categories', async (request, reply) => {
    parseParams(EmptyParams, request.query);
    reply.header('cache-control', 'public, max-age=3600');
    return { success: true, data: { items: CATEGORIES.map((c) => ({ id: c.id, label: c.label })) } };
  });

  app.get('/v1/catalog/sitemap', async (request, reply) => {
    const q = parseParams(CatalogSitemapParams, request.query);
    const data = await sitemap(app.db, { page: q.page, baseUrl: app.baseUrl() });
    reply.header('cache-control', 'public, max-age=300');
    return { success: true, data };
  });

  app.get('/v1/catalog/tools', { preHandler: app.authenticate }, async (request, reply) => {
    const q = parseParams(ToolsParams, request.query);
    const data = await listTools(app.db, request.auth!.orgId, { ...q, baseUrl: app.baseUrl() });
    reply.header('cache-control', 'private, no-store');
    return { success: true, data };
  });
}
