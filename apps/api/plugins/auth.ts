// Bearer API keys: svc_sk_… keys, checked by hash on every request (revocation is immediate),
// within the bounds of services/credential-guard.ts (lookups in flight, failed checks per address).
// An authenticated request then takes a token of its organization's request bucket (org-rate.ts).
import type { FastifyInstance, FastifyRequest } from 'fastify';
import fp from 'fastify-plugin';
import { API_KEY_PATTERN } from '../../../shared/ids.ts';
import { checkApiKey } from '../../../shared/db/orgs.ts';
import { ServiceError } from '../../../shared/errors.ts';
import type { Db } from '../../../shared/db/pool.ts';
import { OrgRate, type BucketLimits } from '../services/org-rate.ts';
import { CredentialGuard, type GuardLimits } from '../services/credential-guard.ts';
import { headerCopies } from '../services/header-copies.ts';

export interface AuthContext {
  orgId: string;
  keyId: string;
  plan: string;
}

declare module 'fastify' {
  interface FastifyRequest {
    auth: AuthContext | null;
  }
  interface FastifyInstance {
    authenticate(request: FastifyRequest, reply: FastifyReply): Promise<void>;
    db: Db;
    /** Each organization's request bucket in this process; `authenticate` takes one token. */
    orgRate: OrgRate;
    /** Bounds on credential lookups and failed checks per client address in this process. */
    credentialGuard: CredentialGuard;
  }
}

export const REALM = 'workflow-query-service';

export function challenge(error?: 'invalid_token', description?: string, extra: Record<string, string> = {}): string {
  const parts = [`realm="${REALM}"`];
  if (error) parts.push(`error="${error}"`);
  if (description) parts.push(`error_description="${description}"`);
  for (const [k, v] of Object.entries(extra)) parts.push(`${k}="${v}"`);
  return `Bearer ${parts.join(', ')}`;
}

/**
 * The request's Authorization header, refusing a request that sends it more than once. Node keeps
 * the first of repeated Authorization lines and drops the rest, while a proxy or gateway in front
 * may read, check or replace the last one: a credential a caller puts before the one a gateway adds
 * would win here. RFC 9110 allows the field once; which one counts must not depend on the reader.
 */
export function authorizationOf(request: FastifyRequest, extraChallenge: Record<string, string> = {}): string | undefined {
  if (headerCopies(request.raw, 'authorization') > 1) {
    throw new ServiceError('invalid_api_key', 'Send one Authorization header, not several', {
      headers: { 'www-authenticate': challenge('invalid_token', 'more than one Authorization header', extraChallenge) },
    });
  }
  return request.headers.authorization;
}

/**
 * Resolve the bearer key of a request from `ip`, or throw the precise 401, 429 (too many failed
 * checks from the address) or 503. Shared with the MCP endpoint.
 */
export async function authenticateHeader(
  db: Db,
  guard: CredentialGuard,
  ip: string,
  header: string | undefined,
  extraChallenge: Record<string, string> = {},
): Promise<AuthContext> {
  if (!header || header.trim() === '') {
    throw new ServiceError('api_key_required', 'Send your API key as `Authorization: Bearer svc_sk_…`', {
      headers: { 'www-authenticate': challenge(undefined, undefined, extraChallenge) },
    });
  }
  const m = /^Bearer[ ]+(\S+)\s*$/i.exec(header);
  const key = m?.[1];
  if (!key || !API_KEY_PATTERN.test(key)) {
    guard.failed(ip);
    throw new ServiceError('invalid_api_key', 'The Authorization header must be `Bearer svc_sk_…` with a valid API key', {
      headers: { 'www-authenticate': challenge('invalid_token', 'malformed API key', extraChallenge) },
    });
  }
  const result = await guard.check(ip, key, () => checkApiKey(db, key));
  if (!result.ok) {
    const text = { invalid_api_key: 'unknown API key', expired_api_key: 'the API key has expired', revoked_api_key: 'the API key was revoked' }[result.code];
    throw new ServiceError(result.code, `The API key is not valid: ${text}`, {
      headers: { 'www-authenticate': challenge('invalid_token', text, extraChallenge) },
    });
  }
  return { orgId: result.orgId, keyId: result.keyId, plan: result.plan };
}

export default fp(
  async function authPlugin(app: FastifyInstance, opts: { orgRate: BucketLimits; credentials: GuardLimits }) {
    const orgRate = new OrgRate(opts.orgRate);
    app.decorate('orgRate', orgRate);
    const guard = new CredentialGuard(opts.credentials);
    app.decorate('credentialGuard', guard);
    app.metrics.watchCredentials(guard);
    app.decorateRequest('auth', null);
    app.decorate('authenticate', async function authenticate(request: FastifyRequest) {
      const auth = await authenticateHeader(app.db, guard, request.ip, authorizationOf(request));
      request.auth = auth;
      // After the credential, never before: only a caller who already holds the organization's key
      // can meet its bucket, so a 429 tells nobody else anything.
      orgRate.admit(auth.orgId);
    });
  },
  { name: 'auth' },
);
