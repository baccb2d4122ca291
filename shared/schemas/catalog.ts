// Catalog discovery: query parameters (validated with these schemas) and response shapes (the
// OpenAPI document is generated from them). Query parameters arrive as strings: numbers coerce.
import { z } from 'zod';
import { CATEGORY_IDS } from '../catalog/categories.ts';
import { Handle, queryInt, queryIntOr } from './common.ts';

export const CATALOG_SORTS = ['relevant', 'popular', 'newest', 'updated'] as const;
export const CATALOG_QUERY_MAX = 100;
export const CATALOG_LIMIT_DEFAULT = 60;
export const SITEMAP_PAGE_SIZE = 1000;
export const DETAIL_OPERATIONS_PAGE = 25;
export const SUGGEST_LIMIT_DEFAULT = 8;

const Cursor = z.string().min(1).max(2000);

/**
 * A number, not only an integer: 0.5 keeps operations costing 0; a huge value (1e308, even one
 * past the double range) means no limit; '', negative, NaN and text are 400. Coerced by hand so
 * that '' is not silently 0.
 */
const MaxCost = z
  .preprocess((v) => {
    if (typeof v !== 'string' || v.trim() === '') return v;
    const n = Number(v);
    return n === Infinity ? Number.MAX_VALUE : n;
  }, z.number().min(0))
  .meta({ type: 'number', minimum: 0, description: 'only operations at or under this cost per call (fractions allowed; a huge value means no limit); items left with none are dropped' });

export const CatalogSearchParams = z.strictObject({
  query: z.string().max(CATALOG_QUERY_MAX).optional().describe('free text, up to 100 characters; typo tolerant'),
  api: Handle.optional().describe('one handle including the @'),
  category: z.enum(CATEGORY_IDS).optional().describe('a category ID'),
  sort: z
    .enum(CATALOG_SORTS)
    .optional()
    .describe('`relevant` (default with a query), `popular` (completed runs; default without a query), `newest`, `updated`'),
  limit: queryIntOr(1, 100, CATALOG_LIMIT_DEFAULT).describe('items per page, 1 to 100, default 60'),
  max_cost_credits: MaxCost.optional(),
  cursor: Cursor.optional().describe("previous page's `next_cursor`; only valid with the same query, filters and sort"),
});
export type CatalogSearchParams = z.infer<typeof CatalogSearchParams>;

export const CatalogDetailParams = z.strictObject({
  api: Handle.describe('handle including the @'),
  operation_id: queryInt(1, Number.MAX_SAFE_INTEGER).describe('only this operation (numeric id from the catalog)'),
  operation_cursor: Cursor.optional().describe("previous response's `next_operation_cursor`: the next page of operations"),
});
export type CatalogDetailParams = z.infer<typeof CatalogDetailParams>;

export const CatalogSuggestParams = z.strictObject({
  query: z.string().max(CATALOG_QUERY_MAX).optional().describe('what has been typed so far; empty lists the most popular workflows'),
  limit: queryIntOr(1, 20, SUGGEST_LIMIT_DEFAULT).describe('1 to 20, default 8'),
});
export type CatalogSuggestParams = z.infer<typeof CatalogSuggestParams>;

export const CatalogSitemapParams = z.strictObject({
  page: queryIntOr(1, 1_000_000, 1).describe('1-based page of 1000 workflows'),
});
export type CatalogSitemapParams = z.infer<typeof CatalogSitemapParams>;

export const EmptyParams = z.strictObject({});

// --- responses -----------------------------------------------------------------------------

export const Site = z
  .strictObject({
    name: z.string(),
    host: z.string(),
    icon_url: z.string().nullable().describe('GET /v1/icons/{sha256}'),
  })
  .meta({ id: 'Site' });

export const AccessRequirement = z
  .looseObject({
    kind: z.enum(['account', 'access_key']),
    name: z.string(),
    site: z.string(),
  })
  .meta({ id: 'AccessRequirement' });

export const Health = z
  .looseObject({
    status: z
      .string()
      .describe('outcome of the last check of the verified examples: `healthy` (all passed), `degraded` (some), `failing` (none), `unknown` (never checked), `unverifiable` (actions and operations needing a connection are never run)'),
    verified_at: z.string().nullable().describe('date-time of the last check in which every example passed'),
  })
  .meta({ id: 'OperationHealth' });

export const CatalogOperation = z
  .looseObject({
    id: z.number().int().describe('numeric operation ID used by tools and catalog cursors; not callable'),
    operation: z.string().describe('callable operation name'),
    label: z.string(),
    contract_version: z.number().int().describe('default contract version'),
    cost_credits: z.number().describe('credits per completed run'),
    performs_actions: z.boolean().describe('true when running it changes something on a website'),
    health: Health,
    sites: z.array(Site),
    access: z.array(AccessRequirement),
  })
  .meta({ id: 'CatalogOperation' });

export const CatalogApi = z
  .looseObject({
    api: z.string().describe('handle with @'),
    name: z.string(),
    description: z.string(),
    category: z.enum(CATEGORY_IDS),
    website_url: z.string().nullable(),
    logo_url: z.string().nullable(),
    availability: z.enum(['available', 'coming_soon']),
    visibility: z.literal('public'),
    access: z.enum(['open', 'own', 'mixed']).describe('`open` runs as is, `own` needs a connected account or access key, `mixed` both kinds'),
    is_enabled: z.literal(true),
    sites: z.array(Site).describe("the sites read, the product's own first"),
    completed_runs: z.number().int().describe('completed runs (the `popular` order)'),
    created_at: z.string(),
    updated_at: z.string(),
    operations: z.array(CatalogOperation),
  })
  .meta({ id: 'CatalogApi' });

export const VerifiedExample = z
  .looseObject({ title: z.string().optional(), input: z.record(z.string(), z.unknown()), output: z.unknown() })
  .meta({ id: 'VerifiedExample' });

export const JsonSchemaObject = z.record(z.string(), z.unknown()).meta({ id: 'JsonSchema', description: 'a JSON Schema' });

export const CatalogDetailOperation = CatalogOperation.extend({
  operation_id: z.number().int().describe('same as id'),
  description: z.string(),
  input_schema: JsonSchemaObject,
  output_schema: JsonSchemaObject,
  examples: z.array(VerifiedExample).describe('verified: running `input` returns `output`'),
  selectable_fields: z.array(z.string()).describe('the paths response.include / response.exclude accept'),
  versions: z.array(z.number().int()).describe('available contract versions'),
}).meta({ id: 'CatalogDetailOperation' });

export const CatalogDetail = CatalogApi.extend({
  operation_count: z.number().int(),
  operations: z.array(CatalogDetailOperation),
  next_operation_cursor: z.string().nullable().describe('pass as `operation_cursor` for the next operations; null on the last page'),
}).meta({ id: 'CatalogDetail' });

export const Category = z.strictObject({ id: z.enum(CATEGORY_IDS), label: z.string() }).meta({ id: 'Category' });

export const Suggestion = z
  .looseObject({
    api: z.string(),
    name: z.string(),
    logo_url: z.string().nullable(),
    category: z.enum(CATEGORY_IDS),
  })
  .meta({ id: 'Suggestion' });

export const SitemapEntry = z
  .looseObject({
    api: z.string(),
    name: z.string(),
    url: z.string().describe('the workflow page (its catalog detail)'),
    category: z.enum(CATEGORY_IDS),
    updated_at: z.string(),
    terms: z.array(z.string()).describe('what the workflow is known for'),
  })
  .meta({ id: 'SitemapEntry' });

const ok = <T extends z.ZodType>(data: T) => z.strictObject({ success: z.literal(true), data });

export const CatalogSearchResponse = ok(z.strictObject({ items: z.array(CatalogApi), next_cursor: z.string().nullable() }));
export const CatalogDetailResponse = ok(CatalogDetail);
export const CatalogSuggestResponse = ok(z.strictObject({ items: z.array(Suggestion) }));
export const CatalogCategoriesResponse = ok(z.strictObject({ items: z.array(Category) }));
export const CatalogSitemapResponse = ok(
  z.strictObject({
    items: z.array(SitemapEntry),
    page: z.number().int(),
    page_size: z.number().int(),
    total: z.number().int(),
    next_page: z.number().int().nullable(),
  }),
);
