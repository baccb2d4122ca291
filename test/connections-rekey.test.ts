// `npm run admin -- connection rekey` on the real stack: connections written under an old key move
// to the current one, after which a keyring holding only the current key (the stack's API and
// worker: they have no previous keys) decrypts and uses them; a rerun moves nothing, a dry run
// writes nothing, a row no key decrypts is reported by id and left alone with a non-zero exit, a
// concurrent revoke / replace / second run is never overwritten, and no output carries a secret or
// a key.
//
// The "new" key is the stack's own (its dev key in $DATA_DIR), the "old" one is made here: rows of
// other test files are already under the new key, so a run of the command (it covers the whole
// table) changes nothing of theirs, and rows it re-encrypts become usable by the stack's worker.
import { spawn } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { loadConfig } from '../shared/config.ts';
import { publishApi } from '../shared/db/catalog.ts';
import { addConnection, keyringFrom, loadKeyring, loadSecrets, rekeyConnections, revokeConnection, type Keyring } from '../shared/db/connections.ts';
import type { Db } from '../shared/db/pool.ts';
import { parseRecipe } from '../shared/recipes/schema.ts';
import { WEATHER, WEATHER_REQ, weatherHistoryApi } from './helpers/access-fixtures.ts';
import { ROOT } from './helpers/processes.ts';
import { closeDb, db, demo, newOrg, query, stack } from './helpers/stack.ts';

const SHOP = 'shop.example.test';
const VALID_KEY = 'wk_demo_valid_key_123';
const SHOP_EMAIL = 'rekey-demo@shop.example.test';
const SHOP_PASSWORD = 'rekey-correct-horse-41';
const REVOKED_KEY = 'wk_rekey_revoked_key_777';
const REPLACED_KEY = 'wk_rekey_replaced_key_555';
const SECRETS = [VALID_KEY, SHOP_EMAIL, SHOP_PASSWORD, REVOKED_KEY, REPLACED_KEY];

const OLD = randomBytes(32).toString('base64');
const LOST = randomBytes(32).toString('base64'); // a key nobody configures any more
let NEW: string; // the stack's key
const ringOf = (current: string, previous?: string): Promise<Keyring> =>
  keyringFrom({ names: { current: 'CONNECTIONS_ENCRYPTION_KEY', previous: 'CONNECTIONS_PREVIOUS_KEYS' }, current, previous, dataDir: '/nonexistent', devFile: 'none' });

const W_API = '@rekey-fixture-weather';
const SHOP_REQ = { kind: 'account' as const, name: 'shop_account', site: SHOP };

const weatherFixture = weatherHistoryApi(W_API, 'Rekey fixture: weather history');
const weatherQuery = { api: W_API, operation: 'history', input: { city: 'London', date: '2025-05-01' } };

/** `npm run admin -- …` with the rotated keyring: `NEW` current, `OLD` previous (unless `env` says otherwise). */
async function admin(args: string[], env: Record<string, string> = {}): Promise<{ code: number | null; json: any; out: string; stderr: string }> {
  const proc = spawn(process.execPath, ['--import', 'tsx', 'apps/admin/main.ts', ...args], {
    cwd: ROOT,
    env: { ...process.env, DATABASE_URL: stack().databaseUrl, LOG_LEVEL: 'warn', CONNECTIONS_ENCRYPTION_KEY: NEW, CONNECTIONS_PREVIOUS_KEYS: OLD, ...env },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let out = '';
  let stderr = '';
  proc.stdout.on('data', (c: Buffer) => (out += c.toString()));
  proc.stderr.on('data', (c: Buffer) => {
    out += c.toString();
    stderr += c.toString();
  });
  const code = await new Promise<number | null>((r) => proc.once('exit', r));
  const line = out.split('\n').filter((l) => l.startsWith('{')).pop();
  return { code, json: line ? JSON.parse(line) : undefined, out, stderr };
}

/** Neither a secret value nor a key (base64, as configured) appears. */
function expectNothingSecret(text: string) {
  for (const s of [...SECRETS, OLD, NEW, LOST]) expect(text.includes(s), `a secret or key appeared in: ${text.slice(0, 300)}`).toBe(false);
}

const rowsOf = async (ids: string[]) => (await db().query('SELECT * FROM connections WHERE id = ANY($1) ORDER BY id', [ids])).rows;
/** What a run should find: rows not under the new key, and rows under it. */
async function census(orgId: string) {
  const newId = (await ringOf(NEW)).current.id;
  const r = await db().query('SELECT count(*) FILTER (WHERE key_id <> $1)::int AS old, count(*) FILTER (WHERE key_id = $1)::int AS current FROM connections WHERE org_id = $2', [newId, orgId]);
  return r.rows[0] as { old: number; current: number };
}

beforeAll(async () => {
  NEW = (await loadKeyring(loadConfig())).current.key.export().toString('base64');
  await publishApi(db(), weatherFixture, { validateRecipe: (r: unknown) => void parseRecipe(r) });
  await demo('/__demo/reset');
});
afterAll(async () => {
  await closeDb();
});

describe('connection rekey', () => {
  it('moves rows written under an old key to the current one; the service then uses them with the current key alone; a rerun moves nothing', async () => {
    const oldRing = await ringOf(OLD);
    const org = await newOrg(20);
    // Before the rotation: the old key was current. A revoked row (history) is on it too.
    const revoked = await addConnection(db(), oldRing, { orgId: org.org_id, ...WEATHER_REQ, secret: { WEATHER_API_KEY: REVOKED_KEY } });
    const weather = await addConnection(db(), oldRing, { orgId: org.org_id, ...WEATHER_REQ, secret: { WEATHER_API_KEY: VALID_KEY } });
    const shop = await addConnection(db(), oldRing, { orgId: org.org_id, ...SHOP_REQ, secret: { email: SHOP_EMAIL, password: SHOP_PASSWORD } });
    // One written after the rotation, already under the new key.
    const fresh = await addConnection(db(), await ringOf(NEW), { orgId: org.org_id, kind: 'access_key', name: 'OTHER_API_KEY', site: WEATHER, secret: { OTHER_API_KEY: VALID_KEY } });
    // Another organization's row under a key this command is not given: outside `--org`, so
    // neither listed nor touched (and no reason for exit 1).
    const stranger = await newOrg(1);
    const foreign = await addConnection(db(), await ringOf(LOST), { orgId: stranger.org_id, ...WEATHER_REQ, secret: { WEATHER_API_KEY: VALID_KEY } });
    const foreignRow = await rowsOf([foreign.connection_id]);
    const mine = [revoked, weather, shop].map((c) => c.connection_id);
    expect((await rowsOf([revoked.connection_id]))[0].status).toBe('revoked'); // replaced by `weather`

    // The stack knows only the new key: the old-key connection cannot be used yet.
    const before = await query(org.api_key, weatherQuery);
    expect(before.status, before.text).toBe(500);
    expect(before.body.error.code).toBe('internal_error');

    // The command runs for this organization only (`--org`): other test files' rows, some under
    // keys this file does not know, are not its business.
    const expected = await census(org.org_id);
    expect(expected).toEqual({ old: 3, current: 1 });
    const stored = await rowsOf([...mine, fresh.connection_id]);

    // Dry run: the same report, nothing written.
    const dry = await admin(['connection', 'rekey', '--org', org.org_id, '--dry-run']);
    expect(dry.code, dry.out).toBe(0);
    const newId = (await ringOf(NEW)).current.id;
    expect(dry.json).toEqual({
      dry_run: true,
      current_key_id: newId,
      would_reencrypt: expected.old,
      already_current: expected.current,
      undecryptable: [],
      remaining_on_old_keys: expected.old,
    });
    expect(await rowsOf([...mine, fresh.connection_id])).toEqual(stored);
    expectNothingSecret(dry.out);

    const run = await admin(['connection', 'rekey', '--org', org.org_id]);
    expect(run.code, run.out).toBe(0);
    expect(run.json).toEqual({
      dry_run: false,
      current_key_id: newId,
      reencrypted: expected.old,
      already_current: expected.current,
      undecryptable: [],
      remaining_on_old_keys: 0,
    });
    expectNothingSecret(run.out);

    // Every row now names the new key; nothing but the secret columns changed (not status, not
    // updated_at); the row already under the new key was not touched.
    const after = await rowsOf([...mine, fresh.connection_id]);
    for (const [i, row] of after.entries()) {
      const was = stored[i]!;
      expect(row.key_id).toBe(newId);
      const { secret_ciphertext, secret_iv, secret_tag, key_id, ...rest } = row;
      const { secret_ciphertext: c0, secret_iv: iv0, secret_tag: t0, key_id: k0, ...rest0 } = was;
      expect(rest).toEqual(rest0);
      if (row.id === fresh.connection_id) expect([secret_ciphertext, secret_iv, secret_tag, key_id]).toEqual([c0, iv0, t0, k0]);
      else expect(Buffer.compare(secret_iv, iv0)).not.toBe(0);
    }
    // A keyring with only the new key decrypts them…
    const newOnly = await ringOf(NEW);
    expect(newOnly.byId.size).toBe(1);
    expect(await loadSecrets(db(), newOnly, org.org_id, [WEATHER_REQ, SHOP_REQ])).toMatchObject({
      ok: true,
      secrets: { WEATHER_API_KEY: VALID_KEY, email: SHOP_EMAIL, password: SHOP_PASSWORD, SHOP_EMAIL, SHOP_PASSWORD },
    });
    // …and so does the service, which has no previous key.
    const res = await query(org.api_key, weatherQuery);
    expect(res.status, res.text).toBe(200);
    expect(res.body.data.output).toEqual({ city: 'London', date: '2025-05-01', min_c: 8.2, max_c: 18.3 });

    // Idempotent: a rerun finds everything current.
    const rerun = await admin(['connection', 'rekey', '--org', org.org_id]);
    expect(rerun.code, rerun.out).toBe(0);
    expect(rerun.json).toMatchObject({ dry_run: false, reencrypted: 0, already_current: expected.current + expected.old, undecryptable: [], remaining_on_old_keys: 0 });
    expect(await rowsOf(mine)).toEqual(after.filter((r) => mine.includes(r.id)));

    expect(await rowsOf([foreign.connection_id])).toEqual(foreignRow);
    await db().query('DELETE FROM connections WHERE id = $1', [foreign.connection_id]);

    const help = await admin(['--help']);
    expect(help.out).toMatch(/connection rekey \[--org <org_id>\] \[--dry-run\]/);
  });

  it('a row no configured key decrypts is listed by id and left as it is; the others still move; the exit code is non-zero', async () => {
    const org = await newOrg(1);
    const good = await addConnection(db(), await ringOf(OLD), { orgId: org.org_id, ...WEATHER_REQ, secret: { WEATHER_API_KEY: VALID_KEY } });
    // Under a key that is no longer configured…
    const lost = await addConnection(db(), await ringOf(LOST), { orgId: org.org_id, ...SHOP_REQ, secret: { email: SHOP_EMAIL, password: SHOP_PASSWORD } });
    // …and under the old key but altered (its tag no longer matches).
    const altered = await addConnection(db(), await ringOf(OLD), { orgId: org.org_id, kind: 'access_key', name: 'OTHER_API_KEY', site: WEATHER, secret: { OTHER_API_KEY: REPLACED_KEY } });
    await db().query('UPDATE connections SET secret_tag = $2 WHERE id = $1', [altered.connection_id, randomBytes(16)]);
    const bad = [lost.connection_id, altered.connection_id];
    try {
      const stored = await rowsOf(bad);
      const ids = { old: (await ringOf(OLD)).current.id, lost: (await ringOf(LOST)).current.id };
      const listed = [
        { connection_id: lost.connection_id, org_id: org.org_id, key_id: ids.lost, reason: 'key not configured' },
        { connection_id: altered.connection_id, org_id: org.org_id, key_id: ids.old, reason: 'cannot be decrypted (wrong key or altered row)' },
      ].sort((a, b) => a.connection_id.localeCompare(b.connection_id));

      const dry = await admin(['connection', 'rekey', '--org', org.org_id, '--dry-run']);
      expect(dry.code, dry.out).toBe(1);
      expect(dry.json).toMatchObject({ dry_run: true, would_reencrypt: 1, undecryptable: listed, remaining_on_old_keys: 3 });
      expect((await rowsOf([good.connection_id]))[0].key_id).toBe(ids.old);

      const run = await admin(['connection', 'rekey', '--org', org.org_id]);
      expect(run.code, run.out).toBe(1);
      expect(run.json).toMatchObject({ dry_run: false, reencrypted: 1, undecryptable: listed, remaining_on_old_keys: 2 });
      expect(run.stderr).toMatch(/^admin: 2 connection\(s\) could not be decrypted with any configured key and were left unchanged\n$/);
      expectNothingSecret(run.out);
      expectNothingSecret(dry.out);
      expect(await rowsOf(bad)).toEqual(stored);
      expect(await loadSecrets(db(), await ringOf(NEW), org.org_id, [WEATHER_REQ])).toMatchObject({ ok: true, secrets: { WEATHER_API_KEY: VALID_KEY } });

      // Configuring the lost key again (as a previous key) recovers that row; the altered one stays.
      const again = await admin(['connection', 'rekey', '--org', org.org_id], { CONNECTIONS_PREVIOUS_KEYS: `${OLD},${LOST}` });
      expect(again.code, again.out).toBe(1);
      expect(again.json).toMatchObject({ reencrypted: 1, undecryptable: [listed.find((l) => l.connection_id === altered.connection_id)], remaining_on_old_keys: 1 });
      expect(await loadSecrets(db(), await ringOf(NEW), org.org_id, [SHOP_REQ])).toMatchObject({ ok: true, secrets: { SHOP_EMAIL, SHOP_PASSWORD } });
      expectNothingSecret(again.out);
    } finally {
      // Leave no undecryptable row behind for a later run of the command.
      await db().query('DELETE FROM connections WHERE id = ANY($1)', [bad]);
    }
  });

  it('a revoke and replace or a second run landing between read and write is never overwritten', async () => {
    const ring = await ringOf(NEW, OLD);
    const org = await newOrg(1);
    const a = await addConnection(db(), await ringOf(OLD), { orgId: org.org_id, ...WEATHER_REQ, secret: { WEATHER_API_KEY: REVOKED_KEY } });
    const b = await addConnection(db(), await ringOf(OLD), { orgId: org.org_id, ...SHOP_REQ, secret: { email: SHOP_EMAIL, password: SHOP_PASSWORD } });
    let replacement: string | undefined;
    let secondRun: Awaited<ReturnType<typeof rekeyConnections>> | undefined;
    let bSecondRunRow: any;
    // The command's pool, with another writer acting just before each of its writes to `a` and `b`.
    const racing = interleave(db(), async (id) => {
      if (id === a.connection_id) {
        // A console user replaces the connection: the old row is revoked, a new one added.
        replacement = (await addConnection(db(), await ringOf(NEW), { orgId: org.org_id, ...WEATHER_REQ, secret: { WEATHER_API_KEY: REPLACED_KEY } })).connection_id;
      }
      if (id === b.connection_id) {
        // Another operator runs the command at the same time and gets there first.
        secondRun = await rekeyConnections(db(), ring, { orgId: org.org_id });
        bSecondRunRow = (await rowsOf([b.connection_id]))[0];
      }
    });
    const report = await rekeyConnections(racing, ring, { orgId: org.org_id });
    expect(report.undecryptable).toEqual([]);
    expect(report.remaining_on_old_keys).toBe(0);
    expect(secondRun?.remaining_on_old_keys).toBe(0);

    // `a`: revoked by the replace, re-encrypted all the same (its secret did not change), still revoked.
    const [rowA] = await rowsOf([a.connection_id]);
    expect(rowA.status).toBe('revoked');
    expect(rowA.key_id).toBe(ring.current.id);
    // The live connection is the replacement, with the replacing secret.
    expect(await loadSecrets(db(), await ringOf(NEW), org.org_id, [WEATHER_REQ])).toMatchObject({ ok: true, secrets: { WEATHER_API_KEY: REPLACED_KEY } });
    expect((await db().query(`SELECT id FROM connections WHERE org_id = $1 AND name = 'WEATHER_API_KEY' AND status = 'active'`, [org.org_id])).rows).toEqual([{ id: replacement }]);
    // `b`: the second run's ciphertext stands; the first run counted it as already current.
    expect((await rowsOf([b.connection_id]))[0]).toEqual(bSecondRunRow);
    expect(await loadSecrets(db(), await ringOf(NEW), org.org_id, [SHOP_REQ])).toMatchObject({ ok: true, secrets: { SHOP_EMAIL, SHOP_PASSWORD } });
  });
});

/** `pool` whose re-encrypting UPDATE of a row first awaits `before(id)` (once per row). */
function interleave(pool: Db, before: (id: string) => Promise<void>): Db {
  const seen = new Set<string>();
  return new Proxy(pool, {
    get(target, prop, receiver) {
      if (prop === 'query') {
        return async (sql: string, params?: unknown[]) => {
          const id = params?.[0];
          if (typeof sql === 'string' && sql.trimStart().startsWith('UPDATE connections SET secret_ciphertext') && typeof id === 'string' && !seen.has(id)) {
            seen.add(id);
            await before(id);
          }
          return target.query(sql, params);
        };
      }
      const v = Reflect.get(target, prop, receiver);
      return typeof v === 'function' ? v.bind(target) : v;
    },
  });
}

describe('connection delete', () => {
  it('removes a row no configured key decrypts, after which rekey finds nothing left on old keys and exits 0', async () => {
    const org = await newOrg(1);
    const good = await addConnection(db(), await ringOf(NEW), { orgId: org.org_id, ...WEATHER_REQ, secret: { WEATHER_API_KEY: VALID_KEY } });
    const lost = await addConnection(db(), await ringOf(LOST), { orgId: org.org_id, ...SHOP_REQ, secret: { email: SHOP_EMAIL, password: SHOP_PASSWORD } });
    try {
      const stuck = await admin(['connection', 'rekey', '--org', org.org_id]);
      expect(stuck.code, stuck.out).toBe(1);
      expect(stuck.json).toMatchObject({ remaining_on_old_keys: 1, undecryptable: [{ connection_id: lost.connection_id, reason: 'key not configured' }] });

      const del = await admin(['connection', 'delete', '--id', lost.connection_id]);
      expect(del.code, del.out).toBe(0);
      expect(del.json).toMatchObject({ connection_id: lost.connection_id, org_id: org.org_id, status: 'active', reason: 'undecryptable' });
      expectNothingSecret(del.out);
      expect(await rowsOf([lost.connection_id])).toEqual([]);
      expect((await rowsOf([good.connection_id])).length).toBe(1);

      const clean = await admin(['connection', 'rekey', '--org', org.org_id]);
      expect(clean.code, clean.out).toBe(0);
      expect(clean.json).toMatchObject({ undecryptable: [], remaining_on_old_keys: 0 });
      // Deleting it again: not found, the spec's envelope naming the parameter.
      const again = await admin(['connection', 'delete', '--id', lost.connection_id]);
      expect(again.code).toBe(1);
      expect(again.json).toMatchObject({ error: { code: 'invalid_input', param: 'id', details: { issues: [{ path: 'id' }] } } });
    } finally {
      await db().query('DELETE FROM connections WHERE id = $1', [lost.connection_id]);
    }
  });

  it('refuses a live row the keyring reads until it is revoked, then removes it with its secret; a malformed id is refused', async () => {
    const org = await newOrg(1);
    const live = await addConnection(db(), await ringOf(NEW), { orgId: org.org_id, ...WEATHER_REQ, secret: { WEATHER_API_KEY: VALID_KEY } });
    const before = await rowsOf([live.connection_id]);

    const refused = await admin(['connection', 'delete', '--id', live.connection_id]);
    expect(refused.code, refused.out).toBe(1);
    expect(refused.json).toMatchObject({ error: { code: 'invalid_input', param: 'id', message: `connection ${live.connection_id} is active and readable; revoke it first` } });
    expect(await rowsOf([live.connection_id])).toEqual(before);
    expect(await loadSecrets(db(), await ringOf(NEW), org.org_id, [WEATHER_REQ])).toMatchObject({ ok: true });

    await revokeConnection(db(), live.connection_id);
    const del = await admin(['connection', 'delete', '--id', live.connection_id]);
    expect(del.code, del.out).toBe(0);
    expect(del.json).toMatchObject({ connection_id: live.connection_id, status: 'revoked', reason: 'revoked' });
    expect(await rowsOf([live.connection_id])).toEqual([]);
    expectNothingSecret(del.out);

    const bad = await admin(['connection', 'delete', '--id', "conn_' OR 1=1 --"]);
    expect(bad.code).toBe(1);
    expect(bad.json).toMatchObject({ error: { code: 'invalid_input', param: 'id' } });
  });
});
