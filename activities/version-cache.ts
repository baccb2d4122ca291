// Operation versions a worker has loaded, parsed and compiled, kept for the next run of the same
// version. Versions are immutable, so a kept one is never stale; but every organization publishes
// into the same worker, and a tenant publishing version after version (or months of organizations)
// must not grow the process without bound. So the cache is an LRU bounded twice: by entries, and
// by the JSON bytes of what it keeps (a version's recipe and output schema may be up to the
// definition's 512 KiB, and its compiled validator grows with the schema).
import type { ValidateFunction } from 'ajv/dist/2020.js';
import type { Db } from '../shared/db/pool.ts';
import { loadOperationVersion } from '../shared/db/catalog.ts';
import { parseRecipe, type Recipe } from '../shared/recipes/schema.ts';
import { compileOrgSchema } from '../shared/org-schemas.ts';
import { Lru } from '../shared/lru.ts';
import { recipeActions } from '../shared/catalog/validate.ts';

/** Versions kept per worker: far more than any worker runs in turn, small next to its heap. */
export const VERSION_CACHE_ENTRIES = 256;
/** JSON bytes of recipes and output schemas kept per worker (parsed and compiled, a few times that in heap). */
export const VERSION_CACHE_BYTES = 16 * 1_048_576;

type Row = NonNullable<Awaited<ReturnType<typeof loadOperationVersion>>>;

/** One operation version, ready to run: its recipe parsed and its output schema compiled. */
export interface LoadedVersion {
  operationId: number;
  version: number;
  access: Row['access'];
  /** The version acts on a website: its stored flag, or an action step in its recipe. */
  acts: boolean;
  recipe: Recipe;
  validate: ValidateFunction;
}

/** A stored version that cannot be run: no retry changes it. `detail` is for the log only. */
export class UnusableVersion extends Error {
  constructor(
    message: string,
    readonly detail?: string,
  ) {
    super(message);
    this.name = 'UnusableVersion';
  }
}

const jsonBytes = (value: unknown) => Buffer.byteLength(JSON.stringify(value) ?? '');

/**
 * Loads operation versions through a bounded cache. Nothing an organization owns privately
 * (connections, inputs, outputs) is kept: only the version's own immutable definition, keyed by
 * operation id and version alone, which is what the database row is keyed by.
 */
export function createVersionLoader(db: Db, opts: { maxEntries?: number; maxBytes?: number } = {}) {
  const cache = new Lru<string, { v: LoadedVersion; bytes: number }>(opts.maxEntries ?? VERSION_CACHE_ENTRIES, opts.maxBytes ?? VERSION_CACHE_BYTES, (e) => e.bytes);
  return {
    cache,
    async load(operationId: number, version: number): Promise<LoadedVersion> {
      const key = `${operationId}@${version}`;
      const kept = cache.get(key);
      if (kept) return kept.v;
      const row = await loadOperationVersion(db, operationId, version);
      if (!row) throw new UnusableVersion(`operation version ${key} is missing`);
      // Parsed and compiled before the site is touched: a stored definition this code cannot run
      // fails at once instead of after the site's work, and again on every retry.
      let recipe: Recipe;
      let validate: ValidateFunction;
      try {
        recipe = parseRecipe(row.recipe);
        validate = compileOrgSchema(row.output_schema);
      } catch (err) {
        throw new UnusableVersion(`operation version ${key} cannot be run`, err instanceof Error ? err.message : String(err));
      }
      const acts = row.performs_actions || recipeActions(recipe).performsActions;
      const v: LoadedVersion = { operationId, version, access: row.access, acts, recipe, validate };
      cache.set(key, { v, bytes: jsonBytes(row.recipe) + jsonBytes(row.output_schema) });
      return v;
    },
  };
}
