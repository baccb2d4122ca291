// Client ID Metadata Documents (the MCP spec's preferred registration): a client_id that is an https
// URL names a JSON document describing the client. It is fetched through the engines' private-address
// guard (activities/engines/net-guard.ts: every resolved address checked, IP literals and localhost
// refused), with a time and size bound and no redirects, and cached in oauth_clients.
// The engines' connector is reused so that SITE_HOST_MAP (dev and tests only, unset in production)
// can route a named host such as mcp-client.example.test to a local HTTPS server; TLS is still
// verified against that name. Every unmapped host goes through the guard.
import type { Agent } from 'undici';
import { request } from 'undici';
import { z } from 'zod';
import { createHttpDispatcher } from '../../activities/engines/http-engine.ts';
import { DestinationRefusedError, assertPublicHost, mappedTarget, type HostMap } from '../../activities/engines/net-guard.ts';
import type { Db } from '../db/pool.ts';
import { holdsNul } from '../nul.ts';
import { BAD_PORTS } from '../recipes/ports.ts';
import { MAX_REDIRECT_URIS, MAX_URI_LENGTH, displayText, findClient, redirectUriProblem, type ClientRow } from './clients.ts';

export const DOCUMENT_MAX_BYTES = 16 * 1024;
export const DOCUMENT_TIMEOUT_MS = 5_000;
/** A cached document is used this long before it is fetched again. */
export const DOCUMENT_CACHE_SECONDS = 3600;

export function isClientIdUrl(id: string): boolean {
  try {
    const u = new URL(id);
    // Not on a port no browser connects to (mail, SSH, …): the fetch would speak to another protocol's server.
    const port = u.port === '' ? 443 : Number(u.port);
    return u.protocol === 'https:' && u.pathname !== '/' && !u.hash && !u.username && !u.password && id.length <= MAX_URI_LENGTH && !BAD_PORTS.has(port);
  } catch {
    return false;
  }
}

const ClientDocument = z.looseObject({
  client_id: z.string(),
  client_name: z.string().trim().min(1).max(200).superRefine(displayText).optional(),
  redirect_uris: z
    .array(z.string().max(MAX_URI_LENGTH))
    .min(1)
    .max(MAX_REDIRECT_URIS)
    .refine((list) => list.every((u) => redirectUriProblem(u) === null), 'every redirect URI must be https, or http on a loopback address'),
  token_endpoint_auth_method: z.literal('none').optional(),
});

/** What was wrong with a document that was fetched: safe to show (it says nothing about the network). */
export class ClientDocumentProblem extends Error {}

export type FetchClientDocument = (url: string) => Promise<{ client_name: string; redirect_uris: string[]; metadata: Record<string, unknown> }>;

/** A document fetcher; `hostMap` is the SITE_HOST_MAP setting (empty in production: everything guarded). */
export function clientDocumentFetcher(hostMap: HostMap = {}): FetchClientDocument {
  const dispatcher = createHttpDispatcher({ hostMap, connectTimeoutMs: DOCUMENT_TIMEOUT_MS });
  return (url) => fetchClientDocument(url, dispatcher, hostMap);
}

/** Fetch and check a document; throws with a message a person can read. */
async function fetchClientDocument(url: string, dispatcher: Agent, hostMap: HostMap) {
  const u = new URL(url);
  // Fails early with a clear reason; the dispatcher checks again on connecting (DNS rebinding).
  if (!mappedTarget(hostMap, u.hostname)) await assertPublicHost(u.hostname);
  const res = await request(url, {
    dispatcher,
    method: 'GET',
    headers: { accept: 'application/json' },
    signal: AbortSignal.timeout(DOCUMENT_TIMEOUT_MS),
  });
  if (res.statusCode !== 200) {
    await res.body.dump();
    throw new ClientDocumentProblem(`it answered HTTP ${res.statusCode}`);
  }
  const chunks: Buffer[] = [];
  let size = 0;
  for await (const chunk of res.body) {
    size += (chunk as Buffer).length;
    if (size > DOCUMENT_MAX_BYTES) {
      res.body.destroy();
      throw new ClientDocumentProblem(`it is larger than ${DOCUMENT_MAX_BYTES} bytes`);
    }
    chunks.push(chunk as Buffer);
  }
  let json: unknown;
  try {
    json = JSON.parse(Buffer.concat(chunks).toString('utf8'));
  } catch {
    throw new ClientDocumentProblem('it is not JSON');
  }
  // PostgreSQL stores no NUL in text or jsonb: one anywhere would fail the cache's write, not the document.
  if (holdsNul(json)) throw new ClientDocumentProblem('it contains a NUL character');
  const doc = ClientDocument.safeParse(json);
  if (!doc.success) throw new ClientDocumentProblem(`it is not a valid client metadata document (${doc.error.issues[0]?.message ?? 'invalid'})`);
  if (doc.data.client_id !== url) throw new ClientDocumentProblem('it names another client_id than its own URL');
  return { client_name: doc.data.client_name ?? u.host, redirect_uris: doc.data.redirect_uris, metadata: doc.data };
}

export type ResolvedClient = { ok: true; client: ClientRow } | { ok: false; message: string; busy?: true };

/**
 * Document fetches this process runs at once. The authorization page needs no sign-in, so every
 * request naming a new https client_id is an outbound fetch anyone can start, held up to 5 s: without
 * a bound, one caller could hold any number of connections open (and aim them at any public host).
 */
export const MAX_DOCUMENT_FETCHES = 8;
let fetching = 0;
/**
 * Of those, fetches one client address runs at once (the address as every per-address limit counts
 * it: apps/api/services/client-address.ts). Without it, one caller naming a new slow URL 8 times
 * every 5 s (a new query string each time, so no failure is remembered) held every slot, and every
 * other organization's people connecting a new metadata-document client were told to retry.
 */
export const MAX_DOCUMENT_FETCHES_PER_ADDRESS = 2;
const fetchingByAddress = new Map<string, number>();

const guardedFetcher = clientDocumentFetcher();

/** A failed fetch is remembered this long: the same client_id is answered the same refusal, unfetched. */
export const FAILURE_CACHE_SECONDS = 60;
/** Failures remembered at once per process; beyond, the least recently used is forgotten. */
export const FAILURE_CACHE_ENTRIES = 1000;

/**
 * Recent fetch failures by exact client_id URL. Without it, anyone could make this process fetch a
 * slow or failing URL again and again (each up to 5 s, holding one of the 8 fetch slots). Bounded
 * in age and in entries (a Map keeps insertion order; a hit is moved to the end, so the first key is
 * the least recently used). Per process, like the fetch bound: each API process fetches once.
 */
export class FailureCache {
  private readonly entries = new Map<string, { message: string; until: number }>();
  constructor(
    readonly ttlMs = FAILURE_CACHE_SECONDS * 1000,
    readonly maxEntries = FAILURE_CACHE_ENTRIES,
  ) {}

  get(key: string, now = Date.now()): string | undefined {
    const hit = this.entries.get(key);
    if (!hit) return undefined;
    this.entries.delete(key);
    if (hit.until <= now) return undefined;
    this.entries.set(key, hit);
    return hit.message;
  }

  set(key: string, message: string, now = Date.now()): void {
    this.entries.delete(key);
    this.entries.set(key, { message, until: now + this.ttlMs });
    while (this.entries.size > this.maxEntries) this.entries.delete(this.entries.keys().next().value!);
  }

  get size() {
    return this.entries.size;
  }
}

const failures = new FailureCache();

/** Why a document could not be fetched, in words of the service's own (never the error's text). */
function fetchFailure(err: unknown): string {
  if (err instanceof DestinationRefusedError) return 'its host is a private, loopback or link-local address';
  const code = String((err as { code?: unknown } | null)?.code ?? '');
  if (/^(ERR_TLS_|ERR_SSL_|CERT_|UNABLE_TO_|DEPTH_ZERO_|SELF_SIGNED_)/.test(code)) return 'its TLS certificate could not be verified for its host';
  if ((err as { name?: unknown } | null)?.name === 'TimeoutError' || code === 'UND_ERR_CONNECT_TIMEOUT' || code === 'UND_ERR_HEADERS_TIMEOUT')
    return `it did not answer within ${DOCUMENT_TIMEOUT_MS / 1000} s`;
  return 'it could not be fetched';
}

/** Metadata documents kept cached while never used (no tokens issued), by default (OAUTH_UNUSED_CLIENTS_MAX). */
export const DEFAULT_UNUSED_DOCUMENTS_MAX = 10_000;

/**
 * Forget the cached metadata documents nobody has used beyond the `max` most recently fetched. The
 * authorization page needs no sign-in, so anyone serving documents at many URLs could otherwise
 * make a row (up to 16 KiB of metadata) per URL, about as fast as 8 fetches at once allow, each
 * kept until maintenance removes it a day later: the table every organization's sign-ins read
 * would grow without bound. A cached document that was never used is only a cache: forgetting it
 * changes nothing but that the next request naming it fetches it again. Kept whatever its age: a
 * client that ever got tokens (`last_used_at`), one with an unredeemed live code (a sign-in
 * between consent and its token request), and `keep` (the client this request just resolved).
 */
export async function forgetUnusedDocuments(db: Db, a: { max: number; keep?: string }): Promise<number> {
  const r = await db.query(
    `DELETE FROM oauth_clients WHERE id IN (
       SELECT c.id FROM oauth_clients c
        WHERE c.kind = 'cimd' AND c.last_used_at IS NULL AND c.id IS DISTINCT FROM $2
          AND NOT EXISTS (SELECT 1 FROM oauth_codes k WHERE k.client_id = c.id AND k.expires_at > now() AND k.used_at IS NULL)
        ORDER BY c.fetched_at DESC NULLS LAST, c.id
        OFFSET $1
        FOR UPDATE SKIP LOCKED)`,
    [Math.max(0, a.max - (a.keep === undefined ? 0 : 1)), a.keep ?? null],
  );
  return r.rowCount ?? 0;
}

/**
 * A registered client, or a metadata-document client (fetched when new or its cache is stale).
 * After a fetch, cached documents never used beyond `unusedDocumentsMax` are forgotten (oldest
 * fetched first).
 */
export async function resolveClient(
  db: Db,
  id: string,
  fetchDocument: FetchClientDocument = guardedFetcher,
  unusedDocumentsMax = DEFAULT_UNUSED_DOCUMENTS_MAX,
  /** The requester's address bucket: its fetches at once are bounded (MAX_DOCUMENT_FETCHES_PER_ADDRESS). */
  address?: string,
): Promise<ResolvedClient> {
  const known = await findClient(db, id);
  const stale = known?.kind === 'cimd' && (!known.fetched_at || Date.now() - known.fetched_at.getTime() > DOCUMENT_CACHE_SECONDS * 1000);
  if (known && !stale) return { ok: true, client: known };
  if (!isClientIdUrl(id)) return { ok: false, message: 'This client is not registered with this service.' };
  const failed = failures.get(id);
  if (failed !== undefined) return { ok: false, message: failed };
  const mine = address === undefined ? 0 : (fetchingByAddress.get(address) ?? 0);
  if (fetching >= MAX_DOCUMENT_FETCHES || mine >= MAX_DOCUMENT_FETCHES_PER_ADDRESS) {
    return { ok: false, busy: true, message: 'This service is fetching too many client metadata documents right now. Try again in a moment.' };
  }
  let doc;
  fetching += 1;
  if (address !== undefined) fetchingByAddress.set(address, mine + 1);
  try {
    doc = await fetchDocument(id);
  } catch (err) {
    // Only what was wrong with a fetched document is shown: this page needs no sign-in, so a network
    // error's text (addresses, ports, refused or unreachable) would make it a probe of what the
    // service can reach.
    const why = err instanceof ClientDocumentProblem ? err.message.slice(0, 200) : fetchFailure(err);
    const message = `The client's metadata document at ${id} cannot be used (${why}).`;
    failures.set(id, message);
    return { ok: false, message };
  } finally {
    fetching -= 1;
    if (address !== undefined) {
      const left = (fetchingByAddress.get(address) ?? 1) - 1;
      if (left > 0) fetchingByAddress.set(address, left);
      else fetchingByAddress.delete(address);
    }
  }
  const r = await db.query<ClientRow>(
    `INSERT INTO oauth_clients (id, kind, client_name, redirect_uris, metadata, fetched_at) VALUES ($1, 'cimd', $2, $3, $4, now())
     ON CONFLICT (id) DO UPDATE SET client_name = EXCLUDED.client_name, redirect_uris = EXCLUDED.redirect_uris, metadata = EXCLUDED.metadata, fetched_at = now()
       WHERE oauth_clients.kind = 'cimd'
     RETURNING id, kind, client_name, redirect_uris, created_at, fetched_at`,
    [id, doc.client_name, doc.redirect_uris, doc.metadata],
  );
  const row = r.rows[0];
  if (!row) return { ok: false, message: 'This client is not registered with this service.' };
  await forgetUnusedDocuments(db, { max: unusedDocumentsMax, keep: row.id });
  return { ok: true, client: row };
}
