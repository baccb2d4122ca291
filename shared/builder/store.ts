// The builder's writes: test-run rows, and publishing a version of an organization's workflow into
// the catalog tables with its charge, all in one transaction under a per-handle lock. This module
// owns builder_test_runs and builder_versions; for a built workflow it also writes apis, api_sites,
// operations and operation_versions (the demo seed writes them through shared/db/catalog.ts).
import { createTwoFilesPatch } from 'diff';
import { randomBytes } from 'node:crypto';
import { ServiceError } from '../errors.ts';
import { tx, type Db, type DbClient } from '../db/pool.ts';
import { canonicalPretty } from './canonical.ts';
import { definitionHash, parseDefinition, shareIssues, toOperation, type BuilderDefinition } from './definition.ts';

/** What a private build or update costs (shared workflows are free). */
export const PRIVATE_BUILD_CREDITS = 100;
/** How long a passing test run allows publishing the same definition. */
export const TEST_RUN_VALID_HOURS = 24;
/** Namespace of the per-handle advisory lock (the second key is the handle's hash). */
const LOCK_NAMESPACE = 900_001;

export type Visibility = 'public' | 'private';

export interface PublishResult {
  api: string;
  api_id: number;
  version: number;
  visibility: Visibility;
  charged_credits: number;
  definition_hash: string;
  restored_from: number | null;
  /** True when the definition was already the workflow's latest version (same hash and sharing): nothing was written or charged. */
  unchanged: boolean;
}

type RefusalReason = 'test_run_required' | 'handle_taken' | 'already_shared' | 'connections_leave_site';

function refused(reason: RefusalReason, message: string, param?: string, extra: Record<string, unknown> = {}): ServiceError {
  return new ServiceError('publish_refused', message, { param, details: { reason, ...extra } });
}

/** A new test-run row (status `running`); the test-run workflow records its outcome. */
export async function createTestRun(db: Db, orgId: string, def: BuilderDefinition): Promise<{ id: string; definition_hash: string }> {
  const id = `trun_${randomBytes(16).toString('hex')}`;
  const hash = definitionHash(def);
  await db.query(`INSERT INTO builder_test_runs (id, org_id, handle, definition_hash, status) VALUES ($1, $2, $3, $4, 'running')`, [id, orgId, def.handle, hash]);
  return { id, definition_hash: hash };
}

/** A test run that never started (another of the organization's was running): no trace of it is kept. */
export async function discardTestRun(db: Db, id: string): Promise<void> {
  await db.query(`DELETE FROM builder_test_runs WHERE id = $1 AND status = 'running'`, [id]);
}

export async function markTestRunError(db: Db, id: string): Promise<void> {
  await db.query(`UPDATE builder_test_runs SET status = 'error', finished_at = now() WHERE id = $1 AND status = 'running'`, [id]);
}

export async function getTestRun(db: Db, orgId: string, id: string) {
  const r = await db.query(
    `SELECT id, handle, definition_hash, status, results, created_at, finished_at FROM builder_test_runs WHERE id = $1 AND org_id = $2`,
    [id, orgId],
  );
  return r.rows[0] as { id: string; handle: string; definition_hash: string; status: string; results: unknown; created_at: Date; finished_at: Date | null } | undefined;
}

/** The organization's own workflow with this handle (private or shared), locked for the publish. */
async function ownApi(c: DbClient, orgId: string, handle: string, lock: boolean) {
  const r = await c.query(
    `SELECT id, visibility FROM apis WHERE handle = $1 AND owner_org_id = $2 ORDER BY (visibility = 'private') DESC LIMIT 1 ${lock ? 'FOR UPDATE' : ''}`,
    [handle, orgId],
  );
  return r.rows[0] as { id: string; visibility: Visibility } | undefined;
}

/** Charge a private build through the ledger; 402 insufficient_credits rolls the whole publish back. */
async function chargeBuild(c: DbClient, orgId: string, amount: number, note: string): Promise<number> {
  const upd = await c.query(
    `UPDATE credit_balances SET available = available - $2, charged = charged + $2 WHERE org_id = $1 AND available >= $2 RETURNING available`,
    [orgId, amount],
  );
  if (upd.rowCount === 0) {
    const bal = await c.query('SELECT available FROM credit_balances WHERE org_id = $1', [orgId]);
    const available = Number(bal.rows[0]?.available ?? 0);
    throw new ServiceError('insufficient_credits', `A private build costs ${amount} credits; the organization has ${available} available`, {
      details: { required_credits: amount, available_credits: available },
    });
  }
  const led = await c.query(`INSERT INTO credit_ledger (org_id, kind, amount, note) VALUES ($1, 'build', $2, $3) RETURNING id`, [orgId, amount, note]);
  return Number(led.rows[0].id);
}

/** Write the catalog rows of version `version`: every operation gets operation version `version`, which becomes its default. */
async function writeCatalog(c: DbClient, apiId: number, def: BuilderDefinition, version: number): Promise<void> {
  await c.query('DELETE FROM api_sites WHERE api_id = $1', [apiId]);
  for (const [i, s] of def.sites.entries()) {
    await c.query('INSERT INTO api_sites (api_id, position, name, host) VALUES ($1, $2, $3, $4)', [apiId, i, s.name, s.host]);
  }
  for (const bop of def.operations) {
    const op = toOperation(bop, version);
    const v = op.versions[0]!;
    const o = await c.query(
      `INSERT INTO operations (api_id, name, label, description, cost_credits, performs_actions, default_version, access)
       VALUES ($1, $2, $3, $4, $5, $6, $7, $8)
       ON CONFLICT (api_id, name) DO UPDATE SET label = EXCLUDED.label, description = EXCLUDED.description, cost_credits = EXCLUDED.cost_credits,
         performs_actions = EXCLUDED.performs_actions, default_version = EXCLUDED.default_version, access = EXCLUDED.access,
         health_status = 'unknown', health_detail = NULL, health_checked_at = NULL
       RETURNING id`,
      [apiId, op.name, op.label, op.description, op.cost_credits, op.performs_actions, version, JSON.stringify(op.access ?? [])],
    );
    // A new row only: published versions are immutable (the version number is new for this workflow).
    await c.query(
      `INSERT INTO operation_versions (operation_id, version, input_schema, output_schema, examples, recipe, performs_actions, access, cost_credits)
       VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9)`,
      [Number(o.rows[0].id), version, v.input_schema, v.output_schema, JSON.stringify(v.examples), JSON.stringify(v.recipe), op.performs_actions, JSON.stringify(op.access ?? []), op.cost_credits],
    );
  }
}

/**
 * Publish `def` as the organization's next version in one transaction: lock the handle, check the
 * handle rules, write the catalog rows, charge a private build and write the version row. Any refusal or
 * failure rolls everything back, the charge included. A definition that is already the latest
 * version, shared alike, answers that version (`unchanged`) and charges nothing. The charge comes
 * last, so the organization's balance row is held only to the commit.
 */
async function publishIn(
  db: Db,
  orgId: string,
  def: BuilderDefinition,
  opts: { share?: boolean; testRunId: string | null; restoredFrom: number | null },
): Promise<PublishResult> {
  const hash = definitionHash(def);
  return tx(db, async (c) => {
    // Every publish of a handle (any organization, either side) waits its turn: versions are
    // numbered in order and a public handle cannot be taken twice.
    await c.query('SELECT pg_advisory_xact_lock($1, hashtext($2))', [LOCK_NAMESPACE, def.handle]);
    const existing = await ownApi(c, orgId, def.handle, true);
    const visibility: Visibility = (opts.share ?? existing?.visibility === 'public') ? 'public' : 'private';
    if (existing?.visibility === 'public' && visibility === 'private') {
      throw refused('already_shared', `${def.handle} is shared; sharing cannot be turned off for a published workflow`, 'share');
    }
    if (visibility === 'public') {
      const leaks = shareIssues(def);
      if (leaks.length) throw refused('connections_leave_site', `Cannot share ${def.handle}: ${leaks[0]!.message}`, 'share', { issues: leaks });
      const other = await c.query(`SELECT 1 FROM apis WHERE handle = $1 AND visibility = 'public' AND owner_org_id <> $2`, [def.handle, orgId]);
      if (other.rowCount) throw refused('handle_taken', `The public handle ${def.handle} belongs to another workflow; choose another handle to share`, 'handle');
    }
    // Publishing what is already the latest version (a form sent twice, a CLI retried after a lost
    // answer, restoring the current version) is that version again: no new number, no charge.
    if (existing) {
      const latest = await c.query(
        `SELECT b.version, b.restored_from FROM builder_versions b
          WHERE b.api_id = $1 AND b.definition_hash = $2 AND b.visibility = $3
            AND b.version = (SELECT max(version) FROM builder_versions WHERE api_id = $1)
            AND NOT EXISTS (SELECT 1 FROM operation_versions v JOIN operations o ON o.id = v.operation_id WHERE o.api_id = $1 AND v.version > b.version)`,
        [existing.id, hash, visibility],
      );
      const same = latest.rows[0] as { version: number; restored_from: number | null } | undefined;
      if (same) {
        return { api: def.handle, api_id: Number(existing.id), version: same.version, visibility, charged_credits: 0, definition_hash: hash, restored_from: same.restored_from, unchanged: true };
      }
    }
    let apiId: number;
    const fields = [def.name, def.description, def.category, def.website_url ?? null];
    if (existing) {
      apiId = Number(existing.id);
      await c.query(`UPDATE apis SET visibility = $2, name = $3, description = $4, category = $5, website_url = $6 WHERE id = $1`, [apiId, visibility, ...fields]);
    } else {
      const ins = await c.query(
        `INSERT INTO apis (handle, visibility, owner_org_id, name, description, category, website_url) VALUES ($1, $2, $3, $4, $5, $6, $7) RETURNING id`,
        [def.handle, visibility, orgId, ...fields],
      );
      apiId = Number(ins.rows[0].id);
    }
    // Past every version the workflow has, including operation versions written before it was built here.
    const last = await c.query(
      `SELECT greatest((SELECT coalesce(max(version), 0) FROM builder_versions WHERE api_id = $1),
                       (SELECT coalesce(max(v.version), 0) FROM operation_versions v JOIN operations o ON o.id = v.operation_id WHERE o.api_id = $1)) AS v`,
      [apiId],
    );
    const version = Number(last.rows[0].v) + 1;
    if (visibility === 'public' && existing?.visibility === 'private') {
      // Sharing publishes the shared definition, never the private history behind it: only the
      // shared definition was checked (shareIssues: a caller's connection never leaves its site),
      // and a public workflow runs with every caller's connections. So the operations it leaves out
      // are removed, and every earlier version is withdrawn (a pin answers workflow_version_unavailable).
      await c.query('DELETE FROM operations WHERE api_id = $1 AND NOT (name = ANY($2::text[]))', [apiId, def.operations.map((o) => o.name)]);
      await c.query('UPDATE operation_versions SET available = false WHERE available AND operation_id IN (SELECT id FROM operations WHERE api_id = $1)', [apiId]);
    }
    await writeCatalog(c, apiId, def, version);
    // Charged last: the charge locks the organization's balance row until this transaction commits,
    // and every query the organization starts meanwhile reserves on that row. Charged first, a large
    // publish's catalog writes (search documents, triggers) held them all. A refusal (402) still
    // rolls back everything written above.
    const charge = visibility === 'private' ? PRIVATE_BUILD_CREDITS : 0;
    const ledgerId = charge ? await chargeBuild(c, orgId, charge, `build ${def.handle} v${version}`) : null;
    await c.query(
      `INSERT INTO builder_versions (api_id, version, org_id, definition, definition_hash, visibility, charged_credits, ledger_id, test_run_id, restored_from)
       VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10)`,
      [apiId, version, orgId, JSON.stringify(def), hash, visibility, charge, ledgerId, opts.testRunId, opts.restoredFrom],
    );
    return { api: def.handle, api_id: apiId, version, visibility, charged_credits: charge, definition_hash: hash, restored_from: opts.restoredFrom, unchanged: false };
  });
}

/**
 * Publish a tested definition. Requires a passing test run of this exact definition (same hash) by
 * this organization within TEST_RUN_VALID_HOURS; otherwise 409 publish_refused (test_run_required).
 */
export async function publish(db: Db, orgId: string, json: unknown, opts: { share?: boolean } = {}): Promise<PublishResult> {
  const def = parseDefinition(json);
  const run = await db.query(
    `SELECT id FROM builder_test_runs
      WHERE org_id = $1 AND definition_hash = $2 AND status = 'passed' AND created_at > now() - $3::int * interval '1 hour'
      ORDER BY created_at DESC LIMIT 1`,
    [orgId, definitionHash(def), TEST_RUN_VALID_HOURS],
  );
  if (!run.rowCount) {
    throw refused('test_run_required', `Publishing needs a passing test run of this exact definition within ${TEST_RUN_VALID_HOURS} hours; run the test first`);
  }
  return publishIn(db, orgId, def, { share: opts.share, testRunId: run.rows[0].id, restoredFrom: null });
}

async function versionRow(db: Db, orgId: string, handle: string, version: number) {
  const r = await db.query(
    `SELECT v.definition FROM builder_versions v JOIN apis a ON a.id = v.api_id
      WHERE a.handle = $1 AND a.owner_org_id = $2 AND v.version = $3`,
    [handle, orgId, version],
  );
  return r.rows[0]?.definition as BuilderDefinition | undefined;
}

async function requireWorkflow(db: Db, orgId: string, handle: string): Promise<void> {
  const r = await db.query('SELECT 1 FROM builder_versions v JOIN apis a ON a.id = v.api_id WHERE a.handle = $1 AND a.owner_org_id = $2 LIMIT 1', [handle, orgId]);
  if (!r.rowCount) throw new ServiceError('unknown_api_slug', `The organization has built no workflow ${JSON.stringify(handle)}`, { param: 'api' });
}

async function requireVersion(db: Db, orgId: string, handle: string, version: number): Promise<BuilderDefinition> {
  await requireWorkflow(db, orgId, handle);
  const def = await versionRow(db, orgId, handle, version);
  if (!def) throw new ServiceError('workflow_version_unavailable', `${handle} has no version ${version}`, { param: 'version' });
  return def;
}

/**
 * Restore: version `version`'s definition becomes a new latest version (same content, new number).
 * It was tested when it was published, so no new test run is needed; the workflow keeps its current
 * sharing, so a private restore is charged like any update.
 */
export async function restore(db: Db, orgId: string, handle: string, version: number): Promise<PublishResult> {
  const def = await requireVersion(db, orgId, handle, version);
  return publishIn(db, orgId, def, { testRunId: null, restoredFrom: version });
}

/** A unified diff of two versions' definitions as canonical pretty JSON. */
export async function diffVersions(db: Db, orgId: string, handle: string, from: number, to: number): Promise<{ api: string; from: number; to: number; patch: string }> {
  const [a, b] = [await requireVersion(db, orgId, handle, from), await requireVersion(db, orgId, handle, to)];
  return { api: handle, from, to, patch: createTwoFilesPatch(`${handle} v${from}`, `${handle} v${to}`, canonicalPretty(a), canonicalPretty(b)) };
}

/** The organization's built workflows, newest change first. */
export async function listWorkflows(db: Db, orgId: string) {
  const r = await db.query(
    `SELECT a.handle, a.name, a.visibility, max(v.version) AS latest_version, max(v.created_at) AS updated_at
       FROM apis a JOIN builder_versions v ON v.api_id = a.id
      WHERE a.owner_org_id = $1 GROUP BY a.id ORDER BY max(v.created_at) DESC`,
    [orgId],
  );
  return r.rows.map((x) => ({ api: x.handle as string, name: x.name as string, visibility: x.visibility as Visibility, latest_version: Number(x.latest_version), updated_at: x.updated_at as Date }));
}

/** Every version of one workflow, newest first (no definitions: getVersion reads one). */
export async function listVersions(db: Db, orgId: string, handle: string) {
  await requireWorkflow(db, orgId, handle);
  const r = await db.query(
    `SELECT v.version, v.definition_hash, v.visibility, v.charged_credits, v.restored_from, v.test_run_id, v.created_at
       FROM builder_versions v JOIN apis a ON a.id = v.api_id WHERE a.handle = $1 AND a.owner_org_id = $2 ORDER BY v.version DESC`,
    [handle, orgId],
  );
  return r.rows.map((x) => ({ ...x, version: Number(x.version) }));
}

export async function getVersion(db: Db, orgId: string, handle: string, version: number): Promise<BuilderDefinition> {
  return requireVersion(db, orgId, handle, version);
}
