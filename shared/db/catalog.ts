// Publishing workflows into PostgreSQL and resolving what a query names.
import { sha256Hex } from '../ids.ts';
import type { AccessRequirement, ApiDefinition, JsonSchema, OperationDefinition, VerifiedExample } from '../catalog/types.ts';
import { tx, type Db, type DbClient } from './pool.ts';
import { PLATFORM_ORG_ID } from './orgs.ts';

async function putIcon(c: DbClient, icon: { content_type: string; bytes: Uint8Array } | undefined): Promise<string | null> {
  if (!icon) return null;
  const hash = sha256Hex(icon.bytes);
  await c.query('INSERT INTO icons (sha256, content_type, bytes) VALUES ($1, $2, $3) ON CONFLICT DO NOTHING', [
    hash,
    icon.content_type,
    Buffer.from(icon.bytes),
  ]);
  return hash;
}

/**
 * Publish (or refresh) an API. Descriptive fields follow the definition; operation versions are
 * immutable: an existing (operation, version) is never rewritten, only new versions are added,
 * and the default version of an existing operation does not move.
 */
export async function publishApi(
  db: Db,
  def: ApiDefinition,
  opts: { ownerOrgId?: string; validateRecipe?: (recipe: unknown, op: OperationDefinition) => void } = {},
): Promise<{ api_id: number }> {
  const visibility = opts.ownerOrgId ? 'private' : (def.visibility ?? 'public');
  if (visibility === 'private' && !opts.ownerOrgId) throw new Error(`${def.handle}: a private API needs an owner organization`);
  for (const op of def.operations) for (const v of op.versions) opts.validateRecipe?.(v.recipe, op);
  return tx(db, async (c) => {
    const logo = await putIcon(c, def.sites[0]?.icon);
    const existing = await c.query(
      visibility === 'public'
        ? `SELECT id FROM apis WHERE handle = $1 AND visibility = 'public'`
        : `SELECT id FROM apis WHERE handle = $1 AND visibility = 'private' AND owner_org_id = $2`,
      visibility === 'public' ? [def.handle] : [def.handle, opts.ownerOrgId],
    );
    let apiId: number;
    const fields = [def.name, def.description, def.category, def.website_url, logo, def.availability ?? 'available'];
    if (existing.rowCount) {
      apiId = Number(existing.rows[0].id);
      await c.query(
        `UPDATE apis SET name = $2, description = $3, category = $4, website_url = $5, logo_sha256 = $6, availability = $7
          WHERE id = $1 AND (name, description, category, website_url, logo_sha256, availability)
                IS DISTINCT FROM ($2, $3, $4, $5, $6, $7)`,
        [apiId, ...fields],
      );
    } else {
      const ins = await c.query(
        `INSERT INTO apis (handle, visibility, owner_org_id, name, description, category, website_url, logo_sha256, availability)
         VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9) RETURNING id`,
        [def.handle, visibility, opts.ownerOrgId ?? PLATFORM_ORG_ID, ...fields],
      );
      apiId = Number(ins.rows[0].id);
    }
    await c.query('DELETE FROM api_sites WHERE api_id = $1', [apiId]);
    for (const [i, site] of def.sites.entries()) {
      const icon = await putIcon(c, site.icon);
      await c.query('INSERT INTO api_sites (api_id, position, name, host, icon_sha256) VALUES ($1, $2, $3, $4, $5)', [
        apiId,
        i,
        site.name,
        site.host,
        icon,
      ]);
    }
    for (const op of def.operations) {
      const o = await c.query(
        `INSERT INTO operations (api_id, name, label, description, cost_credits, performs_actions, default_version, access, labels)
         VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9)
         ON CONFLICT (api_id, name) DO UPDATE SET label = EXCLUDED.label, description = EXCLUDED.description,
           cost_credits = EXCLUDED.cost_credits, performs_actions = EXCLUDED.performs_actions,
           access = EXCLUDED.access, labels = EXCLUDED.labels
         RETURNING id`,
        [apiId, op.name, op.label, op.description, op.cost_credits, op.performs_actions ?? false, op.default_version, JSON.stringify(op.access ?? []), op.labels ?? []],
      );
      const opId = Number(o.rows[0].id);
      for (const v of op.versions) {
        await c.query(
          // A catalog definition declares actions and access per operation: they hold for each version.
          `INSERT INTO operation_versions (operation_id, version, input_schema, output_schema, examples, recipe, available, performs_actions, access)
           VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9) ON CONFLICT (operation_id, version) DO NOTHING`,
          [opId, v.version, v.input_schema, v.output_schema, JSON.stringify(v.examples), JSON.stringify(v.recipe), v.available ?? true, op.performs_actions ?? false, JSON.stringify(op.access ?? [])],
        );
      }
    }
    return { api_id: apiId };
  });
}

export interface ResolvedOperation {
  apiId: number;
  handle: string;
  apiName: string;
  category: string;
  logoSha256: string | null;
  visibility: 'public' | 'private';
  ownerOrgId: string | null;
  operationId: number;
  operation: string;
  costCredits: number;
  performsActions: boolean;
  access: AccessRequirement[];
  version: number;
  inputSchema: JsonSchema;
  outputSchema: JsonSchema;
  recipe: unknown;
  examples: VerifiedExample[];
}

export type Resolution =
  | { ok: true; op: ResolvedOperation }
  | { ok: false; code: 'unknown_api_slug' | 'unknown_operation' | 'workflow_version_unavailable'; available?: number[] };

/**
 * A version's own performs_actions and access (`v`: operation_versions), or its operation's (`o`)
 * for a row an older process wrote without them during a rolling deploy (migration 1700000002600).
 */
export const VERSION_ACTIONS_AND_ACCESS = 'coalesce(v.performs_actions, o.performs_actions) AS performs_actions, coalesce(v.access, o.access) AS access';

/**
 * Resolve handle + operation + version for an organization. A handle reaches the organization's
 * private workflow and the public one alike; a private operation wins a name collision;
 * `visibility` restricts the search to one side.
 */
export async function resolveOperation(
  db: Db,
  orgId: string,
  q: { api: string; operation: string; version?: number; visibility?: 'public' | 'private' },
): Promise<Resolution> {
  // One round trip: each visible workflow with this handle (the organization's private one first),
  // its operation of this name if any, and that operation's requested (or default) version if any.
  // Named: prepared once per pooled connection (no parse or plan per query; issue 11).
  const rows = await db.query({
    name: 'resolve_operation',
    text: `SELECT a.id, a.handle, a.name, a.category, a.logo_sha256, a.visibility, a.owner_org_id,
            o.id AS op_id, o.name AS op_name,
            -- The version's own (a pinned version acts, needs connections and costs what it did when
            -- published); a catalog version's price is its operation's (migration 1700000002700).
            ${VERSION_ACTIONS_AND_ACCESS}, coalesce(v.cost_credits, o.cost_credits) AS cost_credits,
            v.version, v.input_schema, v.output_schema, v.recipe, v.examples, v.available
       FROM apis a
       LEFT JOIN operations o ON o.api_id = a.id AND o.name = $4
       LEFT JOIN operation_versions v ON v.operation_id = o.id AND v.version = coalesce($5::int, o.default_version)
      WHERE a.handle = $1 AND a.status = 'active'
        AND ((a.visibility = 'public' AND a.availability = 'available') OR (a.visibility = 'private' AND a.owner_org_id = $2))
        AND ($3::text IS NULL OR a.visibility = $3)
      ORDER BY (a.visibility = 'private') DESC`,
    values: [q.api, orgId, q.visibility ?? null, q.operation, q.version ?? null],
  });
  if (rows.rowCount === 0) return { ok: false, code: 'unknown_api_slug' };
  for (const row of rows.rows) {
    if (row.op_id === null) continue;
    if (row.version === null || !row.available) {
      const avail = await db.query(
        'SELECT version FROM operation_versions WHERE operation_id = $1 AND available ORDER BY version',
        [row.op_id],
      );
      return { ok: false, code: 'workflow_version_unavailable', available: avail.rows.map((r) => r.version as number) };
    }
    return {
      ok: true,
      op: {
        apiId: Number(row.id),
        handle: row.handle,
        apiName: row.name,
        category: row.category,
        logoSha256: row.logo_sha256,
        visibility: row.visibility,
        ownerOrgId: row.owner_org_id,
        operationId: Number(row.op_id),
        operation: row.op_name,
        costCredits: row.cost_credits,
        performsActions: row.performs_actions,
        access: row.access,
        version: row.version,
        inputSchema: row.input_schema,
        outputSchema: row.output_schema,
        recipe: row.recipe,
        examples: row.examples,
      },
    };
  }
  return { ok: false, code: 'unknown_operation' };
}

/** Load one immutable operation version (the worker runs exactly what the API resolved). */
export async function loadOperationVersion(db: Db | DbClient, operationId: number, version: number) {
  const r = await db.query(
    `SELECT v.recipe, v.output_schema, ${VERSION_ACTIONS_AND_ACCESS}, a.visibility, a.owner_org_id
       FROM operation_versions v JOIN operations o ON o.id = v.operation_id JOIN apis a ON a.id = o.api_id
      WHERE v.operation_id = $1 AND v.version = $2`,
    [operationId, version],
  );
  return r.rows[0] as
    | { recipe: unknown; output_schema: JsonSchema; performs_actions: boolean; access: AccessRequirement[]; visibility: string; owner_org_id: string | null }
    | undefined;
}

/**
 * Moves completed runs counted since the last fold into the catalog's run counters and completion
 * times (migration 1700000002300): a successful query's own transaction only appends a row, so no
 * organization's answer waits on a counter row another holds. Returns the runs moved; 0 when
 * another fold is under way.
 */
export async function foldRunCounts(db: Db): Promise<number> {
  const r = await db.query<{ n: string }>('SELECT catalog_fold_runs() AS n');
  return Number(r.rows[0]?.n ?? 0);
}

/**
 * Folds every `everyMs` until stopped (API processes; several at once are fine: one folds, the
 * others find it busy). A failure (PostgreSQL away) is logged once per outage and tried again at the
 * next tick; runs stay pending meanwhile, none is lost.
 */
export function startRunCountFold(db: Db, everyMs: number, log: { warn(o: object, msg: string): void; info(o: object, msg: string): void }): () => void {
  let timer: NodeJS.Timeout | undefined;
  let stopped = false;
  let failing = false;
  const tick = async () => {
    try {
      await foldRunCounts(db);
      if (failing) log.info({ event: 'catalog_run_fold_recovered' }, 'catalog run counts are folded again');
      failing = false;
    } catch (err) {
      if (!failing) log.warn({ event: 'catalog_run_fold_failed', err: err instanceof Error ? err.message : String(err) }, 'catalog run counts could not be folded; retrying');
      failing = true;
    }
    if (!stopped) timer = setTimeout(tick, everyMs).unref();
  };
  timer = setTimeout(tick, everyMs).unref();
  return () => {
    stopped = true;
    clearTimeout(timer);
  };
}

/** Completion times for the catalog's `popular` cursors outlive their 24-hour cursors by an hour, no more. */
export async function pruneRunEvents(db: Db, olderThanHours: number, limit: number): Promise<number> {
  let deleted = 0;
  // The buckets (migration 1700000002800), then the per-run rows written before them.
  for (const table of ['catalog_run_buckets', 'catalog_run_events']) {
    const r = await db.query(
      `DELETE FROM ${table}
        WHERE ctid IN (SELECT ctid FROM ${table} WHERE at < now() - $1::int * interval '1 hour' LIMIT $2)`,
      [olderThanHours, limit - deleted],
    );
    deleted += r.rowCount ?? 0;
    if (deleted >= limit) break;
  }
  return deleted;
}
