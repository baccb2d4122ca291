// Zod schemas of resources whose routes validate nothing from a body (responses, headers, the
// error envelope). Request bodies come from shared/schemas/ — the same schemas the routes use.
import { LLM_FALLBACKS } from '../router/llm-client.ts';
import { z } from 'zod';
import { ERRORS } from '../errors.ts';
import { Receipt, RequestStatusValue } from '../schemas/query.ts';
import { REQUEST_ID_PATTERN } from '../ids.ts';

const ERROR_CODES = Object.keys(ERRORS) as [keyof typeof ERRORS, ...(keyof typeof ERRORS)[]];

export const ErrorBody = z
  .looseObject({
    type: z.string().describe('error family, e.g. validation_error, rate_limit_error, authentication_error, access_error'),
    code: z.enum(ERROR_CODES).describe('specific code to branch on'),
    message: z.string(),
    status: z.number().int().describe('HTTP status, repeated so streamed errors carry it'),
    retryable: z.boolean().optional(),
    request_id: z.string().optional(),
    param: z
      .string()
      .optional()
      .describe("dotted path of the failing request field or parameter; absent when the body as a whole is refused (not JSON, empty, not an object, too deep), whose `details.issues` path is ''"),
    doc_url: z.string().optional(),
    details: z.unknown().optional().describe('`details.issues` lists each failing path for validation errors; `details.access` for access_required'),
    receipt: Receipt.optional(),
  })
  .meta({ id: 'ErrorBody' });

export const ErrorEnvelope = z.strictObject({ success: z.literal(false), error: ErrorBody }).meta({ id: 'Error' });

export const ServiceInfo = z
  .strictObject({
    success: z.literal(true),
    data: z.looseObject({
      service: z.string(),
      version: z.string(),
      product: z.string(),
      status: z.string(),
      build_available: z.boolean(),
      registered_providers: z.number().int(),
      endpoint: z.literal('/v1/query'),
    }),
  })
  .meta({ id: 'ServiceInfo' });

export const HealthEnvelope = z
  .strictObject({
    status: z.enum(['ok', 'degraded']),
    service: z.string(),
    timestamp: z.string(),
    uptime_seconds: z.number().int(),
    checks: z.record(z.string(), z.unknown()),
  })
  .meta({ id: 'Health' });

export const RequestStatus = z
  .looseObject({
    request_id: z.string().regex(REQUEST_ID_PATTERN),
    status: RequestStatusValue,
    result: z.union([z.record(z.string(), z.unknown()), z.null()]).describe('retained terminal envelope (QueryResult or Error); keyed requests only'),
    response_status: z.number().int().nullable(),
    result_expires_at: z.string().nullable(),
    error_code: z.string().nullable(),
    receipt: Receipt,
    feedback: z.union([z.literal(1), z.literal(-1), z.null()]),
    can_rate: z.boolean(),
    feedback_unavailable_reason: z.enum(['own_api', 'private_api', 'request_incomplete', 'expired', 'not_independent']).nullable(),
    routing: z
      .strictObject({
        router: z.enum(['offline', 'llm']).describe('which router chose the operation: the offline hybrid one or an OpenAI-compatible model'),
        score: z.number().min(0).max(1).describe("the chosen operation's score"),
        candidates: z
          .array(z.strictObject({ api: z.string(), operation: z.string(), label: z.string(), score: z.number().min(0).max(1) }))
          .describe('the best operations considered, best first (at most 5)'),
        search_credits: z.number().int().describe("the prompt-search fee included in the receipt's credits (5)"),
        llm_fallback: z
          .enum(LLM_FALLBACKS)
          .optional()
          .describe('only when an LLM endpoint is configured and the offline router answered instead of the model: why (an error, a timeout, a refusal, an answer that broke a rule)'),
      })
      .nullable()
      .describe('prompt mode: how the prompt was routed; null in direct mode'),
  })
  .meta({ id: 'RequestStatus' });

export const RequestStatusResponse = z.strictObject({ success: z.literal(true), data: RequestStatus });

// The union's own message ("Invalid input") said neither that the value is missing nor what it may be.
export const FeedbackValue = z.union([z.literal(1), z.literal(-1), z.null()], {
  error: (issue) => (issue.input === undefined ? 'is required: 1, -1, or null to remove the rating' : 'must be 1, -1 or null'),
});
export const FeedbackBody = z
  .strictObject({ value: FeedbackValue.describe('1, -1, or null to remove the rating') })
  .meta({ id: 'FeedbackBody' });
export const FeedbackResponse = z
  .strictObject({
    success: z.literal(true),
    data: z.strictObject({ request_id: z.string().regex(REQUEST_ID_PATTERN), value: FeedbackValue.describe('the rating now stored; null when none') }),
  })
  .meta({ id: 'FeedbackResponse' });

export const AuthResponse = z.strictObject({ success: z.literal(true), data: z.strictObject({}) });

export const FileRecord = z
  .strictObject({
    id: z.string().regex(/^file_[0-9a-f]{32}$/).describe('use it in attachments[].id'),
    name: z.string().min(1).max(160).describe('the decoded X-File-Name'),
    size_bytes: z.number().int().min(1).max(10 * 1024 * 1024),
    content_type: z.string().describe('sniffed from the bytes: a known signature, else text/plain for UTF-8 text, else application/octet-stream'),
    sha256: z.string().regex(/^[0-9a-f]{64}$/).describe('hex SHA-256 of the bytes'),
    created_at: z.string().describe('date-time'),
    expires_at: z.string().describe('date-time, 30 days after created_at; the file is deleted then'),
  })
  .meta({ id: 'File' });
export const FileResponse = z.strictObject({ success: z.literal(true), data: FileRecord });

export const ApiCatalogLinkset = z.strictObject({
  linkset: z.array(z.record(z.string(), z.unknown())),
});

export const ErrorGuideEntry = z
  .strictObject({
    code: z.enum(ERROR_CODES),
    status: z.number().int(),
    type: z.string(),
    retryable: z.boolean(),
    title: z.string(),
  })
  .meta({ id: 'ErrorGuideEntry' });
export const ErrorGuideResponse = z.strictObject({ success: z.literal(true), data: z.strictObject({ items: z.array(ErrorGuideEntry) }) });

/** RFC 9728 protected resource metadata (GET /.well-known/oauth-protected-resource[/mcp]). */
export const ProtectedResourceMetadata = z
  .looseObject({
    resource: z.string(),
    resource_name: z.string(),
    bearer_methods_supported: z.array(z.string()),
    resource_documentation: z.string(),
    authorization_servers: z.array(z.string()),
    scopes_supported: z.array(z.string()),
  })
  .meta({ id: 'ProtectedResourceMetadata' });

/** RFC 8414 authorization server metadata (GET /.well-known/oauth-authorization-server). */
export const AuthorizationServerMetadata = z
  .looseObject({
    issuer: z.string(),
    authorization_endpoint: z.string(),
    token_endpoint: z.string(),
    registration_endpoint: z.string(),
    revocation_endpoint: z.string(),
    scopes_supported: z.array(z.string()),
    response_types_supported: z.array(z.literal('code')),
    grant_types_supported: z.array(z.string()),
    code_challenge_methods_supported: z.array(z.literal('S256')),
    token_endpoint_auth_methods_supported: z.array(z.string()),
    revocation_endpoint_auth_methods_supported: z.array(z.string()),
    client_id_metadata_document_supported: z.boolean(),
    authorization_response_iss_parameter_supported: z.boolean(),
    service_documentation: z.string(),
  })
  .meta({ id: 'AuthorizationServerMetadata' });

/** The MCP endpoint's JSON-RPC messages (the MCP specification defines them; not repeated here). */
export const JsonRpcMessage = z.looseObject({ jsonrpc: z.literal('2.0') }).meta({ id: 'JsonRpcMessage' });

// --- the event stream of POST /v1/query with `stream: true` ------------------------------------

export const StreamProgress = z
  .looseObject({
    request_id: z.string(),
    stage: z.enum(['accepted', 'preparing', 'executing', 'formatting']),
    message: z.string(),
    api_reference: z
      .looseObject({ api: z.string(), name: z.string(), logo_url: z.string().nullable(), category: z.string() })
      .optional()
      .describe('the workflow running (stages executing and formatting)'),
  })
  .meta({ id: 'StreamProgress', description: '`data` of a `progress` event' });

/**
 * One server-sent event. On the wire each is `id: <n>\nevent: <name>\ndata: <one line of JSON>\n\n`,
 * with `: keep-alive` comments between. As OpenAPI 3.2 describes event streams, a frame is an
 * object of its fields, all text; `data` is JSON text whose shape `contentSchema` gives
 * (`contentMediaType: application/json`). `progress` events come first, then exactly one `result`
 * (QueryResult) or `error` (the Error envelope); the HTTP status stays 200.
 */
export function streamFrameSchema(result: z.ZodType) {
  // contentSchema is embedded whole (no component references), so it resolves wherever it sits.
  const inline = (schema: z.ZodType) => {
    const js = z.toJSONSchema(schema, { target: 'draft-2020-12', io: 'output', unrepresentable: 'any', metadata: z.registry() }) as Record<string, unknown>;
    delete js.$schema;
    return js;
  };
  const frame = (event: string, data: z.ZodType) =>
    z.strictObject({
      id: z.string().regex(/^[0-9]+$/).describe('increasing from 1'),
      event: z.literal(event),
      data: z.string().meta({ contentMediaType: 'application/json', contentSchema: inline(data) }),
    });
  return z
    .discriminatedUnion('event', [frame('progress', StreamProgress), frame('result', result), frame('error', ErrorEnvelope)])
    .meta({ id: 'StreamEvent', description: 'A server-sent event frame: `id`, `event` (progress | result | error), `data` (one line of JSON); `: keep-alive` comments every 10 s' });
}

/** The stream's `result` data as embedded in StreamEvent: `output` is any JSON value. */
export const StreamResult = z.looseObject({ success: z.literal(true), data: z.looseObject({ output: z.unknown(), receipt: Receipt }) });
