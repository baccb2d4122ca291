// The OpenAPI 3.1 document, generated from the zod schemas that validate requests and describe
// responses (shared/schemas/, shared/openapi/schemas.ts): never a second hand-written copy.
import { z } from 'zod';
import { ERRORS, type ErrorCode } from '../errors.ts';
import { IdempotencyKeyHeader, QueryRequest, QueryResult } from '../schemas/query.ts';
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
} from '../schemas/catalog.ts';
import { ToolsParams, ToolsResponse } from '../schemas/tools.ts';
import {
  ApiCatalogLinkset,
  AuthResponse,
  ErrorEnvelope,
  FeedbackBody,
  FeedbackResponse,
  FileResponse,
  HealthEnvelope,
  RequestStatusResponse,
  ServiceInfo,
} from './schemas.ts';

/** Contract version of this document (the reference documentation's 1.2.0: both query modes, include and exclude). */
export const CONTRACT_VERSION = '1.2.0';
export const REFERENCE_PATH = '/docs';
export const OPENAPI_PATH = '/openapi.json';
export const API_CATALOG_PATH = '/.well-known/api-catalog';

type Json = Record<string, unknown>;
type Io = 'input' | 'output';

/** Converts zod schemas to JSON Schema 2020-12 and hoists named sub-schemas into components. */
class Components {
  readonly schemas: Record<string, Json> = {};

  convert(schema: z.ZodType, io: Io): Json {
    const js = z.toJSONSchema(schema, { target: 'draft-2020-12', io, unrepresentable: 'any', reused: 'inline', cycles: 'ref' }) as Json;
    delete js.$schema;
    delete js.$id;
    const defs = (js.$defs ?? {}) as Record<string, Json>;
    delete js.$defs;
    const rename = new Map<string, string>();
    for (const [name, def] of Object.entries(defs)) {
      delete def.$id;
      // zod names anonymous recursive schemas (z.json()) __schemaN.
      rename.set(name, this.place(/^__schema\d+$/.test(name) ? 'JsonValue' : name, def, io));
    }
    const rewrite = (node: unknown): unknown => {
      if (Array.isArray(node)) return node.map(rewrite);
      if (node && typeof node === 'object') {
        const out: Json = {};
        for (const [k, v] of Object.entries(node as Json)) {
          if (k === '$ref' && typeof v === 'string' && v.startsWith('#/$defs/')) out[k] = `#/components/schemas/${rename.get(v.slice(8)) ?? v.slice(8)}`;
          else out[k] = rewrite(v);
        }
        return out;
      }
      return node;
    };
    for (const name of new Set(rename.values())) this.schemas[name] = rewrite(this.schemas[name]) as Json;
    return rewrite(js) as Json;
  }

  /** Register `schema` as a named component and return a reference to it. */
  named(name: string, schema: z.ZodType, io: Io = 'output'): Json {
    const js = this.convert(schema, io);
    // A schema with its own id comes back as a bare reference to its component already.
    if (Object.keys(js).length === 1 && typeof js.$ref === 'string') return js;
    return { $ref: `#/components/schemas/${this.place(name, js, io)}` };
  }

  private place(name: string, def: Json, io: Io): string {
    const text = JSON.stringify(def);
    for (let i = 0; ; i++) {
      const candidate = i === 0 ? name : i === 1 && io === 'input' ? `${name}Input` : `${name}_${i}`;
      const existing = this.schemas[candidate];
      if (!existing) {
        this.schemas[candidate] = def;
        return candidate;
      }
      if (JSON.stringify(existing) === text) return candidate;
    }
  }
}

const STATUS_TEXT: Record<number, string> = {
  400: 'Bad request: invalid_input names the failing `param`; details.issues lists each failing path',
  401: 'The API key is missing, malformed, expired or revoked (WWW-Authenticate carries a Bearer challenge)',
  402: 'The organization has too few credits',
  403: 'Not allowed',
  404: 'Not found',
  405: 'Method not allowed on this route',
  408: 'Request timeout',
  409: 'Conflict',
  410: 'Gone',
  413: 'The request body is too large',
  415: 'The body must be JSON',
  422: 'Unprocessable',
  429: 'Rate or concurrency limit (Retry-After, X-RateLimit-*)',
  500: 'Internal error',
  501: 'Not available on this deployment',
  502: 'The website failed',
  503: 'Temporarily unavailable (Retry-After)',
  504: 'The workflow did not finish within its time limit',
};

function codesFor(status: number): ErrorCode[] {
  return (Object.keys(ERRORS) as ErrorCode[]).filter((c) => ERRORS[c].status === status);
}

export interface OpenApiOptions {
  /** Absolute base URL of this deployment (servers[0].url). */
  serverUrl?: string;
}

export function buildOpenApiDocument(opts: OpenApiOptions = {}): Json {
  const c = new Components();
  const errorRef = c.named('Error', ErrorEnvelope);
  const responses: Record<string, Json> = {};
  const errorStatuses = [400, 401, 402, 403, 404, 405, 408, 409, 410, 413, 415, 422, 429, 500, 501, 502, 503, 504];
  for (const status of errorStatuses) {
    const codes = codesFor(status);
    const headers: Json = {};
    if (status === 429 || status === 503) headers['Retry-After'] = { $ref: '#/components/headers/Retry-After' };
    if (status === 429) {
      for (const h of ['X-RateLimit-Limit', 'X-RateLimit-Remaining', 'X-RateLimit-Reset']) headers[h] = { $ref: `#/components/headers/${h}` };
    }
    if (status === 401) headers['WWW-Authenticate'] = { schema: { type: 'string' }, description: 'Bearer challenge naming the realm' };
    responses[`E${status}`] = {
      description: `${STATUS_TEXT[status] ?? 'Error'}${codes.length ? `. Codes: ${codes.map((x) => `\`${x}\``).join(', ')}` : ''}`,
      ...(Object.keys(headers).length ? { headers } : {}),
      content: {
        'application/json': {
          schema: errorRef,
          ...(codes[0] ? { examples: Object.fromEntries(codes.map((code) => [code, { value: exampleError(code) }])) } : {}),
        },
      },
    };
  }
  const errs = (...statuses: number[]) => Object.fromEntries(statuses.map((s) => [String(s), { $ref: `#/components/responses/E${s}` }]));
  const json = (schema: Json, description: string, headers?: Json) => ({ description, ...(headers ? { headers } : {}), content: { 'application/json': { schema } } });
  const params = (schema: z.ZodObject, where: 'query' | 'path' = 'query') => {
    const js = c.convert(schema, 'input');
    const props = (js.properties ?? {}) as Record<string, Json>;
    const required = new Set((js.required as string[] | undefined) ?? []);
    return Object.entries(props).map(([name, s]) => {
      const { description, ...rest } = s;
      return { name, in: where, required: where === 'path' || required.has(name), ...(description ? { description } : {}), schema: rest };
    });
  };
  const bearer = [{ bearerAuth: [] }];
  const publicErrs = errs(400, 404, 405, 429, 500, 503);
  const keyErrs = errs(400, 401, 404, 405, 429, 500, 503);
  const queryHeaders: Json = Object.fromEntries(
    [
      ['X-Request-Id', 'request id'],
      ['Idempotency-Replayed', 'true for a replayed retained result'],
      ['Location', '/v1/query/requests/{request_id}'],
      ['X-Svc-Billing-Status', '`settled` or `pending`'],
      ['X-Svc-Cost-Credits', 'credits charged'],
      ['X-Svc-API', 'handle that ran'],
      ['X-RateLimit-Limit', ''],
      ['X-RateLimit-Remaining', ''],
      ['X-RateLimit-Reset', ''],
    ].map(([h, d]) => [h, h!.startsWith('X-RateLimit') ? { $ref: `#/components/headers/${h}` } : { description: d, schema: { type: 'string' } }]),
  );
  const requestIdParam = { name: 'request_id', in: 'path', required: true, schema: { type: 'string', pattern: '^req_[A-Za-z0-9_-]{10,64}$' } };

  const queryRequest = c.named('QueryRequest', QueryRequest, 'input');
  const paths: Json = {
    '/': { get: { operationId: 'serviceDiscovery', summary: 'Service discovery', tags: ['Service'], security: [], responses: { 200: json(c.named('ServiceInfo', ServiceInfo), 'Service discovery'), ...errs(429, 500) } } },
    '/health': {
      get: {
        operationId: 'health',
        summary: 'Readiness',
        tags: ['Service'],
        security: [],
        responses: { 200: json(c.named('Health', HealthEnvelope), 'Healthy'), 503: json({ $ref: '#/components/schemas/Health' }, 'Degraded (the health envelope, not the error envelope)') },
      },
    },
    '/v1/query': {
      post: {
        operationId: 'query',
        summary: 'Run an operation (direct mode) or route a prompt (prompt mode)',
        description:
          'Direct mode: `api` + `operation` + `input` (optionally `version`). Prompt mode: `prompt` (optionally `api`, `allowed_apis`, `blocked_apis`, `attachments`). `response` shapes `data.output`: `format`, `include`, `exclude`, `schema`, `mapping` (mapping requires schema; include excludes the others; exclude excludes schema and mapping). A direct call costs 1 credit; a successful prompt search 5 credits.',
        tags: ['Query'],
        security: bearer,
        parameters: [{ name: 'Idempotency-Key', in: 'header', required: false, description: 'opaque, unique per logical query, scoped to the organization', schema: c.convert(IdempotencyKeyHeader, 'input') }],
        requestBody: {
          required: true,
          content: {
            'application/json': {
              schema: queryRequest,
              examples: {
                direct: { summary: 'Direct mode', value: { api: '@books', operation: 'search_books', input: { query: 'dune' }, response: { include: ['books.title'] } } },
                direct_exclude: { summary: 'Direct mode, exclude', value: { api: '@books', operation: 'search_books', input: { query: 'dune' }, response: { exclude: ['books.url'] } } },
                direct_schema: {
                  summary: 'Direct mode, schema and mapping',
                  value: { api: '@books', operation: 'search_books', input: { query: 'dune' }, response: { schema: { type: 'object', properties: { first: { type: 'string' } } }, mapping: [{ target: '/first', source: '/books/0/title' }] } },
                },
                prompt: { summary: 'Prompt mode', value: { prompt: 'Find books about sand planets', allowed_apis: ['@books'] } },
                stream: { summary: 'Streamed', value: { api: '@weather', operation: 'current_weather', input: { city: 'Oslo' }, stream: true } },
              },
            },
          },
        },
        responses: {
          200: {
            description: 'QueryResult, or with `stream: true` a server-sent event stream (`progress` events, then exactly one `result` or `error` event; HTTP status stays 200)',
            headers: queryHeaders,
            content: {
              'application/json': { schema: c.named('QueryResult', QueryResult) },
              'text/event-stream': { schema: { type: 'string', description: 'frames `id`, `event` (`progress`, `result`, `error`), `data` (one line of JSON); `: keep-alive` comments' } },
            },
          },
          ...errs(400, 401, 402, 403, 404, 408, 409, 410, 413, 415, 422, 429, 500, 502, 503, 504),
        },
      },
    },
    '/v1/query/requests/{request_id}': {
      get: {
        operationId: 'getRequest',
        summary: 'Request status, billing and retained result',
        tags: ['Query'],
        security: bearer,
        parameters: [requestIdParam],
        responses: { 200: json(c.named('RequestStatusResponse', RequestStatusResponse), 'Request status'), ...errs(400, 401, 404, 410, 429, 500, 503) },
      },
    },
    '/v1/query/requests/{request_id}/feedback': {
      post: {
        operationId: 'rateRequest',
        summary: 'Rate a request',
        tags: ['Query'],
        security: bearer,
        parameters: [requestIdParam],
        requestBody: { required: true, content: { 'application/json': { schema: c.named('FeedbackBody', FeedbackBody, 'input') } } },
        responses: { 200: json(c.named('FeedbackResponse', FeedbackResponse), 'Rated'), ...errs(400, 401, 404, 409, 410, 429, 500, 503) },
      },
    },
    '/v1/auth': {
      get: { operationId: 'checkKey', summary: 'Validate the key', tags: ['Service'], security: bearer, responses: { 200: json(c.named('AuthResponse', AuthResponse), 'The key is valid'), ...errs(401, 429, 500, 503) } },
    },
    '/v1/files': {
      post: {
        operationId: 'uploadFile',
        summary: 'Upload a file (organization-private, expires after 30 days)',
        tags: ['Files'],
        security: bearer,
        parameters: [{ name: 'X-File-Name', in: 'header', required: true, description: 'URI-encoded file name, at most 160 decoded characters', schema: { type: 'string' } }],
        requestBody: { required: true, content: { 'application/octet-stream': { schema: { type: 'string', contentMediaType: 'application/octet-stream', description: 'up to 10 MB' } } } },
        responses: { 201: json(c.named('FileResponse', FileResponse), 'Uploaded'), ...errs(400, 401, 413, 415, 429, 500, 503) },
      },
    },
    '/v1/catalog': {
      get: {
        operationId: 'searchCatalog',
        summary: 'Search public workflows',
        description: 'Ranked full-text search (typo tolerant) over handles, names, descriptions, operations, categories and site hosts. Only active public workflows. Page with `cursor` = the previous `next_cursor`, keeping query, filters and sort; a cursor reused with others is 400 invalid_input (param `cursor`).',
        tags: ['Catalog'],
        security: [],
        parameters: params(CatalogSearchParams),
        responses: { 200: json(c.named('CatalogSearchResponse', CatalogSearchResponse), 'One page of workflows'), ...publicErrs, ...errs(410) },
      },
    },
    '/v1/catalog/detail': {
      get: {
        operationId: 'catalogDetail',
        summary: 'One public workflow with its contracts',
        description: 'Per operation: input_schema, output_schema, verified examples, selectable_fields, contract_version, health, access. 25 operations per response; `operation_cursor` pages on, `operation_id` selects one. Unknown or private handles are 404 unknown_api_slug.',
        tags: ['Catalog'],
        security: [],
        parameters: params(CatalogDetailParams),
        responses: { 200: json(c.named('CatalogDetailResponse', CatalogDetailResponse), 'The workflow'), ...publicErrs, ...errs(410) },
      },
    },
    '/v1/catalog/suggest': {
      get: { operationId: 'catalogSuggest', summary: 'Search-box suggestions (names and logos)', tags: ['Catalog'], security: [], parameters: params(CatalogSuggestParams), responses: { 200: json(c.named('CatalogSuggestResponse', CatalogSuggestResponse), 'Suggestions'), ...publicErrs } },
    },
    '/v1/catalog/categories': {
      get: { operationId: 'catalogCategories', summary: 'The 34 categories', tags: ['Catalog'], security: [], responses: { 200: json(c.named('CatalogCategoriesResponse', CatalogCategoriesResponse), 'Categories'), ...publicErrs } },
    },
    '/v1/catalog/sitemap': {
      get: { operationId: 'catalogSitemap', summary: 'Indexable workflow pages, 1000 per page', tags: ['Catalog'], security: [], parameters: params(CatalogSitemapParams), responses: { 200: json(c.named('CatalogSitemapResponse', CatalogSitemapResponse), 'One page'), ...publicErrs } },
    },
    '/v1/catalog/tools': {
      get: {
        operationId: 'catalogTools',
        summary: 'Tool definitions: every operation the organization can call',
        description: 'Public operations and the organization\'s own private ones, 100 per page, ordered by operation id; `cursor` is numeric. The MCP server lists exactly these.',
        tags: ['Catalog'],
        security: bearer,
        parameters: params(ToolsParams),
        responses: { 200: json(c.named('ToolsResponse', ToolsResponse), 'One page of tools'), ...keyErrs },
      },
    },
    '/v1/icons/{sha256}': {
      get: {
        operationId: 'getIcon',
        summary: 'Site icon by content hash (immutable; strong ETag)',
        tags: ['Catalog'],
        security: [],
        parameters: [
          { name: 'sha256', in: 'path', required: true, schema: { type: 'string', pattern: '^[0-9a-f]{64}$' } },
          { name: 'If-None-Match', in: 'header', required: false, schema: { type: 'string' } },
        ],
        responses: {
          200: {
            description: 'The icon bytes',
            headers: { ETag: { schema: { type: 'string' } }, 'Cache-Control': { schema: { type: 'string' } } },
            content: { 'image/*': { schema: { type: 'string', contentMediaType: 'image/*' } } },
          },
          304: { description: 'Not modified' },
          ...errs(400, 404, 500, 503),
        },
      },
    },
    [OPENAPI_PATH]: {
      get: { operationId: 'openapi', summary: 'This document', tags: ['Service'], security: [], responses: { 200: { description: 'OpenAPI 3.1', content: { 'application/json': { schema: { type: 'object' } } } } } },
    },
    [API_CATALOG_PATH]: {
      get: {
        operationId: 'apiCatalog',
        summary: 'RFC 9727 API catalog (linkset)',
        tags: ['Service'],
        security: [],
        responses: { 200: { description: 'Linkset', content: { 'application/linkset+json': { schema: c.convert(ApiCatalogLinkset, 'output') } } } },
      },
    },
    '/mcp': {
      post: {
        operationId: 'mcp',
        summary: 'MCP server (Streamable HTTP)',
        description: 'JSON-RPC over Streamable HTTP. Variants: `?read_only=true`; `/mcp/workflows/{workflow_name}`. Tools: svc_search_workflows, svc_get_workflow, svc_run_workflow, svc_run_action, svc_get_run.',
        tags: ['MCP'],
        security: bearer,
        requestBody: { required: true, content: { 'application/json': { schema: { type: 'object' } } } },
        responses: {
          200: { description: 'JSON-RPC response or event stream', content: { 'application/json': { schema: { type: 'object' } }, 'text/event-stream': { schema: { type: 'string' } } } },
          ...errs(400, 401, 429, 500, 503),
        },
      },
    },
  };

  return {
    openapi: '3.1.1',
    info: {
      title: 'Workflow Query Service',
      version: CONTRACT_VERSION,
      description:
        'Runs website tasks (workflows) with typed inputs and outputs. Every JSON response carries `success`; failures are `{success:false, error:{type, code, message, status, retryable, doc_url, param?, details?}}`.',
    },
    servers: [{ url: opts.serverUrl ?? '/' }],
    security: bearer,
    tags: [
      { name: 'Query', description: 'Run workflows' },
      { name: 'Catalog', description: 'Find workflows (free)' },
      { name: 'Files' },
      { name: 'Service' },
      { name: 'MCP' },
    ],
    paths,
    components: {
      schemas: c.schemas,
      responses,
      headers: {
        'Retry-After': { description: 'seconds to wait before retrying', schema: { type: 'integer' } },
        'X-RateLimit-Limit': { description: 'requests per minute', schema: { type: 'integer' } },
        'X-RateLimit-Remaining': { description: 'left in the current minute', schema: { type: 'integer' } },
        'X-RateLimit-Reset': { description: 'Unix time (seconds) when the oldest request leaves the window', schema: { type: 'integer' } },
      },
      securitySchemes: { bearerAuth: { type: 'http', scheme: 'bearer', description: 'Organization API key `svc_sk_…`' } },
    },
  };
}

function exampleError(code: ErrorCode) {
  const d = ERRORS[code];
  return { success: false, error: { type: d.type, code, message: d.title, status: d.status, retryable: d.retryable, doc_url: `/docs/errors#${code}` } };
}
