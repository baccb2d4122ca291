// GET /openapi.json (generated from the zod schemas) and the interactive API reference at /docs,
// rendered by swagger-ui-dist's static files served from here: no CDN, works offline.
import { readFile } from 'node:fs/promises';
import { createRequire } from 'node:module';
import path from 'node:path';
import type { FastifyInstance } from 'fastify';
import { buildOpenApiDocument, OPENAPI_PATH, REFERENCE_PATH } from '../../../shared/openapi/document.ts';

const require = createRequire(import.meta.url);
const SWAGGER_DIR = path.dirname(require.resolve('swagger-ui-dist/package.json'));
const ASSETS: Record<string, string> = {
  'swagger-ui.css': 'text/css; charset=utf-8',
  'swagger-ui-bundle.js': 'text/javascript; charset=utf-8',
  'swagger-ui-standalone-preset.js': 'text/javascript; charset=utf-8',
  'favicon-32x32.png': 'image/png',
};

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

export default async function openapiRoutes(app: FastifyInstance) {
  let cached: { base: string; body: string } | undefined;
  app.get(OPENAPI_PATH, async (_request, reply) => {
    const base = app.baseUrl();
    if (!cached || cached.base !== base) cached = { base, body: JSON.stringify(buildOpenApiDocument({ serverUrl: base })) };
    return reply.type('application/json; charset=utf-8').header('cache-control', 'public, max-age=300').send(cached.body);
  });

  app.get(REFERENCE_PATH, async (_request, reply) =>
    reply
      .type('text/html; charset=utf-8')
      .header('content-security-policy', "default-src 'self'; img-src 'self' data:; style-src 'self' 'unsafe-inline'; script-src 'self'; connect-src 'self'")
      .send(PAGE),
  );

  const assetCache = new Map<string, Buffer>();
  app.get<{ Params: { file: string } }>(`${REFERENCE_PATH}/assets/:file`, async (request, reply) => {
    const file = request.params.file;
    if (file === 'init.js') return reply.type('text/javascript; charset=utf-8').header('cache-control', 'public, max-age=300').send(INIT_JS);
    const type = ASSETS[file];
    if (!type) return reply.sendError('route_not_found', { message: `No reference asset ${file}` });
    let bytes = assetCache.get(file);
    if (!bytes) {
      bytes = await readFile(path.join(SWAGGER_DIR, file));
      assetCache.set(file, bytes);
    }
    return reply.type(type).header('cache-control', 'public, max-age=86400').send(bytes);
  });
}
