// Strict-Transport-Security for an https deployment (HSTS_* in shared/config.ts): on every answer the
// API gives, so a browser that reached the service once over https never sends it plain http again.
import type { FastifyInstance } from 'fastify';
import { servesHttps, type Config } from '../../../shared/config.ts';

/** The header's value, or null: no https base URL (browsers ignore it over http anyway) or `off`. */
export function hstsHeader(config: Pick<Config, 'PUBLIC_BASE_URL' | 'HSTS_MAX_AGE_SECONDS' | 'HSTS_INCLUDE_SUBDOMAINS'>): string | null {
  if (!servesHttps(config) || config.HSTS_MAX_AGE_SECONDS === 'off') return null;
  return `max-age=${config.HSTS_MAX_AGE_SECONDS}${config.HSTS_INCLUDE_SUBDOMAINS ? '; includeSubDomains' : ''}`;
}

/**
 * Registered on the root instance before any route: set on the raw response at onRequest, so it is
 * on ordinary replies, error envelopes, 404s, console pages and hijacked streams (SSE, /mcp) alike
 * (Node merges headers set this way into writeHead's).
 */
export function registerTransportSecurity(app: FastifyInstance, config: Config) {
  const value = hstsHeader(config);
  if (!value) return;
  app.addHook('onRequest', (_request, reply, done) => {
    reply.raw.setHeader('strict-transport-security', value);
    done();
  });
}
