// IDs carry their meaning: req_…, org_…, key_…, file_…; API keys are svc_sk_….
import { createHash, randomBytes } from 'node:crypto';

const B62 = 'ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789';

function base62(bytes: number): string {
  const buf = randomBytes(bytes);
  let out = '';
  for (const b of buf) out += B62[b % 62];
  return out;
}

export const REQUEST_ID_PATTERN = /^req_[A-Za-z0-9_-]{10,64}$/;
export const API_KEY_PATTERN = /^svc_sk_[A-Za-z0-9]{32,128}$/;
export const IDEMPOTENCY_KEY_PATTERN = /^[!-~]{1,255}$/;

export const newRequestId = () => `req_${base62(24)}`;
export const newOrgId = () => `org_${randomBytes(12).toString('hex')}`;
export const newApiKeyId = () => `key_${randomBytes(12).toString('hex')}`;
export const newApiKey = () => `svc_sk_${base62(40)}`;

export const sha256 = (s: string | Uint8Array) => createHash('sha256').update(s).digest();
export const sha256Hex = (s: string | Uint8Array) => createHash('sha256').update(s).digest('hex');

/**
 * Temporal workflow ID of a query. With an Idempotency-Key it is derived from the organization
 * and a hash of the key (never the raw key) plus the claim's request id: the database claim is what
 * stops one key from running twice, and the id names exactly one claim, so a key reused after its
 * retention never finds (or is mistaken for) the previous claim's run.
 */
export function queryWorkflowId(orgId: string, requestId: string, idempotencyKeyHash?: string | null): string {
  return idempotencyKeyHash ? `query-${orgId}-key-${idempotencyKeyHash.slice(0, 32)}-${requestId}` : `query-${orgId}-${requestId}`;
}

/** Stable JSON: object keys sorted, so equal bodies fingerprint equally. */
export function canonicalJson(value: unknown): string {
  if (value === null || typeof value !== 'object') return JSON.stringify(value);
  if (Array.isArray(value)) return `[${value.map(canonicalJson).join(',')}]`;
  const entries = Object.entries(value as Record<string, unknown>)
    .filter(([, v]) => v !== undefined)
    .sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0));
  return `{${entries.map(([k, v]) => `${JSON.stringify(k)}:${canonicalJson(v)}`).join(',')}}`;
}
