// The one catalog of error codes: status, family, retryability and guide entry.
// Handlers, activities and workflows throw or return these codes, never ad-hoc strings.
// Workflow-safe: no Node built-ins.

export type ErrorType =
  | 'validation_error'
  | 'authentication_error'
  | 'billing_error'
  | 'idempotency_error'
  | 'access_error'
  | 'not_found_error'
  | 'rate_limit_error'
  | 'upstream_error'
  | 'timeout_error'
  | 'service_error';

export interface ErrorDef {
  status: number;
  type: ErrorType;
  retryable: boolean;
  title: string;
}

export const ERRORS = {
  // Validation (400/413/422)
  invalid_input: { status: 400, type: 'validation_error', retryable: false, title: 'The request is malformed or has unknown or invalid fields' },
  invalid_provider_input: { status: 422, type: 'validation_error', retryable: false, title: "The input breaks the operation's input schema" },
  payload_too_large: { status: 413, type: 'validation_error', retryable: false, title: 'The request body is too large' },
  unsupported_media_type: { status: 415, type: 'validation_error', retryable: false, title: 'The request body must be JSON' },
  request_timeout: { status: 408, type: 'timeout_error', retryable: true, title: 'The request was not received in time: its headers within 60 s, the whole request within REQUEST_TIMEOUT_MS (120 s)' },
  prompt_unroutable: { status: 422, type: 'validation_error', retryable: false, title: 'No operation is a clear match for the prompt; details.candidates lists the closest (use direct mode)' },
  prompt_input_missing: { status: 422, type: 'validation_error', retryable: false, title: 'The prompt does not give every required input; details.missing lists each field' },
  feature_unavailable: { status: 501, type: 'service_error', retryable: false, title: 'This feature is not available on this deployment yet' },

  // Authentication
  api_key_required: { status: 401, type: 'authentication_error', retryable: false, title: 'An API key is required' },
  invalid_api_key: { status: 401, type: 'authentication_error', retryable: false, title: 'The API key is malformed or unknown' },
  expired_api_key: { status: 401, type: 'authentication_error', retryable: false, title: 'The API key has expired' },
  revoked_api_key: { status: 401, type: 'authentication_error', retryable: false, title: 'The API key was revoked' },
  invalid_access_token: { status: 401, type: 'authentication_error', retryable: false, title: 'The OAuth access token is unknown, expired, revoked or for another resource' },
  api_key_verification_unavailable: { status: 503, type: 'service_error', retryable: true, title: 'API keys cannot be checked right now' },
  authentication_rate_limited: { status: 429, type: 'rate_limit_error', retryable: true, title: 'Too many failed credential checks from this client address; wait Retry-After (a key already in use here still works)' },

  // Resolution
  unknown_api_slug: { status: 404, type: 'not_found_error', retryable: false, title: 'No workflow with that handle is available to the organization' },
  unknown_operation: { status: 404, type: 'not_found_error', retryable: false, title: 'The workflow has no operation with that name' },
  workflow_version_unavailable: { status: 409, type: 'validation_error', retryable: false, title: 'The pinned contract version is not available' },
  request_not_found: { status: 404, type: 'not_found_error', retryable: false, title: 'No request with that id exists for the organization' },
  feedback_unavailable: { status: 409, type: 'access_error', retryable: false, title: 'The request cannot be rated; details.reason says why' },
  publish_refused: { status: 409, type: 'validation_error', retryable: false, title: 'The workflow cannot be published; details.reason says why' },
  route_not_found: { status: 404, type: 'not_found_error', retryable: false, title: 'No route matches the method and path' },
  method_not_allowed: { status: 405, type: 'validation_error', retryable: false, title: 'The route does not accept this method' },
  not_found: { status: 404, type: 'not_found_error', retryable: false, title: 'The workflow found no match for the input' },
  file_not_found: { status: 404, type: 'not_found_error', retryable: false, title: "No file with that id exists for the organization" },
  file_expired: { status: 410, type: 'not_found_error', retryable: false, title: 'The file passed its 30-day retention; upload it again' },
  icon_not_found: { status: 404, type: 'not_found_error', retryable: false, title: 'No icon with that hash' },

  // Billing
  insufficient_credits: { status: 402, type: 'billing_error', retryable: false, title: 'The organization has too few credits' },
  billing_unavailable: { status: 503, type: 'service_error', retryable: true, title: 'Credits cannot be reserved now' },

  // Idempotency and admission
  idempotency_key_conflict: { status: 409, type: 'idempotency_error', retryable: false, title: 'The key was already used with a different body' },
  request_in_progress: { status: 409, type: 'idempotency_error', retryable: true, title: 'The original request is still running; retry with the same key' },
  request_interrupted: { status: 409, type: 'idempotency_error', retryable: false, title: 'The original request stopped and will not run again under this key' },
  organization_concurrency_limit: { status: 429, type: 'rate_limit_error', retryable: true, title: 'Too many requests running at once' },
  unresolved_query_limit: { status: 429, type: 'rate_limit_error', retryable: false, title: 'Too many keyed requests unresolved; check them first' },
  rate_limited: { status: 429, type: 'rate_limit_error', retryable: true, title: 'Too many requests in the current minute' },
  organization_rate_limit: { status: 429, type: 'rate_limit_error', retryable: true, title: "The organization's requests to this API process came too fast (every keyed request and MCP message counts); wait Retry-After" },
  file_storage_limit: { status: 429, type: 'rate_limit_error', retryable: false, title: "The organization's stored files reached its limit (bytes or count); room frees as files expire" },
  admission_unavailable: { status: 503, type: 'service_error', retryable: true, title: 'Requests cannot be admitted now' },

  // Access and connected accounts
  access_required: { status: 409, type: 'access_error', retryable: false, title: 'A required connected account or access key is missing' },
  auth_required: { status: 409, type: 'access_error', retryable: false, title: 'The connected account must sign in again' },
  auth_revoked: { status: 409, type: 'access_error', retryable: false, title: 'The connected account was disconnected' },
  credentials_missing: { status: 422, type: 'access_error', retryable: false, title: 'A key or variable the workflow needs is missing' },
  credentials_rejected: { status: 422, type: 'access_error', retryable: false, title: 'The website rejected a key or variable' },
  source_permission_denied: { status: 422, type: 'access_error', retryable: false, title: 'The website denied the account access' },

  // Website outcomes
  action_unconfirmed: { status: 422, type: 'upstream_error', retryable: false, title: "An action's outcome could not be confirmed; check the website" },
  workflow_partially_completed: { status: 422, type: 'upstream_error', retryable: false, title: 'An earlier step may have completed; check the website' },
  workflow_execution_failed: { status: 502, type: 'upstream_error', retryable: true, title: 'The website could not be reached' },
  upstream_not_found: { status: 502, type: 'upstream_error', retryable: false, title: 'The website returned 404 or 410' },
  upstream_http_error: { status: 502, type: 'upstream_error', retryable: true, title: 'The website returned an error instead of data' },
  source_rate_limited: { status: 502, type: 'upstream_error', retryable: true, title: 'The website is rate-limiting' },
  source_blocked: { status: 502, type: 'upstream_error', retryable: true, title: 'The website is not allowing the request now' },
  execution_timeout: { status: 504, type: 'timeout_error', retryable: true, title: 'The workflow did not finish within its time limit' },

  // Service
  engine_unavailable: { status: 503, type: 'service_error', retryable: true, title: 'Workflows cannot run now' },
  response_formatting_unavailable: { status: 503, type: 'service_error', retryable: true, title: 'Model-assisted response.schema mapping is unavailable' },
  catalog_unavailable: { status: 503, type: 'service_error', retryable: true, title: 'The catalog is temporarily unavailable' },
  response_delivery_failed: { status: 500, type: 'service_error', retryable: false, title: 'The workflow finished but its result was not delivered' },
  internal_error: { status: 500, type: 'service_error', retryable: true, title: 'Unexpected error' },
} as const satisfies Record<string, ErrorDef>;

export type ErrorCode = keyof typeof ERRORS;

export function isErrorCode(code: unknown): code is ErrorCode {
  return typeof code === 'string' && Object.prototype.hasOwnProperty.call(ERRORS, code);
}

export const ERROR_GUIDE_PATH = '/docs/errors';

export function docUrl(code: ErrorCode, baseUrl = ''): string {
  return `${baseUrl}${ERROR_GUIDE_PATH}#${code}`;
}

export interface ValidationIssue {
  path: string;
  message: string;
  code?: string;
}

export interface ErrorBody {
  type: ErrorType;
  code: ErrorCode;
  message: string;
  status: number;
  retryable: boolean;
  doc_url: string;
  request_id?: string;
  param?: string;
  details?: unknown;
  receipt?: unknown;
}

export interface ErrorEnvelope {
  success: false;
  error: ErrorBody;
}

export interface ErrorOptions {
  message?: string;
  param?: string;
  details?: unknown;
  requestId?: string;
  receipt?: unknown;
  baseUrl?: string;
}

/** Build the spec's error envelope for a code from the catalog. */
export function errorEnvelope(code: ErrorCode, opts: ErrorOptions = {}): ErrorEnvelope {
  const def: ErrorDef = ERRORS[code];
  const error: ErrorBody = {
    type: def.type,
    code,
    message: opts.message ?? def.title,
    status: def.status,
    retryable: def.retryable,
    doc_url: docUrl(code, opts.baseUrl),
  };
  if (opts.requestId) error.request_id = opts.requestId;
  if (opts.param !== undefined) error.param = opts.param;
  if (opts.details !== undefined) error.details = opts.details;
  if (opts.receipt !== undefined) error.receipt = opts.receipt;
  return { success: false, error };
}

/** A ServiceError's envelope (its code, message, param, details, request id; `requestId` when it names none). */
export function serviceErrorEnvelope(err: ServiceError, opts: { baseUrl?: string; requestId?: string } = {}): ErrorEnvelope {
  return errorEnvelope(err.code, { message: err.message, param: err.param, details: err.details, requestId: err.requestId ?? opts.requestId, baseUrl: opts.baseUrl });
}

/**
 * A failure that carries a catalog code. Thrown by API code, activities and engines;
 * the API's central handler and the workflow turn it into the envelope.
 */
export class ServiceError extends Error {
  readonly code: ErrorCode;
  readonly param?: string;
  readonly details?: unknown;
  readonly headers?: Record<string, string>;
  readonly requestId?: string;

  constructor(
    code: ErrorCode,
    message?: string,
    extra: { param?: string; details?: unknown; headers?: Record<string, string>; requestId?: string } = {},
  ) {
    super(message ?? ERRORS[code].title);
    this.name = 'ServiceError';
    this.code = code;
    this.param = extra.param;
    this.details = extra.details;
    this.headers = extra.headers;
    this.requestId = extra.requestId;
  }

  get status(): number {
    return ERRORS[this.code].status;
  }
}
