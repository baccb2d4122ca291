// Health-check activities: list the operations to check, run one verified example against its
// website and compare the output with the documented one, and record each operation's outcome.
// Only read-only operations without connections are ever run: an example of an operation that
// performs actions would act on a website, and one needing a connection has no credentials here.
import { isDeepStrictEqual } from 'node:util';
import { Context } from '@temporalio/activity';
import { ApplicationFailure } from '@temporalio/common';
import type { AccessRequirement, VerifiedExample } from '../shared/catalog/types.ts';
import type { Db } from '../shared/db/pool.ts';
import { ERRORS, ServiceError } from '../shared/errors.ts';
import { parseRecipe, type Recipe } from '../shared/recipes/schema.ts';
import type { RecipeRunner } from './engines/index.ts';
import { HEALTH_PARTY } from './engines/interpreter.ts';
import type { HealthActivities, HealthTarget } from './types.ts';
import { Lru } from '../shared/lru.ts';
import { VERSION_ACTIONS_AND_ACCESS } from '../shared/db/catalog.ts';
import { VERSION_CACHE_BYTES, VERSION_CACHE_ENTRIES } from './version-cache.ts';

const DETAIL_MAX = 500;

/** Why an operation's examples must not be run automatically; null when they may. */
export function skipReason(op: { performs_actions: boolean; access: AccessRequirement[] | null; examples: unknown[] | null; available: boolean | null }): string | null {
  if (op.performs_actions) return 'Performs actions on a website: its examples are never run automatically';
  if ((op.access ?? []).length > 0) return `Needs a connection (${(op.access ?? []).map((a) => a.name).join(', ')}): not checked automatically`;
  if (op.available === null) return 'The default version does not exist';
  if (!op.available) return 'The default version is withdrawn';
  if (!op.examples || op.examples.length === 0) return 'No verified examples to run';
  return null;
}

/** JSON's view of a value: what a caller would receive (undefined members dropped). */
const asJson = (v: unknown): unknown => (v === undefined ? undefined : JSON.parse(JSON.stringify(v)));

/** JSON pointer of the first difference between two JSON values, for the health detail. */
export function firstDifference(a: unknown, b: unknown, at = ''): string | null {
  if (isDeepStrictEqual(a, b)) return null;
  if (a && b && typeof a === 'object' && typeof b === 'object' && Array.isArray(a) === Array.isArray(b)) {
    const keys = new Set([...Object.keys(a), ...Object.keys(b)]);
    for (const k of keys) {
      const d = firstDifference((a as Record<string, unknown>)[k], (b as Record<string, unknown>)[k], `${at}/${k}`);
      if (d !== null) return d;
    }
  }
  return at || '/';
}

const clip = (s: string) => (s.length > DETAIL_MAX ? `${s.slice(0, DETAIL_MAX - 1)}…` : s);

/** Retrying these can help (a flaky or briefly rate-limiting site); a timeout is a result at once. */
const RETRY_CODES = new Set(Object.entries(ERRORS).filter(([code, d]) => d.retryable && code !== 'execution_timeout').map(([code]) => code));

interface VersionRow {
  recipe: Recipe;
  examples: VerifiedExample[];
  performs_actions: boolean;
  access: AccessRequirement[];
}

export function createHealthActivities(deps: { db: Db; runner: RecipeRunner }): HealthActivities {
  // Versions are immutable: a loaded one is kept (the guard columns are re-read), in an LRU bounded
  // like the execute step's (version-cache.ts), as every default version published passes here.
  const versions = new Lru<string, { recipe: Recipe; examples: VerifiedExample[]; bytes: number }>(VERSION_CACHE_ENTRIES, VERSION_CACHE_BYTES, (e) => e.bytes);

  async function load(operationId: number, version: number): Promise<VersionRow | undefined> {
    const key = `${operationId}@${version}`;
    let kept = versions.get(key);
    const r = await deps.db.query(
      `SELECT ${VERSION_ACTIONS_AND_ACCESS}, ${kept ? 'NULL AS recipe, NULL AS examples' : 'v.recipe, v.examples'}
         FROM operations o JOIN operation_versions v ON v.operation_id = o.id
        WHERE o.id = $1 AND v.version = $2`,
      [operationId, version],
    );
    const row = r.rows[0];
    if (!row) return undefined;
    if (!kept) {
      kept = { recipe: parseRecipe(row.recipe), examples: row.examples ?? [], bytes: Buffer.byteLength(JSON.stringify([row.recipe, row.examples])) };
      versions.set(key, kept);
    }
    return { recipe: kept.recipe, examples: kept.examples, performs_actions: row.performs_actions, access: row.access ?? [] };
  }

  return {
    async listHealthTargets({ apis, limit, checkedBefore }) {
      // Example titles only: the examples themselves (inputs and outputs) are read when run.
      const r = await deps.db.query(
        `SELECT o.id, a.handle, o.name, o.default_version, ${VERSION_ACTIONS_AND_ACCESS}, v.available, v.recipe->>'engine' AS engine,
                CASE WHEN v.examples IS NULL THEN NULL
                     ELSE ARRAY(SELECT coalesce(e.value->>'title', 'example ' || e.n) FROM jsonb_array_elements(v.examples) WITH ORDINALITY AS e(value, n) ORDER BY e.n)
                END AS titles
           FROM operations o
           JOIN apis a ON a.id = o.api_id
           LEFT JOIN operation_versions v ON v.operation_id = o.id AND v.version = o.default_version
          WHERE a.status = 'active' AND a.availability = 'available'
            AND ($1::text[] IS NULL OR a.handle = ANY($1::text[]))
            AND ($2::double precision IS NULL OR o.health_checked_at IS NULL OR o.health_checked_at < to_timestamp($2::double precision / 1000))
          -- Least recently checked first: a run that cannot reach every operation before its time
          -- limit (one organization's many slow examples) leaves the rest first in line next time,
          -- instead of the same handles early in the alphabet being checked every run and the others never.
          ORDER BY o.health_checked_at ASC NULLS FIRST, a.handle, o.id
          LIMIT $3`,
        [apis && apis.length > 0 ? apis : null, checkedBefore ?? null, limit ?? null],
      );
      return r.rows.map(
        (row): HealthTarget => ({
          operationId: Number(row.id),
          api: row.handle,
          operation: row.name,
          version: row.default_version,
          exampleTitles: (row.titles ?? []) as string[],
          skipReason: skipReason({ ...row, examples: row.titles }),
          engine: row.engine === 'browser' ? 'browser' : 'http',
        }),
      );
    },

    async runHealthExample({ operationId, version, index, timeoutMs, attempts, pageWaitMs }) {
      const ctx = Context.current();
      const started = Date.now();
      const result = (ok: boolean, code?: string, detail?: string) => ({ ok, code, detail: detail === undefined ? undefined : clip(detail), ms: Date.now() - started });
      const v = await load(operationId, version);
      if (!v) return result(false, 'internal_error', `Operation version ${operationId}@${version} is missing`);
      // Checked again here, not only when listing: this activity must never act on a website.
      const refused = skipReason({ performs_actions: v.performs_actions, access: v.access, examples: v.examples, available: true });
      if (refused) return result(false, 'refused', refused);
      const example = v.examples[index];
      if (!example) return result(false, 'internal_error', `Example #${index + 1} does not exist`);

      // The time limit runs from the moment the example reaches the website; a wait for a browser
      // page before that (health checks never hold every page) has its own bound, pageWaitMs.
      const limit = new AbortController();
      let timer: NodeJS.Timeout | undefined;
      const startLimit = () => {
        timer ??= setTimeout(() => limit.abort(new Error('example time limit')), timeoutMs);
      };
      if (pageWaitMs === undefined) startLimit();
      const signal = AbortSignal.any([ctx.cancellationSignal, limit.signal]);
      try {
        const output = await deps.runner.run(v.recipe, example.input, {
          signal,
          heartbeat: (d) => ctx.heartbeat(d),
          requestRef: `health_${operationId}_${version}_${index}`,
          party: HEALTH_PARTY,
          ...(pageWaitMs === undefined ? {} : { startSignal: AbortSignal.timeout(pageWaitMs), beforeSite: startLimit }),
        });
        const got = asJson(output);
        const want = asJson(example.output);
        if (isDeepStrictEqual(got, want)) return result(true);
        return result(false, 'output_mismatch', `Output differs from the documented example at ${firstDifference(got, want)}`);
      } catch (err) {
        const timedOut = signal.aborted && !ctx.cancellationSignal.aborted;
        const code = timedOut ? 'execution_timeout' : err instanceof ServiceError ? err.code : 'internal_error';
        const message = timedOut ? `No answer within ${timeoutMs} ms` : err instanceof ServiceError ? err.message : 'Unexpected error while running the example';
        if (!(err instanceof ServiceError) && !timedOut) ctx.log.warn('health example failed unexpectedly', { operationId, version, index, error: String(err) });
        // A flaky site gets the same retries a query would; the last attempt reports the failure.
        if (RETRY_CODES.has(code) && ctx.info.attempt < attempts) throw ApplicationFailure.retryable(message, code);
        return result(false, code, message);
      } finally {
        clearTimeout(timer);
      }
    },

    async recordHealth({ operationId, version, status, detail, checkedAt, verified }) {
      // A slower, older run never overwrites what a newer one recorded, nor a check of a version
      // that is no longer the default (published meanwhile, its health starts unknown) the new one's.
      const r = await deps.db.query(
        `UPDATE operations
            SET health_status = coalesce($2, health_status), health_detail = $3, health_checked_at = to_timestamp($4::double precision / 1000),
                verified_at = CASE WHEN $5 THEN to_timestamp($4::double precision / 1000) ELSE verified_at END
          WHERE id = $1 AND (health_checked_at IS NULL OR health_checked_at <= to_timestamp($4::double precision / 1000))
            AND ($6::int IS NULL OR default_version = $6)`,
        [operationId, status, clip(detail), checkedAt, verified, version ?? null],
      );
      return { recorded: (r.rowCount ?? 0) > 0 };
    },
  };
}
