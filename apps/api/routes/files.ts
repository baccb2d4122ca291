// POST /v1/files: upload one file (raw application/octet-stream body, name in X-File-Name).
// The body is counted while it streams in and cut off past 10 MB; nothing past the limit is kept.
import type { IncomingMessage } from 'node:http';
import type { FastifyInstance } from 'fastify';
import type { ZodTypeProvider } from 'fastify-type-provider-zod';
import { fileTypeFromBuffer } from 'file-type';
import { z } from 'zod';
import { ServiceError } from '../../../shared/errors.ts';
import { createFile, MAX_FILE_BYTES } from '../../../shared/db/files.ts';
import { ErrorEnvelope, FileResponse } from '../../../shared/openapi/schemas.ts';
import { useZod } from './zod-scope.ts';

export const MAX_FILE_NAME_CHARS = 160;
/** After a 413, how long and how much more of the body is read and thrown away before the
 * connection is closed, so the client can read the answer instead of a reset. */
const LINGER_MS = 2_000;
const LINGER_BYTES = 1024 * 1024;

/** The decoded file name, or why X-File-Name is refused. */
export function parseFileName(raw: string | undefined): { ok: true; name: string } | { ok: false; message: string } {
  if (raw === undefined) return { ok: false, message: 'is required (the URI-encoded file name)' };
  let name: string;
  try {
    name = decodeURIComponent(raw);
  } catch {
    return { ok: false, message: 'is not valid URI encoding' };
  }
  if (name.trim() === '') return { ok: false, message: 'must not be empty' };
  if ([...name].length > MAX_FILE_NAME_CHARS) return { ok: false, message: `must be at most ${MAX_FILE_NAME_CHARS} characters once decoded` };
  // Cc covers NUL, the other C0 controls, DEL and C1; U+2028/2029 end lines too.
  if (/[\p{Cc}\u2028\u2029]/u.test(name)) return { ok: false, message: 'must not contain control characters' };
  if (/[/\\]/.test(name)) return { ok: false, message: 'must be a file name, without path separators (/ or \\)' };
  if (name === '.' || name === '..') return { ok: false, message: 'must not be . or ..' };
  return { ok: true, name };
}

const utf8 = new TextDecoder('utf-8', { fatal: true });

/** Content type from the bytes: a known signature, else text/plain for UTF-8 text, else binary. */
export async function sniffContentType(bytes: Buffer): Promise<string> {
  const known = await fileTypeFromBuffer(bytes);
  if (known) return known.mime;
  try {
    const text = utf8.decode(bytes);
    // Valid UTF-8 that holds NUL or other controls (besides tab, newlines, form feed) is binary.
    if (!/[\u0000-\u0008\u000B\u000E-\u001F\u007F]/.test(text)) return 'text/plain';
  } catch {
    /* not UTF-8 */
  }
  return 'application/octet-stream';
}

const tooLarge = () =>
  new ServiceError('payload_too_large', `The file is larger than ${MAX_FILE_BYTES} bytes (10 MB)`, {
    param: 'body',
    details: { limit_bytes: MAX_FILE_BYTES },
    headers: { connection: 'close' },
  });

/** Uploads cut off past the limit, waiting for their answer to be sent. */
const lingering = new WeakMap<IncomingMessage, () => void>();

/**
 * Stop taking the body: nothing more is read until the answer has gone out; then at most
 * LINGER_BYTES more are read and thrown away, for at most LINGER_MS, and the connection is closed.
 * An endless upload is cut off, and the client gets to read the 413 rather than a reset (closing
 * with unread bytes would reset the connection and could drop the answer).
 */
function cutOff(raw: IncomingMessage, payload: NodeJS.ReadableStream) {
  payload.removeAllListeners('data');
  payload.pause();
  lingering.set(raw, () => {
    let after = 0;
    const close = () => {
      clearTimeout(timer);
      raw.socket.destroy();
    };
    const timer = setTimeout(close, LINGER_MS);
    timer.unref();
    payload.on('data', (chunk: Buffer) => {
      if ((after += chunk.length) > LINGER_BYTES) close();
    });
    payload.on('end', () => clearTimeout(timer));
    payload.resume();
  });
}

const FileNameHeader = z
  .string()
  .optional()
  .superRefine((raw, ctx) => {
    const r = parseFileName(raw);
    if (!r.ok) ctx.addIssue({ code: 'custom', message: r.message });
  })
  .describe(`URI-encoded file name, at most ${MAX_FILE_NAME_CHARS} characters once decoded; no path separators or control characters`);

export default async function filesRoutes(app: FastifyInstance) {
  useZod(app, (err) =>
    err.code === 'FST_ERR_CTP_INVALID_MEDIA_TYPE'
      ? new ServiceError('unsupported_media_type', 'Send the file as the raw body with Content-Type: application/octet-stream', { param: 'Content-Type' })
      : undefined,
  );
  // Only raw bytes are accepted here: any other body type is 415.
  app.removeAllContentTypeParsers();
  app.addContentTypeParser('application/octet-stream', (request, payload, done) => {
    const declared = Number(request.headers['content-length']);
    if (Number.isFinite(declared) && declared > MAX_FILE_BYTES) {
      cutOff(request.raw, payload);
      return done(tooLarge());
    }
    const chunks: Buffer[] = [];
    let size = 0;
    let failed = false;
    payload.on('data', (chunk: Buffer) => {
      if (failed) return;
      size += chunk.length;
      if (size > MAX_FILE_BYTES) {
        failed = true;
        chunks.length = 0;
        cutOff(request.raw, payload);
        return done(tooLarge());
      }
      chunks.push(chunk);
    });
    payload.on('end', () => {
      if (!failed) done(null, Buffer.concat(chunks, size));
    });
    payload.on('error', (err) => {
      if (!failed) done(err);
    });
  });
  app.addHook('onResponse', async (request) => {
    lingering.get(request.raw)?.();
  });

  app.withTypeProvider<ZodTypeProvider>().route({
    method: 'POST',
    url: '/v1/files',
    bodyLimit: MAX_FILE_BYTES,
    schema: {
      summary: 'Upload a file',
      description: 'Raw bytes as application/octet-stream, up to 10 MB; the name in X-File-Name. The file is private to the organization and expires after 30 days; use its id in attachments[].id.',
      headers: z.looseObject({ 'x-file-name': FileNameHeader }),
      response: { 201: FileResponse, 400: ErrorEnvelope, 401: ErrorEnvelope, 413: ErrorEnvelope, 415: ErrorEnvelope },
    },
    // Authenticate before the body is read: anonymous uploads are refused without taking them in.
    onRequest: app.authenticate,
    handler: async (request, reply) => {
      const name = parseFileName(request.headers['x-file-name'] as string | undefined);
      if (!name.ok) throw new ServiceError('invalid_input', `X-File-Name ${name.message}`, { param: 'X-File-Name', details: { issues: [{ path: 'X-File-Name', message: name.message }] } });
      const bytes = request.body;
      if (!Buffer.isBuffer(bytes) || bytes.length === 0) {
        throw new ServiceError('invalid_input', 'The file is empty; send its bytes as the body', { param: 'body', details: { issues: [{ path: 'body', message: 'must not be empty' }] } });
      }
      const file = await createFile(app.db, { orgId: request.auth!.orgId, name: name.name, contentType: await sniffContentType(bytes), bytes });
      return reply.code(201).send({ success: true as const, data: file });
    },
  });
}
