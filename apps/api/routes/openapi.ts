// GET /openapi.json (generated from the zod schemas) and the interactive API reference at /docs,
// rendered by swagger-ui-dist's static files served from here: no CDN, works offline.
import { readFile } from 'node:fs/promises';
import { createRequire } from 'node:module';
import path from 'node:path';
import type { FastifyInstance } from 'fastify';
import type { ZodTypeProvider } from 'fastify-type-provider-zod';
import { z } from 'zod';
import { OPENAPI_PATH, REFERENCE_PATH } from '../../../shared/openapi/document.ts';

const require = createRequire(import.meta.url);
const SWAGGER_DIR = path.dirname(require.resolve('swagger-ui-dist/package.json'));
// A Map, not an object: the file name is user text (`constructor`, `__proto__` must be misses).
const ASSETS = new Map<string, string>([
  ['swagger-ui.css', 'text/css; charset=utf-8'],
  ['swagger-ui-bundle.js', 'text/javascript; charset=utf-8'],
  ['swagger-ui-standalone-preset.js', 'text/javascript; charset=utf-8'],
  ['favicon-32x32.png', 'image/png'],
]);

const INIT_JS = `window.addEventListener('load', function () {
  window.ui = SwaggerUIBundle({
    url: ${JSON.stringify(OPENAPI_PATH)},
    dom_id: '#reference',
    deepLinking: true,
    presets: [SwaggerUIBundle.presets.apis, SwaggerUIStandalonePreset],
    layout: 'BaseLayout',
    tryItOutEnabled: false,
    persistAuthorization: false,
  });
});
`;

const PAGE = `<!doctype html>
<html lang="en"><head><meta charset="utf-8"><meta name="viewport" content="width=device-width, initial-scale=1">
<title>API reference — Workflow Query Service</title>
<link rel="stylesheet" href="${REFERENCE_PATH}/assets/swagger-ui.css">
<link rel="icon" type="image/png" href="${REFERENCE_PATH}/assets/favicon-32x32.png">
<link rel="service-desc" type="application/vnd.oai.openapi+json" href="${OPENAPI_PATH}">
</head><body>
<noscript><p>This reference needs JavaScript. The machine-readable contract is at <a href="${OPENAPI_PATH}">${OPENAPI_PATH}</a>.</p></noscript>
<div id="reference"></div>
<script src="${REFERENCE_PATH}/assets/swagger-ui-bundle.js"></script>
<script src="${REFERENCE_PATH}/assets/swagger-ui-standalone-preset.js"></script>
<script src="${REFERENCE_PATH}/assets/init.js"></script>
</body></html>`;

export default async function openapiRoutes(fastify: FastifyInstance) {
  const app = fastify.withTypeProvider<ZodTypeProvider>();
  const service = { tags: ['Service'], security: [] };
  let cached: { base: string; body: string } | undefined;
  // Untyped instance: the body is sent as prepared JSON text, not serialized per request.
  fastify.get(
    OPENAPI_PATH,
    {
      schema: {
        operationId: 'openapi',
        summary: 'This document (generated from the routes\' schemas)',
        ...service,
        response: { 200: { description: 'OpenAPI 3.1', content: { 'application/json': { schema: z.record(z.string(), z.unknown()) } } } },
      },
    },
    async (_request, reply) => {
      const base = app.baseUrl();
      // @fastify/swagger builds the document once from the registered routes; the server URL is
      // known only once the listener is bound.
      if (!cached || cached.base !== base) cached = { base, body: JSON.stringify({ ...app.swagger(), servers: [{ url: base }] }) };
      return reply.type('application/json; charset=utf-8').header('cache-control', 'public, max-age=300').send(cached.body);
    },
  );

  const html = { description: 'HTML', content: { 'text/html': { schema: z.string() } } };
  app.get(REFERENCE_PATH, { schema: { operationId: 'reference', summary: 'Interactive API reference (swagger-ui, served locally)', ...service, response: { 200: html } } }, async (_request, reply) =>
    reply
      .type('text/html; charset=utf-8')
      .header('content-security-policy', "default-src 'self'; img-src 'self' data:; style-src 'self' 'unsafe-inline'; script-src 'self'; connect-src 'self'")
      .send(PAGE),
  );

  const assetCache = new Map<string, Buffer>();
  // The reference page's static files: not part of the API (hidden from the document).
  app.get(`${REFERENCE_PATH}/assets/:file`, { schema: { hide: true, params: z.strictObject({ file: z.string() }) } as never }, async (request, reply) => {
    const file = (request.params as { file: string }).file;
    if (file === 'init.js') return reply.type('text/javascript; charset=utf-8').header('cache-control', 'public, max-age=300').send(INIT_JS);
    const type = ASSETS.get(file);
    if (!type) return reply.sendError('route_not_found', { message: `No reference asset ${file}` });
    let bytes = assetCache.get(file);
    if (!bytes) {
      bytes = await readFile(path.join(SWAGGER_DIR, file));
      assetCache.set(file, bytes);
    }
    return reply.type(type).header('cache-control', 'public, max-age=86400').send(bytes);
  });
}
