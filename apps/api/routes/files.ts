// POST /v1/files: upload one file (raw application/octet-stream body, name in X-File-Name).
// The body is counted while it streams in and cut off past 10 MB; nothing past the limit is kept.
import type { IncomingMessage } from 'node:http';
import type { FastifyError, FastifyInstance, FastifyRequest } from 'fastify';
import type { ZodTypeProvider } from 'fastify-type-provider-zod';
import { fileTypeFromBuffer } from 'file-type';
import { z } from 'zod';
import { ServiceError } from '../../../shared/errors.ts';
import { checkFileStorage, createFile, MAX_FILE_BYTES } from '../../../shared/db/files.ts';
import { FileResponse } from '../../../shared/openapi/schemas.ts';
import { BEARER, errors, named, rawBody } from '../../../shared/openapi/document.ts';
import { filesUploadBytesPerOrg, type Config } from '../../../shared/config.ts';
import { OrgSlots } from '../services/org-slots.ts';
import { ByteBudget, OrgByteBudget } from '../services/byte-budget.ts';
import { contentTypeRefusal } from '../plugins/errors.ts';
import { headerCopies } from '../services/header-copies.ts';
import { displayTextProblem, uriEncodedProblem } from '../../../shared/accounts/display-text.ts';

export const MAX_FILE_NAME_CHARS = 160;

/** The decoded file name, or why X-File-Name is refused. */
export function parseFileName(raw: string | undefined): { ok: true; name: string } | { ok: false; message: string } {
  if (raw === undefined) return { ok: false, message: 'is required (the URI-encoded file name)' };
  // Raw non-ASCII bytes arrive as Latin-1 ("café" as "cafÃ©"): a name nobody typed.
  const encoding = uriEncodedProblem(raw);
  if (encoding) return { ok: false, message: encoding };
  let name: string;
  try {
    name = decodeURIComponent(raw);
  } catch {
    return { ok: false, message: 'is not valid URI encoding' };
  }
  if (name.trim() === '') return { ok: false, message: 'must not be empty' };
  if ([...name].length > MAX_FILE_NAME_CHARS) return { ok: false, message: `must be at most ${MAX_FILE_NAME_CHARS} characters once decoded` };
  // Control characters, direction overrides and invisible characters: the rule every name the
  // service shows follows (shared/accounts/display-text.ts), the joiners emoji and Persian or Indic
  // words need included.
  const problem = displayTextProblem(name);
  if (problem) return { ok: false, message: problem };
  if (/[/\\]/.test(name)) return { ok: false, message: 'must be a file name, without path separators (/ or \\)' };
  if (name === '.' || name === '..') return { ok: false, message: 'must not be . or ..' };
  return { ok: true, name };
}

/**
 * The decoded X-File-Name of a request. Sent more than once it is refused: Node joins the copies
 * with ", " into one name nobody sent (two names a.txt and b.txt made a file "a.txt, b.txt"), and a
 * proxy in front may have acted on another copy.
 */
function fileNameOf(request: FastifyRequest): string {
  const refuse = (message: string) => new ServiceError('invalid_input', `X-File-Name ${message}`, { param: 'X-File-Name', details: { issues: [{ path: 'X-File-Name', message }] } });
  if (headerCopies(request.raw, 'x-file-name') > 1) throw refuse('must be sent once');
  const header = request.headers['x-file-name'];
  const r = parseFileName(typeof header === 'string' ? header : undefined);
  if (!r.ok) throw refuse(r.message);
  return r.name;
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
    details: { limit_bytes: MAX_FILE_BYTES },
  });

/**
 * After a 413: how much more of the body is read and thrown away once the answer is out, so that
 * clients that only read the answer after sending everything (fetch/undici does) get it, and how
 * long. A declared remainder up to LINGER_DECLARED_BYTES is taken in full; anything else (chunked
 * bodies, huge declared sizes) only LINGER_BYTES more. Past the budget nothing more is read (the
 * sender is held back by TCP), and the connection is closed LINGER_MS after the answer went out.
 */
const LINGER_BYTES = 8 * 1024 * 1024;
const LINGER_DECLARED_BYTES = 16 * 1024 * 1024;
const LINGER_MS = 5_000;

/** Uploads cut off past the limit, waiting for their answer to be written. */
const lingering = new WeakMap<IncomingMessage, () => void>();

/**
 * Stop taking the body: nothing more is read until the 413 has been written; then at most the
 * linger budget is read and dropped. Past the budget reading stops rather than the socket being
 * destroyed at once: closing a socket with unread bytes in its receive buffer sends a reset, and a
 * reset that reaches a busy client before it has parsed the 413 loses the answer (the client sees
 * ECONNRESET, not 413). The connection is closed when the body ends or LINGER_MS after the answer,
 * whichever is first. Nothing past the limit is ever kept in memory.
 */
function cutOff(raw: IncomingMessage, payload: NodeJS.ReadableStream, declaredRemainder: number | null) {
  payload.removeAllListeners('data');
  payload.pause();
  const budget = declaredRemainder !== null && declaredRemainder <= LINGER_DECLARED_BYTES ? declaredRemainder : LINGER_BYTES;
  lingering.set(raw, () => {
    let taken = 0;
    const timer = setTimeout(() => raw.socket?.destroy(), LINGER_MS);
    timer.unref();
    const drop = (chunk: Buffer) => {
      if ((taken += chunk.length) <= budget) return;
      payload.removeListener('data', drop);
      payload.pause();
    };
    payload.on('data', drop);
    payload.on('end', () => clearTimeout(timer));
    payload.resume();
  });
}

const FileNameHeader = z
  .string()
  // For the document, what a header pattern can say (not blank, not . or .., no raw path
  // separator); parseFileName enforces it and the rest on the decoded name.
  .meta({ minLength: 1, pattern: '^(?![ \\t]*$)(?!\\.\\.?$)[^/\\\\]+$' })
  .superRefine((raw, ctx) => {
    const r = parseFileName(raw);
    if (!r.ok) ctx.addIssue({ code: 'custom', message: r.message });
  })
  .describe(`URI-encoded file name, at most ${MAX_FILE_NAME_CHARS} characters once decoded; no path separators or control characters`);

type FilesConfig = Pick<
  Config,
  | 'FILES_MAX_BYTES_PER_ORG'
  | 'FILES_MAX_PER_ORG'
  | 'FILES_UPLOADS_PER_ORG'
  | 'FILES_UPLOADS_IN_FLIGHT_MAX_BYTES'
  | 'FILES_UPLOADS_IN_FLIGHT_MAX_BYTES_PER_ORG'
  | 'FILES_UPLOAD_IDLE_TIMEOUT_MS'
>;

/** The body's declared length, or null when it declares none (chunked) or none that can be read. */
function declaredLength(headers: IncomingMessage['headers']): number | null {
  const raw = headers['content-length'];
  const declared = Number(raw);
  if (raw === undefined || headers['transfer-encoding'] !== undefined || !Number.isSafeInteger(declared) || declared < 0) return null;
  return declared;
}

/**
 * What an upload takes of the in-flight bounds before its body is read: its declared length (Node
 * delivers exactly that many bytes), or the largest file when it declares none (chunked). One that
 * declares more than the largest file takes nothing: it is refused 413 unread.
 */
function bytesToReserve(headers: IncomingMessage['headers']): number {
  const declared = declaredLength(headers);
  if (declared === null) return MAX_FILE_BYTES;
  return declared > MAX_FILE_BYTES ? 0 : declared;
}

/**
 * What one upload holds of the in-flight bounds (its organization's slot and bytes, the process's
 * bytes), from before its body is read until it is answered or its connection goes, and never
 * before the file it carries is stored or refused: a client that drops its connection once its
 * body is sent leaves the handler holding the bytes (and, storing them, a pooled connection waiting
 * on the organization's lock), so they stay counted until the handler ends.
 */
class Hold {
  private readonly releases: Array<() => void> = [];
  private ended = false;
  private storing = false;

  constructor(response: NodeJS.EventEmitter) {
    const end = () => {
      this.ended = true;
      if (!this.storing) this.release();
    };
    response.once('close', end);
    response.once('finish', end);
  }

  /** Whether the upload was answered or its connection went (nothing taken now would be given back). */
  get over(): boolean {
    return this.ended;
  }

  add(release: () => void): void {
    if (this.ended && !this.storing) release();
    else this.releases.push(release);
  }

  /** Run the storing of the file: nothing is given back before it ends. */
  async store<T>(fn: () => Promise<T>): Promise<T> {
    this.storing = true;
    try {
      return await fn();
    } finally {
      this.storing = false;
      if (this.ended) this.release();
    }
  }

  private release(): void {
    for (const r of this.releases.splice(0)) r();
  }
}

const holds = new WeakMap<IncomingMessage, Hold>();

export default async function filesRoutes(app: FastifyInstance, opts: { config: FilesConfig }) {
  const quota = { maxBytes: opts.config.FILES_MAX_BYTES_PER_ORG, maxFiles: opts.config.FILES_MAX_PER_ORG };
  // Uploads of each organization being received by this process: each holds its bytes in memory
  // (up to 10 MB) until stored.
  const inFlight = new OrgSlots(opts.config.FILES_UPLOADS_PER_ORG);
  // ...and of all organizations together, in bytes: the per-organization bound times the number of
  // organizations is no bound on the process's memory.
  const inFlightBytes = new ByteBudget(opts.config.FILES_UPLOADS_IN_FLIGHT_MAX_BYTES);
  // ...of which one organization holds at most its share, so that a few organizations (sign-up is
  // open) cannot hold all of it between them with slow uploads.
  const orgBytesShare = filesUploadBytesPerOrg(opts.config);
  const orgBytes = new OrgByteBudget(orgBytesShare);
  const idleMs = opts.config.FILES_UPLOAD_IDLE_TIMEOUT_MS;
  // This scope's own wording for a wrong body type; everything else goes to the central handler.
  app.setErrorHandler((err: FastifyError) => {
    if (err.code === 'FST_ERR_CTP_INVALID_MEDIA_TYPE' || err.code === 'FST_ERR_ROUTE_MISSING_CONTENT_TYPE') {
      const { message, ...where } = contentTypeRefusal('Send the file as the raw body with Content-Type: application/octet-stream', 'application/octet-stream');
      throw new ServiceError('unsupported_media_type', message, where);
    }
    throw err;
  });
  // Only raw bytes are accepted here: any other body type is 415.
  app.removeAllContentTypeParsers();
  app.addContentTypeParser('application/octet-stream', (request, payload, done) => {
    const declared = Number(request.headers['content-length']);
    const known = Number.isFinite(declared) && request.headers['content-length'] !== undefined;
    if (known && declared > MAX_FILE_BYTES) {
      cutOff(request.raw, payload, declared);
      return done(tooLarge());
    }
    const chunks: Buffer[] = [];
    let size = 0;
    let failed = false;
    // A sender that sends nothing for idleMs is answered 408 and the connection closed (Fastify
    // closes it after a parser error), so what the upload holds of the in-flight bounds goes back
    // then, not after REQUEST_TIMEOUT_MS. Nothing more of its body is read.
    let idle: NodeJS.Timeout | undefined;
    const stopIdle = () => clearTimeout(idle);
    const timedOut = () => {
      if (failed) return;
      failed = true;
      chunks.length = 0;
      payload.removeAllListeners('data');
      payload.pause();
      done(
        new ServiceError('request_timeout', `No bytes of the file arrived for ${idleMs / 1000} s; send it again, whole`, {
          details: { idle_timeout_ms: idleMs },
        }),
      );
    };
    const armIdle = () => {
      clearTimeout(idle);
      idle = setTimeout(timedOut, idleMs);
    };
    armIdle();
    request.raw.once('close', stopIdle);
    payload.on('data', (chunk: Buffer) => {
      if (failed) return;
      armIdle();
      size += chunk.length;
      if (size > MAX_FILE_BYTES) {
        failed = true;
        stopIdle();
        chunks.length = 0;
        cutOff(request.raw, payload, known ? declared - size : null);
        return done(tooLarge());
      }
      chunks.push(chunk);
    });
    payload.on('end', () => {
      stopIdle();
      if (failed) return;
      const body = Buffer.concat(chunks, size);
      // The listener's closure lives as long as the request: let the chunks go, not hold the bytes twice.
      chunks.length = 0;
      done(null, body);
    });
    payload.on('error', (err) => {
      stopIdle();
      if (!failed) done(err);
    });
  });

  // Fastify answers a parser error with `Connection: close`, and Node then closes at once, which
  // can reset the connection before the client has read the 413. The linger closes it instead.
  app.addHook('onSend', async (request, reply) => {
    if (lingering.has(request.raw)) reply.removeHeader('connection');
  });
  app.addHook('onResponse', async (request) => {
    lingering.get(request.raw)?.();
  });

  app.withTypeProvider<ZodTypeProvider>().route({
    method: 'POST',
    url: '/v1/files',
    bodyLimit: MAX_FILE_BYTES,
    schema: {
      operationId: 'uploadFile',
      summary: 'Upload a file',
      tags: ['Files'],
      security: BEARER,
      description:
        'Raw bytes as application/octet-stream, up to 10 MB; the name in X-File-Name. The file is private to the organization and expires after 30 days; use its id in attachments[].id. An organization keeps at most FILES_MAX_BYTES_PER_ORG bytes (1 GiB) in at most FILES_MAX_PER_ORG files (1000) at once (429 file_storage_limit) and sends at most FILES_UPLOADS_PER_ORG uploads at once to one API process (4; 429 organization_concurrency_limit). An API process receives at most FILES_UPLOADS_IN_FLIGHT_MAX_BYTES (64 MiB) of uploads of all organizations at once, counting Content-Length or 10 MB without one; past it, 503 admission_unavailable with Retry-After, before the body is read. One organization holds at most FILES_UPLOADS_IN_FLIGHT_MAX_BYTES_PER_ORG of it (a quarter, 16 MiB; 429 organization_concurrency_limit). An organization at its stored-files limit is refused before the body is read. A body from which no bytes arrive for FILES_UPLOAD_IDLE_TIMEOUT_MS (10 s) is 408 request_timeout and the connection closed. A Content-Encoding other than identity is 415 unsupported_media_type.',
      headers: z.looseObject({ 'x-file-name': FileNameHeader }),
      response: { 201: named('FileResponse', FileResponse) },
      // 408: a body not received whole within REQUEST_TIMEOUT_MS (apps/api/plugins/errors.ts), which
      // a 10 MB upload over a slow link is the likeliest of all requests to meet, or one idle for
      // FILES_UPLOAD_IDLE_TIMEOUT_MS (the parser above).
      ...errors(400, 401, 408, 413, 415, 429, 503),
      ...rawBody('application/octet-stream', "The file's bytes, 1 byte to 10 MB"),
    },
    // Authenticate before the body is read: anonymous uploads are refused without taking them in.
    onRequest: app.authenticate,
    // A Content-Encoding other than identity is refused before the body is read, as on every route
    // (plugins/content-encoding.ts): the body would be stored as sent, so a gzip upload became a
    // file of its compressed bytes, with their hash and sniffed type, not the file's.
    config: { contentEncodingHint: "send the file's bytes as they are, not compressed" },
    // A bad name, an upload past the organization's in-flight limits or its stored
    // files, and one past the process's in-flight bytes are refused before the body is read. The
    // organization's own limits are checked first: an organization alone past one is told so
    // (429), whatever others send.
    preParsing: async (request, reply) => {
      fileNameOf(request);
      const orgId = request.auth!.orgId;
      const releaseSlot = inFlight.take(orgId);
      if (!releaseSlot) {
        throw new ServiceError('organization_concurrency_limit', `The organization has ${opts.config.FILES_UPLOADS_PER_ORG} uploads in progress; send this one when one of them has finished`, {
          headers: { 'retry-after': '1' },
          details: { uploads_in_flight: opts.config.FILES_UPLOADS_PER_ORG },
        });
      }
      // Everything taken from here on is given back once the upload is answered or its connection
      // goes, and not while its file is being stored (Hold).
      const hold = new Hold(reply.raw);
      hold.add(releaseSlot);
      holds.set(request.raw, hold);
      // An organization whose stored files are at their limit is told so before it sends a body
      // that could not be stored (createFile checks again, atomically, when storing). The slot
      // bounds how many of these checks one organization runs at once. An empty body (refused
      // anyway) and one over 10 MB (413 unread) are not looked at.
      const declared = declaredLength(request.headers);
      if (declared === null || (declared > 0 && declared <= MAX_FILE_BYTES)) await checkFileStorage(app.db, orgId, declared, quota);
      if (hold.over) return; // the client left meanwhile: nothing more is taken
      const reserve = bytesToReserve(request.headers);
      const releaseOrgBytes = orgBytes.take(orgId, reserve);
      if (!releaseOrgBytes) {
        throw new ServiceError(
          'organization_concurrency_limit',
          `The organization's uploads in progress on this server count as many bytes as it may send at once (${orgBytesShare}; one without Content-Length counts ${MAX_FILE_BYTES}); send this one when one of them has finished`,
          { headers: { 'retry-after': '1' }, details: { upload_bytes_in_flight: orgBytesShare } },
        );
      }
      hold.add(releaseOrgBytes);
      const releaseBytes = inFlightBytes.take(reserve);
      if (!releaseBytes) {
        // Nothing about what others send: only that this process is receiving as much as it takes.
        throw new ServiceError('admission_unavailable', 'This server is receiving as many uploads as it can hold at once; send this one again after Retry-After', {
          headers: { 'retry-after': '2' },
          details: { reason: 'uploads_in_flight' },
        });
      }
      hold.add(releaseBytes);
    },
    handler: async (request, reply) => {
      const name = fileNameOf(request);
      const bytes = request.body;
      // Fastify parses no body that is empty and untyped, so its type was never checked: a missing
      // type is 415 whatever the body, as any other type (checked before the body's own rules).
      if (request.headers['content-type'] === undefined) {
        const { message, ...where } = contentTypeRefusal('Send the file as the raw body with Content-Type: application/octet-stream', 'application/octet-stream');
        throw new ServiceError('unsupported_media_type', message, where);
      }
      if (!Buffer.isBuffer(bytes) || bytes.length === 0) {
        // The body as a whole (the file): no param, as every whole-body refusal.
        throw new ServiceError('invalid_input', 'The file is empty; send its bytes as the body', { details: { issues: [{ path: '', message: 'must not be empty' }] } });
      }
      const store = async () => createFile(app.db, { orgId: request.auth!.orgId, name, contentType: await sniffContentType(bytes), bytes }, quota);
      const hold = holds.get(request.raw);
      const file = hold ? await hold.store(store) : await store();
      return reply.code(201).send({ success: true as const, data: file });
    },
  });
}
