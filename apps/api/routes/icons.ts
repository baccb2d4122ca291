// GET /v1/icons/{sha256}: site icons by content hash. The hash is the identity, so the bytes
// never change: strong ETag (the hash) and immutable caching.
import type { FastifyInstance } from 'fastify';
import type { ZodTypeProvider } from 'fastify-type-provider-zod';
import { z } from 'zod';
import { ServiceError } from '../../../shared/errors.ts';
import { errors } from '../../../shared/openapi/document.ts';

const ALLOWED_TYPES = /^image\/(png|jpeg|gif|webp|avif|svg\+xml|x-icon|vnd\.microsoft\.icon)$/;

const IconParams = z.strictObject({ sha256: z.string().regex(/^[0-9a-f]{64}$/, 'must match ^[0-9a-f]{64}$').describe('SHA-256 of the bytes, lower-case hex') });
// Loose: the other request headers pass through untouched.
const IconHeaders = z.looseObject({ 'if-none-match': z.string().optional().describe('the ETag held; 304 when it matches') });

/** Sent as a Buffer (never serialized); documented as binary. */
const IconBytes = z.custom<Buffer>((v) => Buffer.isBuffer(v)).meta({ type: 'string', contentMediaType: 'image/*', description: 'the icon bytes' });

export default async function iconRoutes(fastify: FastifyInstance) {
  const app = fastify.withTypeProvider<ZodTypeProvider>();
  app.get(
    '/v1/icons/:sha256',
    {
      config: { unavailableCode: 'catalog_unavailable' },
      schema: {
        operationId: 'getIcon',
        summary: 'Site icon by content hash (immutable; strong ETag)',
        tags: ['Catalog'],
        security: [],
        params: IconParams,
        headers: IconHeaders,
        response: {
          200: {
            description: 'The icon bytes',
            headers: { ETag: { type: 'string', description: 'the hash, quoted' }, 'Cache-Control': { type: 'string', description: 'immutable for a year' } },
            content: { 'image/*': { schema: IconBytes } },
          },
          304: z.undefined().describe('Not modified'),
        },
        ...errors(400, 404, 429, 503),
      },
    },
    async (request, reply) => {
      const hash = request.params.sha256;
      const etag = `"${hash}"`;
      const cache = { etag, 'cache-control': 'public, max-age=31536000, immutable' };
      const inm = request.headers['if-none-match'];
      const revalidating = !!inm && inm.split(',').some((t) => t.trim() === etag || t.trim() === `W/${etag}` || t.trim() === '*');
      // A keyless read (services/keyless-gate.ts): bounded at once, per process and per address.
      const row = await app.keylessReads.run(request.ip, async () => {
        // Only answer 304 for bytes we hold.
        if (revalidating) {
          const exists = await app.db.query('SELECT 1 FROM icons WHERE sha256 = $1', [hash]);
          if (exists.rowCount) return 'not-modified' as const;
        }
        const r = await app.db.query<{ content_type: string; bytes: Buffer }>('SELECT content_type, bytes FROM icons WHERE sha256 = $1', [hash]);
        return r.rows[0];
      });
      if (row === 'not-modified') return reply.code(304).headers(cache).send(undefined);
      if (!row) throw new ServiceError('icon_not_found', `No icon ${hash}`, { param: 'sha256' });
      const type = ALLOWED_TYPES.test(row.content_type) ? row.content_type : 'application/octet-stream';
      reply.headers({
        ...cache,
        'content-type': type,
        'x-content-type-options': 'nosniff',
        // SVG can carry script: never let an icon run anything when opened directly.
        'content-security-policy': "default-src 'none'; style-src 'unsafe-inline'; sandbox",
        'cross-origin-resource-policy': 'cross-origin',
      });
      return reply.send(row.bytes);
    },
  );
}
