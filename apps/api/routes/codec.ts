// POST /codec/decode and /codec/encode: Temporal's remote codec protocol, so operators can read the
// encrypted payloads of histories (shared/temporal/payload-codec.ts) in the Temporal Web UI or with
// `temporal workflow show --codec-endpoint`. Registered only when CODEC_ENDPOINT_TOKEN is set.
//
// Access is the operator's token only: payloads hold every organization's inputs and outputs, so
// an organization's API key (which sees one organization) is refused like any other wrong token.
// The token is checked before the body is read, and the answer never says which payload failed
// beyond its index.
import { createHash, timingSafeEqual } from 'node:crypto';
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import type { ZodTypeProvider } from 'fastify-type-provider-zod';
import { z } from 'zod';
import type { Payload } from '@temporalio/common';
import type { Config } from '../../../shared/config.ts';
import { ServiceError } from '../../../shared/errors.ts';
import { CODEC_TOKEN, errors, named } from '../../../shared/openapi/document.ts';
import { decryptPayload, encryptPayload, PayloadDecryptError } from '../../../shared/temporal/payload-codec.ts';
import { loadPayloadKeyring } from '../../../shared/temporal/payload-keys.ts';

const Base64 = z.string().regex(/^[A-Za-z0-9+/]*={0,2}$/, 'must be base64');
const JsonPayload = z
  .object({
    metadata: z.record(z.string().max(256), Base64).optional().describe('Metadata values, base64'),
    data: Base64.optional().describe('The payload bytes, base64'),
  })
  .meta({ id: 'CodecPayload' });
const CodecBody = z.object({ payloads: z.array(JsonPayload).max(10_000) }).describe('Payloads in proto3 JSON form, as the Temporal Web UI and CLI send them');

type JsonPayloadT = z.infer<typeof JsonPayload>;
const b64 = (b: Uint8Array | null | undefined) => Buffer.from(b ?? new Uint8Array()).toString('base64');
const fromJson = (p: JsonPayloadT): Payload => ({
  metadata: Object.fromEntries(Object.entries(p.metadata ?? {}).map(([k, v]) => [k, Buffer.from(v, 'base64')])),
  data: Buffer.from(p.data ?? '', 'base64'),
});
const toJson = (p: Payload): JsonPayloadT => ({
  metadata: Object.fromEntries(Object.entries(p.metadata ?? {}).map(([k, v]) => [k, b64(v)])),
  data: b64(p.data),
});

const CORS_HEADERS = 'authorization, content-type, x-namespace';
const digest = (s: string) => createHash('sha256').update(s).digest();

export default async function codecRoutes(app: FastifyInstance, { config }: { config: Config }) {
  const token = config.CODEC_ENDPOINT_TOKEN;
  if (!token) return; // off: every /codec path is 404 route_not_found
  const expected = digest(token);
  const origins = new Set((config.CODEC_CORS_ORIGINS ?? '').split(',').map((o) => o.trim().replace(/\/$/, '')).filter(Boolean));
  const ring = () => loadPayloadKeyring(config);

  // CORS on every answer of these routes (errors too, so the UI can show a 401), for listed origins only.
  app.addHook('onRequest', async (request, reply) => {
    const origin = request.headers.origin;
    if (origin && origins.has(origin)) {
      reply.header('access-control-allow-origin', origin).header('access-control-allow-credentials', 'true').header('vary', 'Origin');
    }
  });

  const authenticate = async (request: FastifyRequest) => {
    const header = request.headers.authorization;
    const challenge = (error?: string) => `Bearer realm="temporal-codec"${error ? `, error="${error}"` : ''}`;
    if (!header) {
      throw new ServiceError('api_key_required', "Send the operator's codec token as `Authorization: Bearer …` (CODEC_ENDPOINT_TOKEN)", {
        headers: { 'www-authenticate': challenge() },
      });
    }
    const given = /^Bearer (\S+)$/i.exec(header)?.[1] ?? '';
    // Digests of equal length: the comparison takes the same time whatever was sent.
    if (!timingSafeEqual(digest(given), expected)) {
      throw new ServiceError('invalid_api_key', "This endpoint takes the operator's codec token only (not an organization's API key)", {
        headers: { 'www-authenticate': challenge('invalid_token') },
      });
    }
  };

  for (const op of ['decode', 'encode'] as const) {
    app.withTypeProvider<ZodTypeProvider>().route({
      method: 'POST',
      url: `/codec/${op}`,
      schema: {
        operationId: op === 'decode' ? 'codecDecode' : 'codecEncode',
        summary: op === 'decode' ? 'Decrypt Temporal payloads (remote codec)' : 'Encrypt Temporal payloads (remote codec)',
        description:
          op === 'decode'
            ? "Temporal's remote codec protocol for operators: decrypts payloads of workflow histories (`binary/encrypted`) with the service's payload keyring; other payloads come back unchanged. Only with the operator's codec token; present only where the deployment sets `CODEC_ENDPOINT_TOKEN`."
            : "Temporal's remote codec protocol for operators: encrypts payloads with the current payload key (what the Web UI uses to send signal or query arguments). Only with the operator's codec token; present only where the deployment sets `CODEC_ENDPOINT_TOKEN`.",
        tags: ['Service'],
        security: CODEC_TOKEN,
        headers: z.looseObject({ 'x-namespace': z.string().optional() }),
        body: named('CodecPayloads', CodecBody),
        response: { 200: CodecBody.describe('The payloads, in the same order') },
        ...errors(400, 401, 408, 413, 415),
      },
      // onRequest, not preValidation: the token before the body is even read (preValidation runs
      // after parsing, so a caller without the token could make this process take in and parse up to
      // the body limit, and learn 400/413/415 where it must get 401).
      onRequest: authenticate,
      handler: async (request, reply) => {
        const keys = await ring();
        const out: JsonPayloadT[] = [];
        for (const [i, p] of request.body.payloads.entries()) {
          try {
            out.push(toJson(op === 'decode' ? decryptPayload(keys, fromJson(p)) : encryptPayload(keys, fromJson(p))));
          } catch (err) {
            if (!(err instanceof PayloadDecryptError)) throw err;
            throw new ServiceError('invalid_input', `payloads[${i}]: ${err.message}`, {
              param: `payloads.${i}`,
              details: { issues: [{ path: `payloads.${i}`, message: err.message }] },
            });
          }
        }
        reply.header('cache-control', 'no-store');
        return { payloads: out };
      },
    });
    // Preflight of the Web UI (another origin): documented like every route.
    app.route({
      method: 'OPTIONS',
      url: `/codec/${op}`,
      schema: {
        operationId: op === 'decode' ? 'codecDecodePreflight' : 'codecEncodePreflight',
        summary: `CORS preflight of POST /codec/${op}`,
        description: 'Answers 204 with `Allow`; with the CORS headers only for an origin listed in `CODEC_CORS_ORIGINS`.',
        tags: ['Service'],
        security: [],
        response: { 204: z.undefined().describe('Preflight answered') },
      },
      handler: async (request: FastifyRequest, reply: FastifyReply) => {
        reply.header('allow', 'POST');
        if (reply.hasHeader('access-control-allow-origin')) {
          reply.header('access-control-allow-methods', 'POST').header('access-control-allow-headers', CORS_HEADERS).header('access-control-max-age', '600');
        }
        return reply.code(204).send();
      },
    });
  }
}
