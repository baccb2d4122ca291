// Public catalog discovery: search, detail, suggest, categories, sitemap (no key) and the tool
// definitions of an organization (key). The queries live in shared/db/catalog-search.ts and
// shared/db/catalog-tools.ts; the parameter and response schemas in shared/schemas/: declared
// here, they validate the query string (400 invalid_input naming the `param`), encode the
// response and are the OpenAPI document.
import type { FastifyInstance } from 'fastify';
import type { ZodTypeProvider } from 'fastify-type-provider-zod';
import { ServiceError } from '../../../shared/errors.ts';
import { CATEGORIES } from '../../../shared/catalog/categories.ts';
import { catalogDetail, searchCatalog, sitemap, suggest } from '../../../shared/db/catalog-search.ts';
import { listTools } from '../../../shared/db/catalog-tools.ts';
import { BEARER, errors, named } from '../../../shared/openapi/document.ts';
import {
  CatalogCategoriesResponse,
  CatalogDetailParams,
  CatalogDetailResponse,
  CatalogSearchParams,
  CatalogSearchResponse,
  CatalogSitemapParams,
  CatalogSitemapResponse,
  CatalogSuggestParams,
  CatalogSuggestResponse,
  EmptyParams,
} from '../../../shared/schemas/catalog.ts';
import { ToolsParams, ToolsResponse } from '../../../shared/schemas/tools.ts';

const PUBLIC_CACHE = 'public, max-age=30';
/**
 * PostgreSQL unavailable on these routes: 503 catalog_unavailable with Retry-After (plugins/errors.ts).
 * The keyless routes read it through `app.keylessReads` (services/keyless-gate.ts): bounded at once,
 * per process and per client address, so that anonymous traffic cannot take the pool.
 */
const config = { unavailableCode: 'catalog_unavailable' as const };
const open = { tags: ['Catalog'], security: [] };

export default async function catalogRoutes(fastify: FastifyInstance) {
  const app = fastify.withTypeProvider<ZodTypeProvider>();

  app.get(
    '/v1/catalog',
    {
      config,
      schema: {
        operationId: 'searchCatalog',
        summary: 'Search public workflows',
        description:
          'Ranked full-text search (typo tolerant) over handles, names, descriptions, operations, categories and site hosts. Only active public workflows. Page with `cursor` = the previous `next_cursor`, keeping query, filters and sort; a cursor reused with others, tampered with or expired is 400 invalid_input (param `cursor`).',
        ...open,
        querystring: CatalogSearchParams,
        response: { 200: named('CatalogSearchResponse', CatalogSearchResponse) },
        ...errors(400, 410, 429, 503),
      },
    },
    async (request, reply) => {
      const page = await app.keylessReads.run(request.ip, () => searchCatalog(app.db, { ...request.query, baseUrl: app.baseUrl() }));
      reply.header('cache-control', PUBLIC_CACHE);
      return { success: true as const, data: page };
    },
  );

  app.get(
    '/v1/catalog/detail',
    {
      config,
      schema: {
        operationId: 'catalogDetail',
        summary: 'One public workflow with its contracts',
        description:
          'Per operation: input_schema, output_schema, verified examples, selectable_fields, contract_version, health, access. 25 operations per response; `operation_cursor` pages on, `operation_id` selects one. Unknown or private handles are 404 unknown_api_slug.',
        ...open,
        querystring: CatalogDetailParams,
        response: { 200: named('CatalogDetailResponse', CatalogDetailResponse) },
        ...errors(400, 404, 410, 429, 503),
      },
    },
    async (request, reply) => {
      const q = request.query;
      const detail = await app.keylessReads.run(request.ip, () => catalogDetail(app.db, { ...q, baseUrl: app.baseUrl() }));
      // Private and unknown handles are indistinguishable.
      if (!detail) throw new ServiceError('unknown_api_slug', `No public workflow ${q.api}`, { param: 'api' });
      reply.header('cache-control', PUBLIC_CACHE);
      return { success: true as const, data: detail };
    },
  );

  app.get(
    '/v1/catalog/suggest',
    {
      config,
      schema: {
        operationId: 'catalogSuggest',
        summary: 'Search-box suggestions (names and logos)',
        ...open,
        querystring: CatalogSuggestParams,
        response: { 200: named('CatalogSuggestResponse', CatalogSuggestResponse) },
        ...errors(400, 429, 503),
      },
    },
    async (request, reply) => {
      const items = await app.keylessReads.run(request.ip, () => suggest(app.db, { ...request.query, baseUrl: app.baseUrl() }));
      reply.header('cache-control', PUBLIC_CACHE);
      return { success: true as const, data: { items } };
    },
  );

  app.get(
    '/v1/catalog/categories',
    {
      config,
      schema: {
        operationId: 'catalogCategories',
        summary: 'The 34 categories',
        ...open,
        querystring: EmptyParams,
        response: { 200: named('CatalogCategoriesResponse', CatalogCategoriesResponse) },
        ...errors(400, 429),
      },
    },
    async (_request, reply) => {
      reply.header('cache-control', 'public, max-age=3600');
      return { success: true as const, data: { items: CATEGORIES.map((c) => ({ id: c.id, label: c.label })) } };
    },
  );

  app.get(
    '/v1/catalog/sitemap',
    {
      config,
      schema: {
        operationId: 'catalogSitemap',
        summary: 'Indexable workflow pages, 1000 per page',
        ...open,
        querystring: CatalogSitemapParams,
        response: { 200: named('CatalogSitemapResponse', CatalogSitemapResponse) },
        ...errors(400, 429, 503),
      },
    },
    async (request, reply) => {
      const data = await app.keylessReads.run(request.ip, () => sitemap(app.db, { page: request.query.page, baseUrl: app.baseUrl() }));
      reply.header('cache-control', 'public, max-age=300');
      return { success: true as const, data };
    },
  );

  app.get(
    '/v1/catalog/tools',
    {
      config,
      // The key is checked before the parameters: without one, the answer is 401 whatever is sent.
      preValidation: app.authenticate,
      schema: {
        operationId: 'catalogTools',
        summary: 'Tool definitions: every operation the organization can call',
        description:
          "Public operations and the organization's own private ones, 100 per page, ordered by operation id; `cursor` is numeric. The MCP server lists exactly these.",
        tags: ['Catalog'],
        security: BEARER,
        querystring: ToolsParams,
        response: { 200: named('ToolsResponse', ToolsResponse) },
        ...errors(400, 401, 429, 503),
      },
    },
    async (request, reply) => {
      const data = await listTools(app.db, request.auth!.orgId, { ...request.query, baseUrl: app.baseUrl() });
      reply.header('cache-control', 'private, no-store');
      return { success: true as const, data };
    },
  );
}
