// GET /v1/icons/{sha256}: site icons by content hash. The hash is the identity, so the bytes
// never change: strong ETag (the hash) and immutable caching.
import type { FastifyInstance } from 'fastify';
import { ServiceError } from '../../../shared/errors.ts';

const SHA256 = /^[0-9a-f]{64}$/;
const ALLOWED_TYPES = /^image\/(png|jpeg|gif|webp|avif|svg\+xml|x-icon|vnd\.microsoft\.icon)$/;

export default async function iconRoutes(app: FastifyInstance) {
  app.get<{ Params: { sha256: string } }>('/v1/icons/:sha256', async (request, reply) => {
    const hash = request.params.sha256;
    if (!SHA256.test(hash)) {
      throw new ServiceError('invalid_input', 'sha256 must be 64 lower-case hexadecimal characters', {
        param: 'sha256',
        details: { issues: [{ path: 'sha256', message: 'must match ^[0-9a-f]{64}$' }] },
      });
    }
    const etag = `"${hash}"`;
    const cache = { etag, 'cache-control': 'public, max-age=31536000, immutable' };
    const inm = request.headers['if-none-match'];
    if (inm && inm.split(',').some((t) => t.trim() === etag || t.trim() === `W/${etag}` || t.trim() === '*')) {
      // Only answer 304 for bytes we hold.
      const exists = await app.db.query('SELECT 1 FROM icons WHERE sha256 = $1', [hash]);
      if (exists.rowCount) return reply.code(304).headers(cache).send();
    }
    const r = await app.db.query<{ content_type: string; bytes: Buffer }>('SELECT content_type, bytes FROM icons WHERE sha256 = $1', [hash]);
    const row = r.rows[0];
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
  });
}
