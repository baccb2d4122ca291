// Connected accounts and access keys on the real stack: access_required before anything is charged,
// auth_required / auth_revoked, credentials_missing / credentials_rejected / source_permission_denied
// after the reservation (released), success with a valid connection, secrets never leaving the
// worker, encryption at rest, and one organization never using another's connection.
//
// Fixture APIs (published here) mirror the demo catalog's @weather weather_history (access key
// WEATHER_API_KEY) and @shop-api (account shop_account) so these tests do not depend on how the
// demo catalog evolves; one test also checks the demo operations' declared access.
import { spawn } from 'node:child_process';
import { createCipheriv, randomBytes } from 'node:crypto';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { publishApi } from '../shared/db/catalog.ts';
import { parseRecipe } from '../shared/recipes/schema.ts';
import type { ApiDefinition } from '../shared/catalog/types.ts';
import { loadConfig } from '../shared/config.ts';
import { addConnection, ConnectionError, expireConnection, loadKeyring, loadSecrets, revokeConnection } from '../shared/db/connections.ts';
import { MIN_SECRET_LENGTH } from '../shared/secrets.ts';
import { WEATHER, WEATHER_REQ, weatherHistoryApi } from './helpers/access-fixtures.ts';
import { ROOT } from './helpers/processes.ts';
import { ConsoleClient, orgWithUser } from './helpers/console-http.ts';
import { balanceOf, call, closeDb, db, demo, ledgerOf, newOrg, query, stack } from './helpers/stack.ts';

const SHOP = 'shop.example.test';
const VALID_KEY = 'wk_demo_valid_key_123';
const DENIED_KEY = 'wk_demo_denied_key';
const WRONG_KEY = 'wk_wrong_key_not_real_987';
const SHOP_EMAIL = 'demo@shop.example.test';
const SHOP_PASSWORD = 'correct-horse';
const WRONG_PASSWORD = 'battery-staple-wrong';
const ALL_SECRETS = [VALID_KEY, DENIED_KEY, WRONG_KEY, SHOP_PASSWORD, WRONG_PASSWORD];

const W_API = '@conn-fixture-weather';
const S_API = '@conn-fixture-shop';
const SHOP_REQ = { kind: 'account' as const, name: 'shop_account', site: SHOP };

const weatherFixture = weatherHistoryApi(W_API, 'Connection fixture: weather history');

const shopFixture: ApiDefinition = {
  handle: S_API,
  name: 'Connection fixture: shop account',
  description: 'Reads the signed-in shop account (test fixture).',
  category: 'commerce',
  website_url: `http://${SHOP}/`,
  sites: [{ name: 'Northwind Outfitters', host: SHOP }],
  operations: [
    {
      name: 'order_count',
      label: 'Number of orders on the account',
      description: 'Needs the shop_account connection.',
      cost_credits: 1,
      default_version: 1,
      access: [SHOP_REQ],
      versions: [
        {
          version: 1,
          input_schema: { type: 'object', additionalProperties: false, properties: {} },
          output_schema: {
            type: 'object',
            additionalProperties: false,
            required: ['name', 'orders'],
            properties: { name: { type: 'string' }, orders: { type: 'integer' } },
          },
          examples: [],
          recipe: {
            engine: 'http',
            hosts: [SHOP],
            secrets: ['SHOP_EMAIL', 'SHOP_PASSWORD'],
            steps: [
              {
                type: 'request',
                name: 'Sign in to the API',
                method: 'POST',
                url: `http://${SHOP}/api/session`,
                json: { email: '{{secrets.SHOP_EMAIL}}', password: '{{secrets.SHOP_PASSWORD}}' },
                parse: 'json',
                save_as: 'session',
              },
              { type: 'request', name: 'Who am I', url: `http://${SHOP}/api/me`, headers: { Authorization: 'Bearer {{vars.session.token}}' }, parse: 'json', save_as: 'me' },
              { type: 'request', name: 'Orders', url: `http://${SHOP}/api/orders`, headers: { Authorization: 'Bearer {{vars.session.token}}' }, parse: 'json', save_as: 'orders' },
              { type: 'extract', from: { var: 'me' }, fields: { name: { type: 'text', pointer: '/name' } }, save_as: 'who' },
            ],
            output: { name: '{{vars.who.name}}', orders: '{{vars.orders.orders.length}}' },
          },
        },
      ],
    },
  ],
};

const ring = () => loadKeyring(loadConfig());

async function connect(orgId: string, req: { kind: 'account' | 'access_key'; name: string; site: string }, secret: unknown) {
  return addConnection(db(), await ring(), { orgId, ...req, secret });
}

/** `npm run admin -- …` against the test database; returns the JSON it printed and the raw output. */
async function admin(args: string[], stdin?: string): Promise<{ code: number | null; json: any; out: string }> {
  const proc = spawn(process.execPath, ['--import', 'tsx', 'apps/admin/main.ts', ...args], {
    cwd: ROOT,
    env: { ...process.env, DATABASE_URL: stack().databaseUrl, LOG_LEVEL: 'warn' },
    stdio: ['pipe', 'pipe', 'pipe'],
  });
  let out = '';
  proc.stdout.on('data', (c: Buffer) => (out += c.toString()));
  proc.stderr.on('data', (c: Buffer) => (out += c.toString()));
  proc.stdin.end(stdin ?? '');
  const code = await new Promise<number | null>((r) => proc.once('exit', r));
  const line = out.split('\n').filter((l) => l.startsWith('{')).pop();
  return { code, json: line ? JSON.parse(line) : undefined, out };
}

const weatherQuery = (city = 'London', date = '2025-05-01') => ({ api: W_API, operation: 'history', input: { city, date } });
const shopQuery = () => ({ api: S_API, operation: 'order_count', input: {} });

function expectNoSecrets(...texts: string[]) {
  for (const t of texts) for (const s of ALL_SECRETS) expect(t.includes(s), `a secret appeared in: ${t.slice(0, 300)}`).toBe(false);
}

async function requestRows(orgId: string) {
  return (await db().query('SELECT * FROM requests WHERE org_id = $1', [orgId])).rows;
}

/** An error after the reservation: released, nothing charged, request row failed with the code. */
async function expectReleased(orgId: string, res: { body: any; text: string }, code: string, credits: number) {
  expect(res.body.error.code).toBe(code);
  expect(res.body.error.receipt.billing).toEqual({ status: 'released', reserved_credits: credits, charged_credits: 0 });
  const b = await balanceOf(orgId);
  expect(b.charged).toBe(0);
  expect(b.reserved).toBe(0);
  expect((await ledgerOf(orgId)).map((l) => l.kind)).toEqual(['reserve', 'release']);
  const rows = await requestRows(orgId);
  expect(rows).toHaveLength(1);
  expect(rows[0].error_code).toBe(code);
  expectNoSecrets(res.text, JSON.stringify(rows));
}

beforeAll(async () => {
  const validateRecipe = (r: unknown) => void parseRecipe(r);
  await publishApi(db(), weatherFixture, { validateRecipe });
  await publishApi(db(), shopFixture, { validateRecipe });
});
afterAll(async () => {
  await closeDb();
});
beforeEach(async () => {
  await demo('/__demo/reset');
});

describe('before dispatch (API)', () => {
  it('a missing access key is 409 access_required with details.access; no charge, no ledger row, no request row', async () => {
    const org = await newOrg(10);
    const res = await query(org.api_key, weatherQuery());
    expect(res.status).toBe(409);
    expect(res.body.error).toMatchObject({ type: 'access_error', code: 'access_required', status: 409, retryable: false });
    expect(res.body.error.details.access).toEqual([
      {
        kind: 'access_key',
        name: 'WEATHER_API_KEY',
        site: WEATHER,
        status: 'missing',
        add_url: `${stack().baseUrl}/console/connections/new?kind=access_key&name=WEATHER_API_KEY&site=${WEATHER}`,
      },
    ]);
    expect(res.body.error.receipt).toBeUndefined();
    expect(await balanceOf(org.org_id)).toEqual({ granted: 10, available: 10, reserved: 0, charged: 0 });
    expect(await ledgerOf(org.org_id)).toEqual([]);
    expect(await requestRows(org.org_id)).toEqual([]);
    // The same with a missing account.
    const shop = await query(org.api_key, shopQuery());
    expect(shop.status).toBe(409);
    expect(shop.body.error.details.access).toMatchObject([{ kind: 'account', name: 'shop_account', site: SHOP, status: 'missing' }]);
    expect(await requestRows(org.org_id)).toEqual([]);
  });

  it('a connection needing a fresh sign-in is 409 auth_required; a disconnected one is 409 auth_revoked; nothing charged', async () => {
    const org = await newOrg(10);
    const c = await connect(org.org_id, WEATHER_REQ, { WEATHER_API_KEY: VALID_KEY });
    await expireConnection(db(), c.connection_id);
    const expired = await query(org.api_key, weatherQuery());
    expect(expired.status).toBe(409);
    expect(expired.body.error).toMatchObject({ code: 'auth_required', retryable: false });
    expect(expired.body.error.details.access).toMatchObject([{ name: 'WEATHER_API_KEY', status: 'needs_reauth' }]);

    await revokeConnection(db(), c.connection_id);
    const revoked = await query(org.api_key, weatherQuery());
    expect(revoked.status).toBe(409);
    expect(revoked.body.error).toMatchObject({ code: 'auth_revoked', retryable: false });
    expect(revoked.body.error.details.access).toMatchObject([{ name: 'WEATHER_API_KEY', status: 'revoked' }]);

    expect(await ledgerOf(org.org_id)).toEqual([]);
    expect(await requestRows(org.org_id)).toEqual([]);
    expectNoSecrets(expired.text, revoked.text);

    // Connecting again makes it usable.
    await connect(org.org_id, WEATHER_REQ, { WEATHER_API_KEY: VALID_KEY });
    const ok = await query(org.api_key, weatherQuery());
    expect(ok.status).toBe(200);
  });
});

describe('running with a connection', () => {
  it('a valid access key runs and is charged; the secret is in no response, request row or status lookup', async () => {
    const org = await newOrg(10);
    await connect(org.org_id, WEATHER_REQ, { WEATHER_API_KEY: VALID_KEY });
    const res = await query(org.api_key, weatherQuery(), { 'Idempotency-Key': `conn-${org.org_id}` });
    expect(res.status, res.text).toBe(200);
    expect(res.body.data.output).toEqual({ city: 'London', date: '2025-05-01', min_c: 8.2, max_c: 18.3 });
    expect(res.body.data.receipt.billing).toEqual({ status: 'settled', reserved_credits: 2, charged_credits: 2 });
    const lookup = await call('GET', `/v1/query/requests/${res.body.data.receipt.request_id}`, { key: org.api_key });
    expect(lookup.status).toBe(200);
    // A connected account's result is never cached: neither answer may be stored on the way.
    expect(res.headers.get('cache-control')).toBe('no-store');
    expect(lookup.headers.get('cache-control')).toBe('no-store');
    expectNoSecrets(res.text, lookup.text, JSON.stringify(await requestRows(org.org_id)), [...res.headers.entries()].join('\n'));
    expect((await demo('/__demo/state')).weather_history_calls).toBeGreaterThanOrEqual(1);
  });

  it('an identical keyed retry replays its retained result even after the connection was revoked', async () => {
    const org = await newOrg(10);
    const c = await connect(org.org_id, WEATHER_REQ, { WEATHER_API_KEY: VALID_KEY });
    const headers = { 'Idempotency-Key': `revoked-${org.org_id}` };
    const first = await query(org.api_key, weatherQuery(), headers);
    expect(first.status, first.text).toBe(200);
    await revokeConnection(db(), c.connection_id);
    const again = await query(org.api_key, weatherQuery(), headers);
    expect(again.status, again.text).toBe(200);
    expect(again.headers.get('idempotency-replayed')).toBe('true');
    expect(again.body).toEqual(first.body);
    // Not retained under a key: the same query now is auth_revoked.
    expect((await query(org.api_key, weatherQuery())).body.error.code).toBe('auth_revoked');
    expect((await ledgerOf(org.org_id)).map((l) => l.kind)).toEqual(['reserve', 'settle']);
  });

  it('an account connection {email, password} reaches the recipe as SHOP_EMAIL / SHOP_PASSWORD', async () => {
    const org = await newOrg(10);
    await connect(org.org_id, SHOP_REQ, { email: SHOP_EMAIL, password: SHOP_PASSWORD });
    const res = await query(org.api_key, shopQuery());
    expect(res.status, res.text).toBe(200);
    expect(res.body.data.output).toMatchObject({ orders: 2 });
    expect(typeof res.body.data.output.name).toBe('string');
    expectNoSecrets(res.text, JSON.stringify(await requestRows(org.org_id)));
  });

  it('a wrong access key is 422 credentials_rejected, released and not charged', async () => {
    const org = await newOrg(10);
    await connect(org.org_id, WEATHER_REQ, { WEATHER_API_KEY: WRONG_KEY });
    const res = await query(org.api_key, weatherQuery());
    expect(res.status, res.text).toBe(422);
    await expectReleased(org.org_id, res, 'credentials_rejected', 2);
  });

  it('a wrong account password is 422 credentials_rejected, released and not charged', async () => {
    const org = await newOrg(10);
    await connect(org.org_id, SHOP_REQ, { email: SHOP_EMAIL, password: WRONG_PASSWORD });
    const res = await query(org.api_key, shopQuery());
    expect(res.status, res.text).toBe(422);
    await expectReleased(org.org_id, res, 'credentials_rejected', 1);
  });

  it('a connection stored before the minimum secret length fails closed: 409 auth_required (secret_too_short), released, nothing sent to the site', async () => {
    const org = await newOrg(10);
    // A row as addConnection wrote it before it refused short values (the stored format of docs/connections.md).
    const key = (await ring()).current;
    const row = { id: `conn_${randomBytes(12).toString('hex')}`, org_id: org.org_id, ...WEATHER_REQ };
    const iv = randomBytes(12);
    const cipher = createCipheriv('aes-256-gcm', key.key, iv);
    cipher.setAAD(Buffer.from(`wqs-connection:v1|${row.id}|${row.org_id}|${row.kind}|${row.name}|${row.site}`));
    const ciphertext = Buffer.concat([cipher.update(JSON.stringify({ WEATHER_API_KEY: 'wk' }), 'utf8'), cipher.final()]);
    await db().query(
      `INSERT INTO connections (id, org_id, kind, name, site, status, secret_ciphertext, secret_iv, secret_tag, key_id, key_version, secret_names)
       VALUES ($1, $2, $3, $4, $5, 'active', $6, $7, $8, $9, 1, $10)`,
      [row.id, row.org_id, row.kind, row.name, row.site, ciphertext, iv, cipher.getAuthTag(), key.id, ['WEATHER_API_KEY']],
    );
    const res = await query(org.api_key, weatherQuery());
    expect(res.status, res.text).toBe(409);
    expect(res.body.error).toMatchObject({ code: 'auth_required', details: { reason: 'secret_too_short', access: [{ name: 'WEATHER_API_KEY', status: 'needs_reauth' }] } });
    expect(res.body.error.message).toMatch(/shorter than 3 characters/);
    await expectReleased(org.org_id, res, 'auth_required', 2);
    expect(((await demo('/__demo/state')) as { requests: Record<string, number> }).requests[WEATHER] ?? 0).toBe(0);
    // The row now says it must be added again, as the console shows it, and the next query is
    // refused before anything is reserved.
    expect((await db().query('SELECT status FROM connections WHERE id = $1', [row.id])).rows[0].status).toBe('needs_reauth');
    expect(await loadSecrets(db(), await ring(), org.org_id, [WEATHER_REQ])).toEqual({ ok: false, items: [{ ...WEATHER_REQ, status: 'needs_reauth' }] });
    const again = await query(org.api_key, weatherQuery());
    expect(again.status, again.text).toBe(409);
    expect(again.body.error, again.text).toMatchObject({ code: 'auth_required', details: { access: [{ name: 'WEATHER_API_KEY', status: 'needs_reauth' }] } });
    // Refused before anything was reserved: the ledger holds the first query's release only.
    expect((await ledgerOf(org.org_id)).map((l) => l.kind)).toEqual(['reserve', 'release']);
  });

  it("an access error's add_url opens the console's form filled in, through sign-in; saved there, the query runs", async () => {
    const { org, email, password } = await orgWithUser('owner', 10);
    const res = await query(org.api_key, weatherQuery());
    expect(res.status, res.text).toBe(409);
    const addUrl = new URL(res.body.error.details.access[0].add_url);
    const path = `${addUrl.pathname}${addUrl.search}`;
    expect(path).toBe(`/console/connections/new?kind=access_key&name=WEATHER_API_KEY&site=${WEATHER}`);

    // Signed out, the link goes to sign-in and, signed in, back to itself.
    const browser = new ConsoleClient();
    const out = await browser.get(path);
    expect(out.status).toBe(303);
    expect(out.location).toBe(`/console/sign-in?next=${encodeURIComponent(path)}`);
    const signInPage = await browser.get(out.location!);
    expect(signInPage.text).toContain(`name="next" value="${path.replace(/&/g, '&amp;')}"`);
    const signedIn = await browser.submit(out.location!, '/console/sign-in', { email, password, next: path });
    expect(signedIn.status).toBe(303);
    expect(signedIn.location).toBe(path);

    // The form, filled in with what the workflow asked for.
    const form = await browser.get(path);
    expect(form.status).toBe(200);
    expect(form.text).toMatch(/<option value="access_key" selected>/);
    expect(form.text).toMatch(/<input id="name" name="name" required value="WEATHER_API_KEY"/);
    expect(form.text).toMatch(new RegExp(`<input id="site" name="site" required value="${WEATHER.replace(/\./g, '\\.')}"`));
    const saved = await browser.submit(path, '/console/connections', { kind: 'access_key', name: 'WEATHER_API_KEY', site: WEATHER, value: VALID_KEY });
    expect(saved.status).toBe(303);
    const ok = await query(org.api_key, weatherQuery());
    expect(ok.status, ok.text).toBe(200);

    // Only that exact shape is returned to after sign-in: another path, extra fields or a bad name are not.
    for (const next of [`${path}&x=1`, '/console/connections/new?kind=access_key&name=bad name&site=a.test', '//evil.example/console/connections/new?kind=account&name=a&site=b.test', '/console/keys']) {
      const again = new ConsoleClient();
      const r = await again.submit('/console/sign-in', '/console/sign-in', { email, password, next });
      expect(r.status, next).toBe(303);
      expect(r.location, next).toBe('/console');
    }
  });

  it('a key the site denies is 422 source_permission_denied, released and not charged', async () => {
    const org = await newOrg(10);
    await connect(org.org_id, WEATHER_REQ, { WEATHER_API_KEY: DENIED_KEY });
    const res = await query(org.api_key, weatherQuery());
    expect(res.status, res.text).toBe(422);
    await expectReleased(org.org_id, res, 'source_permission_denied', 2);
  });

  it('a connection without the variable the recipe needs is 422 credentials_missing, released and not charged', async () => {
    const org = await newOrg(10);
    await connect(org.org_id, WEATHER_REQ, { SOME_OTHER_KEY: VALID_KEY });
    const res = await query(org.api_key, weatherQuery());
    expect(res.status, res.text).toBe(422);
    await expectReleased(org.org_id, res, 'credentials_missing', 2);
    expect(res.body.error.details).toMatchObject({ name: 'WEATHER_API_KEY' });
  });
});

describe('isolation and storage', () => {
  it("a public workflow uses the calling organization's connection, never another organization's", async () => {
    const owner = await newOrg(10, 'Owner org');
    const other = await newOrg(10, 'Other org');
    await connect(owner.org_id, WEATHER_REQ, { WEATHER_API_KEY: VALID_KEY });
    await connect(owner.org_id, SHOP_REQ, { email: SHOP_EMAIL, password: SHOP_PASSWORD });
    // The other organization has nothing: access_required, not the owner's key.
    const none = await query(other.api_key, weatherQuery());
    expect(none.status).toBe(409);
    expect(none.body.error.code).toBe('access_required');
    // With its own (wrong) key, its own key is what the site sees.
    await connect(other.org_id, WEATHER_REQ, { WEATHER_API_KEY: WRONG_KEY });
    const own = await query(other.api_key, weatherQuery());
    expect(own.status).toBe(422);
    expect(own.body.error.code).toBe('credentials_rejected');
    // And the owner's still works.
    expect((await query(owner.api_key, weatherQuery())).status).toBe(200);
  });

  it("a revoke or expire scoped to one organization cannot touch another organization's connection", async () => {
    const owner = await newOrg(10, 'Owner org');
    const other = await newOrg(10, 'Other org');
    const c = await connect(owner.org_id, WEATHER_REQ, { WEATHER_API_KEY: VALID_KEY });
    await expect(revokeConnection(db(), c.connection_id, other.org_id)).rejects.toThrow(/not found/);
    await expect(expireConnection(db(), c.connection_id, other.org_id)).rejects.toThrow(/not found/);
    expect((await db().query('SELECT status, revoked_at FROM connections WHERE id = $1', [c.connection_id])).rows[0]).toEqual({ status: 'active', revoked_at: null });
    expect((await query(owner.api_key, weatherQuery())).status).toBe(200);
    // Its own organization can.
    expect((await revokeConnection(db(), c.connection_id, owner.org_id)).status).toBe('revoked');
  });

  it('ciphertext at rest contains no plaintext and is bound to its organization', async () => {
    const org = await newOrg(1);
    const other = await newOrg(1);
    const c = await connect(org.org_id, SHOP_REQ, { email: SHOP_EMAIL, password: SHOP_PASSWORD });
    const row = (await db().query('SELECT * FROM connections WHERE id = $1', [c.connection_id])).rows[0];
    const stored = Buffer.concat([row.secret_ciphertext, row.secret_iv, row.secret_tag]);
    for (const s of [SHOP_EMAIL, SHOP_PASSWORD]) {
      expect(stored.includes(Buffer.from(s))).toBe(false);
      expect(JSON.stringify(row).includes(s)).toBe(false);
    }
    expect(row.secret_names).toEqual(['email', 'password']);
    expect(c).not.toHaveProperty('secret');
    // Decrypts for its organization…
    const mine = await loadSecrets(db(), await ring(), org.org_id, [SHOP_REQ]);
    expect(mine).toEqual({
      ok: true,
      secrets: { email: SHOP_EMAIL, password: SHOP_PASSWORD, SHOP_EMAIL, SHOP_PASSWORD },
      // the engines send each secret to its connection's site only
      sites: { email: SHOP, password: SHOP, SHOP_EMAIL: SHOP, SHOP_PASSWORD: SHOP },
    });
    // …but the same ciphertext copied into another organization's row does not.
    await db().query(
      `INSERT INTO connections (id, org_id, kind, name, site, status, secret_ciphertext, secret_iv, secret_tag, key_id)
       VALUES ('conn_' || substr(md5(random()::text), 1, 24), $1, 'account', 'shop_account', $2, 'active', $3, $4, $5, $6)`,
      [other.org_id, SHOP, row.secret_ciphertext, row.secret_iv, row.secret_tag, row.key_id],
    );
    const err = await loadSecrets(db(), await ring(), other.org_id, [SHOP_REQ]).then(
      () => null,
      (e: Error) => e,
    );
    expect(err?.message).toMatch(/cannot be decrypted/);
    expectNoSecrets(err!.message);
    // What the worker sees when a connection stopped being usable after the API's check.
    await expireConnection(db(), c.connection_id);
    expect(await loadSecrets(db(), await ring(), org.org_id, [SHOP_REQ, WEATHER_REQ])).toEqual({
      ok: false,
      items: [
        { ...SHOP_REQ, status: 'needs_reauth' },
        { ...WEATHER_REQ, status: 'missing' },
      ],
    });
  });

  it('admin: connection add prints the id but never the secret; expire and revoke set the states', async () => {
    const org = await newOrg(10);
    const add = await admin(['connection', 'add', '--org', org.org_id, '--kind', 'access_key', '--name', 'WEATHER_API_KEY', '--site', WEATHER, '--secret', JSON.stringify({ WEATHER_API_KEY: VALID_KEY })]);
    expect(add.code, add.out).toBe(0);
    expect(add.json).toMatchObject({ org_id: org.org_id, kind: 'access_key', name: 'WEATHER_API_KEY', site: WEATHER, status: 'active', secret_names: ['WEATHER_API_KEY'] });
    expect(add.json.connection_id).toMatch(/^conn_[0-9a-f]{24}$/);
    expectNoSecrets(add.out);
    expect((await query(org.api_key, weatherQuery())).status).toBe(200);

    const expire = await admin(['connection', 'expire', '--id', add.json.connection_id]);
    expect(expire.json).toMatchObject({ connection_id: add.json.connection_id, status: 'needs_reauth' });
    expect((await query(org.api_key, weatherQuery())).body.error.code).toBe('auth_required');

    const revoke = await admin(['connection', 'revoke', '--id', add.json.connection_id]);
    expect(revoke.json).toMatchObject({ connection_id: add.json.connection_id, status: 'revoked' });
    expect((await query(org.api_key, weatherQuery())).body.error.code).toBe('auth_revoked');

    // The secret can come from stdin (kept out of shell history); a bad secret is refused without being echoed.
    const stdin = await admin(['connection', 'add', '--org', org.org_id, '--kind', 'account', '--name', 'shop_account', '--site', SHOP, '--secret', '-'], JSON.stringify({ email: SHOP_EMAIL, password: SHOP_PASSWORD }));
    expect(stdin.code, stdin.out).toBe(0);
    expect(stdin.json.secret_names).toEqual(['email', 'password']);
    expectNoSecrets(stdin.out);
    const bad = await admin(['connection', 'add', '--org', org.org_id, '--kind', 'account', '--name', 'shop_account', '--site', SHOP, '--secret', `{"password": ${JSON.stringify(SHOP_PASSWORD)}, "n": 1}`]);
    expect(bad.code).not.toBe(0);
    expect(bad.json).toMatchObject({ success: false, error: { code: 'invalid_input', param: 'secret.n' } });
    expectNoSecrets(bad.out);

    // A mistyped flag carrying a secret: refused by name with the usage, no stack trace, no secret.
    const typo = await admin(['connection', 'add', '--org', org.org_id, `--secrets=${JSON.stringify({ password: SHOP_PASSWORD })}`]);
    expect(typo.code).toBe(2);
    expect(typo.out).toMatch(/^admin: Unknown option '--secrets'\nusage:\n/);
    expect(typo.out).not.toMatch(/\n\s+at /);
    expectNoSecrets(typo.out);
    const help = await admin(['--help']);
    expect(help.code).toBe(0);
    expect(help.out).toMatch(/^usage:\n/);
  });

  it('a secret shorter than redaction can protect is refused on every path that stores one: invalid_input, param at the field, details.issues', async () => {
    const org = await newOrg(10);
    const issue = (field: string) => ({
      code: 'invalid_input',
      param: `secret.${field}`,
      details: { issues: [{ path: `secret.${field}`, message: expect.stringContaining(`at least ${MIN_SECRET_LENGTH} characters`) }] },
    });
    // The module every path goes through (the console and the admin command call it).
    for (const [req, secret, field] of [
      [SHOP_REQ, { email: SHOP_EMAIL, password: 'ab' }, 'password'],
      [WEATHER_REQ, { WEATHER_API_KEY: 'k' }, 'WEATHER_API_KEY'],
      [WEATHER_REQ, 'k2', 'WEATHER_API_KEY'], // an access key as a bare string
    ] as const) {
      const err = await connect(org.org_id, req, secret).then(
        () => undefined,
        (e: unknown) => e,
      );
      expect(err).toBeInstanceOf(ConnectionError);
      expect(err).toMatchObject(issue(field));
    }
    // The admin command prints the spec's envelope (and never the value).
    const short = await admin(['connection', 'add', '--org', org.org_id, '--kind', 'access_key', '--name', 'WEATHER_API_KEY', '--site', WEATHER, '--secret', '-'], JSON.stringify({ WEATHER_API_KEY: 'q7' }));
    expect(short.code).toBe(1);
    expect(short.json).toMatchObject({ success: false, error: { type: 'validation_error', status: 400, ...issue('WEATHER_API_KEY') } });
    expect(short.out).not.toContain('q7');
    expect((await db().query('SELECT count(*)::int AS n FROM connections WHERE org_id = $1', [org.org_id])).rows[0].n).toBe(0);
    // The minimum is redaction's: a value that long is stored and runs.
    await connect(org.org_id, WEATHER_REQ, { WEATHER_API_KEY: 'x'.repeat(MIN_SECRET_LENGTH) });
  });

  it('a site is a host name as access requirements name them: no port, no empty label; the root dot and case do not matter', async () => {
    const org = await newOrg(10);
    for (const site of [`${WEATHER}:8443`, `${WEATHER}..`, '.example.test', 'weather..example.test', `-${WEATHER}`, `${'a'.repeat(64)}.example.test`, 'wea ther.example.test']) {
      const err = await connect(org.org_id, { ...WEATHER_REQ, site }, { WEATHER_API_KEY: VALID_KEY }).then(() => undefined, (e: unknown) => e);
      expect(err, site).toMatchObject({ code: 'invalid_input', param: 'site', details: { issues: [{ path: 'site', message: 'site must be a host name, e.g. shop.example.test' }] } });
    }
    expect((await db().query('SELECT count(*)::int AS n FROM connections WHERE org_id = $1', [org.org_id])).rows[0].n).toBe(0);
    // Stored as the requirement names it, so queries find it.
    const kept = await connect(org.org_id, { ...WEATHER_REQ, site: ` ${WEATHER.toUpperCase()}. ` }, { WEATHER_API_KEY: VALID_KEY });
    expect(kept).toMatchObject({ site: WEATHER });
    const res = await query(org.api_key, weatherQuery());
    expect(res.status, res.text).toBe(200);
  });

  it('the demo catalog names the same connections (when its access operations are published)', async (ctx) => {
    const r = await db().query(
      `SELECT a.handle, o.name, o.access FROM operations o JOIN apis a ON a.id = o.api_id
        WHERE a.visibility = 'public' AND jsonb_array_length(o.access) > 0 AND a.handle IN ('@weather', '@shop-api')`,
    );
    if (r.rowCount === 0) ctx.skip();
    const needs = new Set(r.rows.flatMap((row) => (row.access as Array<{ kind: string; name: string; site: string }>).map((a) => `${a.kind} ${a.name} ${a.site}`)));
    for (const n of needs) expect([`access_key WEATHER_API_KEY ${WEATHER}`, `account shop_account ${SHOP}`]).toContain(n);
    const org = await newOrg(20);
    await connect(org.org_id, WEATHER_REQ, { WEATHER_API_KEY: VALID_KEY });
    await connect(org.org_id, SHOP_REQ, { email: SHOP_EMAIL, password: SHOP_PASSWORD });
    const byName = new Set(r.rows.map((row) => `${row.handle} ${row.name}`));
    if (byName.has('@weather weather_history')) {
      const res = await query(org.api_key, { api: '@weather', operation: 'weather_history', input: { city: 'London', date: '2025-05-01' } });
      expect(res.status, res.text).toBe(200);
      expect(res.body.data.output).toMatchObject({ city: 'London', date: '2025-05-01' });
      expectNoSecrets(res.text);
    }
    if (byName.has('@shop-api get_order')) {
      const res = await query(org.api_key, { api: '@shop-api', operation: 'get_order', input: { order_id: 'ORD-100001' } });
      expect(res.status, res.text).toBe(200);
      expect(res.body.data.output).toMatchObject({ order_id: 'ORD-100001' });
      expectNoSecrets(res.text);
    }
  });

  it('the catalog shows what each operation needs', async () => {
    const res = await call('GET', `/v1/catalog/detail?api=${encodeURIComponent(W_API)}`);
    expect(res.status, res.text).toBe(200);
    const text = JSON.stringify(res.body.data);
    expect(text).toContain('"access":"own"');
    expect(text).toContain(JSON.stringify([WEATHER_REQ]).slice(1, -1));
  });
});
