// The operations' sentence vectors as one compact in-memory matrix (issue 10), so a prompt's dense
// top-k is a scan of Float32 rows (10,000 × 384 in under a millisecond with simd-dot.ts's
// WebAssembly kernel, ~4 ms in plain JavaScript where it cannot run) with every scope filter
// applied BEFORE a row is scored: another organization's private operation is never scored at all.
//
// Vectors live in PostgreSQL (router_vectors, migration 1700000001400) keyed by operation,
// version and document hash: a router start loads them; an operation without one (new, changed,
// or a first start) is embedded in the background by the first router that meets it and stored
// for every other process. `refresh()` re-reads every operation's scope facts (owner, visibility,
// status: small columns) and the documents of those whose router_documents.refreshed_at moved.
// The in-memory scope check is a prefilter: the rows the query service ranks are read again under
// the same filters in SQL (retrieve.ts rowsByIds), so a stale entry can only lose a candidate.
import { createHash } from 'node:crypto';
import type { Db } from '../db/pool.ts';
import { DIMENSIONS, MODEL_NAME, operationDocument, type Embedder } from './embeddings.ts';
import { createDotKernel } from './simd-dot.ts';
import type { RouteScope } from './types.ts';

/** How often a router re-reads what changed (only when prompts arrive; in the background). */
export const REFRESH_MS = 10_000;
const BATCH = 16;
const READ_CHUNK = 2_000;

interface Entry {
  row: number;
  api: string;
  visibility: 'public' | 'private';
  owner: string;
  live: boolean;
  version: number;
  refreshedAt: string;
  /** The document hash whose vector is in the matrix row, or null while it is being embedded. */
  hash: string | null;
}

export interface DenseHit {
  operationId: string;
  cosine: number;
}

export interface IndexStats {
  operations: number;
  vectors: number;
  pending: number;
  /** Vectors read from PostgreSQL, and embedded here, since this router started. */
  loaded: number;
  embedded: number;
}

/**
 * The dot product of `q` with the matrix row at `base` in JavaScript (one row, or every row where
 * WebAssembly SIMD is missing): four accumulators let V8 keep four multiply-adds in flight
 * (3.5 ms instead of 14.5 ms for 10,000 rows on a loaded core).
 */
function dot(q: Float32Array, m: Float32Array, base: number): number {
  let s0 = 0;
  let s1 = 0;
  let s2 = 0;
  let s3 = 0;
  for (let d = 0; d < DIMENSIONS; d += 4) {
    s0 += q[d]! * m[base + d]!;
    s1 += q[d + 1]! * m[base + d + 1]!;
    s2 += q[d + 2]! * m[base + d + 2]!;
    s3 += q[d + 3]! * m[base + d + 3]!;
  }
  return s0 + s1 + s2 + s3;
}

export function documentHash(doc: string): string {
  return createHash('sha256').update(`${MODEL_NAME}\n${doc}`).digest('hex');
}

function toBytes(v: Float32Array): Buffer {
  const b = Buffer.alloc(DIMENSIONS * 4);
  for (let d = 0; d < DIMENSIONS; d++) b.writeFloatLE(v[d]!, d * 4);
  return b;
}

export class VectorIndex {
  private readonly entries = new Map<string, Entry>();
  private ids: string[] = [];
  /** Rows in WebAssembly memory when the SIMD kernel runs here, else in `jsMatrix`. */
  private readonly kernel = createDotKernel();
  private jsMatrix = new Float32Array(1024 * DIMENSIONS);
  private inScopeRows = new Int32Array(1024);
  private readonly pending = new Map<string, { version: number; hash: string; doc: string }>();
  private refreshing: Promise<void> | null = null;
  private draining: Promise<void> | null = null;
  private lastRefresh = 0;
  private counts = { loaded: 0, embedded: 0 };

  constructor(
    private readonly db: Db,
    private readonly embedder: Embedder,
  ) {}

  stats(): IndexStats {
    let vectors = 0;
    for (const e of this.entries.values()) if (e.hash) vectors++;
    return { operations: this.entries.size, vectors, pending: this.pending.size, ...this.counts };
  }

  /** Starts a refresh when the last one is older than REFRESH_MS; never waits for it. */
  maybeRefresh(): void {
    if (Date.now() - this.lastRefresh >= REFRESH_MS) void this.refresh().catch(() => {});
  }

  /** Re-reads what changed; resolves when the matrix holds every vector PostgreSQL has (embedding goes on in the background). */
  refresh(): Promise<void> {
    this.lastRefresh = Date.now();
    this.refreshing ??= this.readChanges().finally(() => (this.refreshing = null));
    return this.refreshing;
  }

  /** Resolves when nothing waits to be embedded. */
  drain(): Promise<void> {
    if (!this.draining && this.pending.size > 0) this.draining = this.embedPending().finally(() => (this.draining = null));
    return this.draining ?? Promise.resolve();
  }

  private async readChanges(): Promise<void> {
    const r = await this.db.query<{ id: string; version: number; api: string; visibility: 'public' | 'private'; owner: string; live: boolean; refreshed_at: string }>(
      `SELECT o.id::text AS id, o.default_version AS version, a.handle AS api, a.visibility, a.owner_org_id AS owner,
              (a.status = 'active' AND a.availability = 'available' AND v.available) AS live, d.refreshed_at::text AS refreshed_at
         FROM operations o
         JOIN apis a ON a.id = o.api_id
         JOIN operation_versions v ON v.operation_id = o.id AND v.version = o.default_version
         JOIN router_documents d ON d.operation_id = o.id`,
    );
    const seen = new Set<string>();
    const changed: string[] = [];
    for (const x of r.rows) {
      seen.add(x.id);
      const e = this.entries.get(x.id);
      if (!e) {
        this.entries.set(x.id, { row: this.newRow(x.id), api: x.api, visibility: x.visibility, owner: x.owner, live: x.live, version: x.version, refreshedAt: x.refreshed_at, hash: null });
        changed.push(x.id);
        continue;
      }
      Object.assign(e, { api: x.api, visibility: x.visibility, owner: x.owner, live: x.live });
      if (e.refreshedAt !== x.refreshed_at || e.version !== x.version || !e.hash) {
        Object.assign(e, { refreshedAt: x.refreshed_at, version: x.version });
        changed.push(x.id);
      }
    }
    // A deleted operation is never scored again (its row stays unused).
    for (const [id, e] of this.entries) if (!seen.has(id)) e.live = false;
    for (let i = 0; i < changed.length; i += READ_CHUNK) await this.readVectors(changed.slice(i, i + READ_CHUNK));
    void this.drain();
  }

  private get matrix(): Float32Array {
    return this.kernel ? this.kernel.matrix() : this.jsMatrix;
  }

  private newRow(id: string): number {
    const row = this.ids.length;
    this.ids.push(id);
    if (this.kernel) this.kernel.reserve(row + 1);
    else if ((row + 1) * DIMENSIONS > this.jsMatrix.length) {
      const bigger = new Float32Array(this.jsMatrix.length * 2);
      bigger.set(this.jsMatrix);
      this.jsMatrix = bigger;
    }
    if (row >= this.inScopeRows.length) this.inScopeRows = new Int32Array(this.inScopeRows.length * 2);
    return row;
  }

  /** Documents of the changed operations, their hashes, and the vectors PostgreSQL already holds for them. */
  private async readVectors(ids: string[]): Promise<void> {
    const docs = await this.db.query<{ id: string; version: number; operation: string; label: string; description: string; labels: string[]; input_schema: Record<string, unknown>; examples: { title?: string; input: Record<string, unknown> }[] }>(
      `SELECT o.id::text AS id, o.default_version AS version, o.name AS operation, o.label, o.description, o.labels, v.input_schema, v.examples
         FROM operations o JOIN operation_versions v ON v.operation_id = o.id AND v.version = o.default_version
        WHERE o.id = ANY($1::bigint[])`,
      [ids],
    );
    const want = docs.rows.map((d) => {
      const doc = operationDocument(d);
      return { id: d.id, version: d.version, doc, hash: documentHash(doc) };
    });
    const stored = await this.db.query<{ id: string; vector: Buffer }>(
      `SELECT k.id::text AS id, rv.vector
         FROM unnest($1::bigint[], $2::int[], $3::text[]) AS k(id, version, hash)
         JOIN router_vectors rv ON rv.operation_id = k.id AND rv.version = k.version AND rv.doc_hash = k.hash`,
      [want.map((w) => w.id), want.map((w) => w.version), want.map((w) => w.hash)],
    );
    const found = new Map(stored.rows.map((s) => [s.id, s.vector]));
    for (const w of want) {
      const e = this.entries.get(w.id);
      if (!e) continue;
      const bytes = found.get(w.id);
      if (bytes) {
        this.put(e, w.hash, new Float32Array(bytes.buffer.slice(bytes.byteOffset, bytes.byteOffset + bytes.byteLength)));
        this.counts.loaded++;
      } else if (e.hash !== w.hash) {
        // Keep scoring the old vector (if any) until the new one is in: a changed word rarely moves it far.
        this.pending.set(w.id, { version: w.version, hash: w.hash, doc: w.doc });
      }
    }
  }

  private put(e: Entry, hash: string, v: Float32Array): void {
    this.matrix.set(v, e.row * DIMENSIONS);
    e.hash = hash;
  }

  private async embedPending(): Promise<void> {
    try {
      while (this.pending.size > 0) {
        const batch = [...this.pending].slice(0, BATCH);
        const vs = await this.embedder.embed(batch.map(([, p]) => p.doc));
        await this.db.query(
          `INSERT INTO router_vectors (operation_id, version, doc_hash, vector)
           SELECT * FROM unnest($1::bigint[], $2::int[], $3::text[], $4::bytea[]) ON CONFLICT DO NOTHING`,
          [batch.map(([id]) => id), batch.map(([, p]) => p.version), batch.map(([, p]) => p.hash), vs.map(toBytes)],
        );
        // Older vectors of these operations are never read again.
        await this.db.query(
          `DELETE FROM router_vectors rv USING unnest($1::bigint[], $2::text[]) AS k(id, hash)
            WHERE rv.operation_id = k.id AND rv.doc_hash <> k.hash`,
          [batch.map(([id]) => id), batch.map(([, p]) => p.hash)],
        );
        batch.forEach(([id, p], i) => {
          const e = this.entries.get(id);
          if (e) this.put(e, p.hash, vs[i]!);
          this.pending.delete(id);
          this.counts.embedded++;
        });
      }
    } catch (err) {
      // Left for the next refresh to queue again; ranking goes on with what is there.
      this.pending.clear();
      process.emitWarning(`prompt router: embedding operations failed (${(err as Error).message})`);
    }
  }

  /** Whether this operation is in scope, by the facts read at the last refresh. */
  private inScope(e: Entry, scope: RouteScope, allowed: Set<string> | null, blocked: Set<string> | null): boolean {
    return (
      e.live &&
      e.hash !== null &&
      (e.visibility === 'public' || e.owner === scope.orgId) &&
      (!scope.api || e.api === scope.api) &&
      (!scope.visibility || e.visibility === scope.visibility) &&
      (!allowed || allowed.has(e.api)) &&
      (!blocked || !blocked.has(e.api))
    );
  }

  /** The k in-scope operations nearest the prompt's vector (cosine: vectors are unit length), best first. */
  scan(q: Float32Array, scope: RouteScope, k: number): DenseHit[] {
    const allowed = scope.allowedApis ? new Set(scope.allowedApis) : null;
    const blocked = scope.blockedApis?.length ? new Set(scope.blockedApis) : null;
    // Only in-scope rows are handed to the kernel: the others are never scored.
    const rows = this.inScopeRows;
    let n = 0;
    for (const e of this.entries.values()) if (this.inScope(e, scope, allowed, blocked)) rows[n++] = e.row;
    let scores: Float32Array;
    if (this.kernel) scores = this.kernel.dots(q, rows, n);
    else {
      scores = new Float32Array(n);
      for (let i = 0; i < n; i++) scores[i] = dot(q, this.jsMatrix, rows[i]! * DIMENSIONS);
    }
    const top: Array<{ row: number; cosine: number }> = [];
    for (let i = 0; i < n; i++) {
      const s = scores[i]!;
      if (top.length === k && s <= top[k - 1]!.cosine) continue;
      let j = top.length === k ? k - 1 : top.length;
      while (j > 0 && top[j - 1]!.cosine < s) j--;
      top.splice(j, 0, { row: rows[i]!, cosine: s });
      if (top.length > k) top.pop();
    }
    return top.map((t) => ({ operationId: this.ids[t.row]!, cosine: t.cosine }));
  }

  /** The cosine of one operation with the prompt, or undefined while it has no vector. */
  cosine(q: Float32Array, operationId: string): number | undefined {
    const e = this.entries.get(operationId);
    if (!e?.hash) return undefined;
    return dot(q, this.matrix, e.row * DIMENSIONS);
  }
}
