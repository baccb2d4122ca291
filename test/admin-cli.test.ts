// `npm run admin` prints what others wrote (organization names from the console's sign-up,
// connection names, websites' answers in a build's results) to an operator's terminal. Against the
// test stack's database: no character a terminal acts on reaches it raw, and the JSON still reads
// back exactly.
import { spawn } from 'node:child_process';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, describe, expect, it } from 'vitest';
import { changeMember, createUserInOrg } from '../shared/accounts/users.ts';
import { createKey, createOrg } from '../shared/db/orgs.ts';
import { terminalJson, terminalText } from '../shared/format/terminal.ts';
import { call, closeDb, db, newOrg, stack } from './helpers/stack.ts';

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
afterAll(closeDb);

async function admin(args: string[], stdin?: string, env: Record<string, string> = {}): Promise<{ code: number | null; stdout: string; stderr: string }> {
  const proc = spawn(process.execPath, ['--import', 'tsx', 'apps/admin/main.ts', ...args], {
    cwd: ROOT,
    env: { ...process.env, DATABASE_URL: stack().databaseUrl, LOG_LEVEL: 'warn', ...env },
    stdio: [stdin === undefined ? 'ignore' : 'pipe', 'pipe', 'pipe'],
  });
  if (stdin !== undefined) proc.stdin!.end(stdin);
  let stdout = '';
  let stderr = '';
  proc.stdout!.on('data', (c: Buffer) => (stdout += c.toString('utf8')));
  proc.stderr!.on('data', (c: Buffer) => (stderr += c.toString('utf8')));
  const code = await new Promise<number | null>((r) => proc.once('exit', r));
  return { code, stdout, stderr };
}

// ESC/BEL (C0), CSI and OSC as single C1 characters, an OSC 52 clipboard write, a right-to-left
// override and isolate, DEL, a line separator.
const HOSTILE = 'Acme \u001b[2J\u0007 \u009b31m red \u009d52;c;cm0gLXJmIH4=\u009c \u202eexe.txt\u2066 \u007f\u2028end';
/** What a terminal would act on: C0 (but newline and tab), DEL, C1, separators, bidirectional controls. */
const ACTIVE = /[\u0000-\u0008\u000b-\u001f\u007f-\u009f\u061c\u200e\u200f\u2028\u2029\u202a-\u202e\u2066-\u2069]/;

describe('admin output with hostile data from the database', () => {
  it('org show: the name is escaped on the terminal and reads back exactly from the JSON', async () => {
    const org = await createOrg(db(), HOSTILE, 0);
    const r = await admin(['org', 'show', '--org', org.org_id]);
    expect(r.code, r.stderr).toBe(0);
    expect(ACTIVE.test(r.stdout), JSON.stringify(r.stdout)).toBe(false);
    expect(JSON.parse(r.stdout).name).toBe(HOSTILE);
  });

  it('an error message and a usage refusal carrying such characters are escaped too', async () => {
    const missing = await admin(['org', 'show', '--org', `org_${HOSTILE}`]);
    expect(missing.code).toBe(1);
    expect(ACTIVE.test(missing.stderr), JSON.stringify(missing.stderr)).toBe(false);
    expect(JSON.parse(missing.stderr.trim()).error).toContain(HOSTILE);
    const unknown = await admin(['org', HOSTILE]);
    expect(unknown.code).toBe(2);
    expect(ACTIVE.test(unknown.stderr), JSON.stringify(unknown.stderr)).toBe(false);
    expect(unknown.stderr).toContain('unknown command');
  });

  it('terminalJson and terminalText', () => {
    const value = { name: HOSTILE, list: ['\u009b', 'plain é ü 漢字 🙂'], n: 1 };
    expect(ACTIVE.test(terminalJson(value))).toBe(false);
    expect(JSON.parse(terminalJson(value))).toEqual(value);
    expect(terminalJson({ a: 'plain é 漢字 🙂' })).toBe(JSON.stringify({ a: 'plain é 漢字 🙂' }));
    expect(terminalText('a\u009bb\u001bc\td\ne')).toBe('a\\u009bb\\u001bc\td\ne');
  });
});

describe('admin key commands', () => {
  it('key list shows ids and prefixes, never a key; key revoke --id revokes a key the operator does not hold, at once', async () => {
    const org = await newOrg(1);
    const other = await newOrg(1);
    const second = await createKey(db(), org.org_id);
    const list = await admin(['key', 'list', '--org', org.org_id]);
    expect(list.code, list.stderr).toBe(0);
    const keys = JSON.parse(list.stdout).keys as Array<{ key_id: string; prefix: string; revoked_at: string | null }>;
    expect(keys.map((k) => k.key_id).sort()).toEqual([org.key_id, second.key_id].sort());
    for (const secret of [org.api_key, second.api_key]) expect(list.stdout).not.toContain(secret);

    const revoked = await admin(['key', 'revoke', '--id', second.key_id]);
    expect(revoked.code, revoked.stderr).toBe(0);
    expect(JSON.parse(revoked.stdout)).toMatchObject({ key_id: second.key_id, org_id: org.org_id, revoked_at: expect.any(String) });
    expect((await call('GET', '/v1/auth', { key: second.api_key })).body.error.code).toBe('revoked_api_key');
    expect((await call('GET', '/v1/auth', { key: org.api_key })).status).toBe(200);
    expect((await call('GET', '/v1/auth', { key: other.api_key })).status).toBe(200);

    const unknown = await admin(['key', 'revoke', '--id', 'key_000000000000000000000000']);
    expect(unknown.code).toBe(1);
    expect(JSON.parse(unknown.stderr.trim()).error).toBe('API key key_000000000000000000000000 not found');
  });

  it('key list says who created each key: a member (and whether they still are one), an operator, or unknown', async () => {
    const org = await newOrg(1);
    const user = await createUserInOrg(db(), { email: `keys-${Date.now()}@example.com`, password: 'correct horse battery staple', orgId: org.org_id, role: 'admin' });
    const byMember = await createKey(db(), org.org_id, null, { via: 'console', userId: user.user_id, email: user.email });
    const legacy = await createKey(db(), org.org_id);
    await db().query('UPDATE api_keys SET created_via = NULL WHERE id = $1', [legacy.key_id]);
    await changeMember(db(), 'owner', org.org_id, user.user_id, null);
    const list = await admin(['key', 'list', '--org', org.org_id]);
    expect(list.code, list.stderr).toBe(0);
    const keys = new Map((JSON.parse(list.stdout).keys as Array<{ key_id: string }>).map((k) => [k.key_id, k]));
    expect(keys.get(byMember.key_id)).toMatchObject({ created_via: 'console', created_by: user.user_id, created_by_email: user.email, created_by_member: false });
    expect(keys.get(org.key_id)).toMatchObject({ created_via: 'operator', created_by: null, created_by_email: null });
    expect(keys.get(legacy.key_id)).toMatchObject({ created_via: null, created_by: null, created_by_email: null });
  });

  it('key revoke --key - takes the key from stdin, not the command line; one of --id and --key is required', async () => {
    const org = await newOrg(1);
    const r = await admin(['key', 'revoke', '--key', '-'], `${org.api_key}\n`);
    expect(r.code, r.stderr).toBe(0);
    expect(JSON.parse(r.stdout)).toMatchObject({ key_id: org.key_id, org_id: org.org_id });
    expect(r.stdout).not.toContain(org.api_key);
    expect((await call('GET', '/v1/auth', { key: org.api_key })).body.error.code).toBe('revoked_api_key');
    for (const args of [['key', 'revoke'], ['key', 'revoke', '--id', org.key_id, '--key', '-']]) {
      const refused = await admin(args);
      expect(refused.code).toBe(2);
      expect(refused.stderr).toContain('key revoke takes one of --id <key_id> or --key <api_key>|-');
    }
  });
});


describe('admin arguments are checked before anything is written', () => {
  const NO_STACK = /\n\s+at |node:internal|\.ts:\d+/;
  const grants = async (orgId: string) =>
    (await db().query(`SELECT count(*)::int AS n, coalesce(sum(amount), 0)::bigint AS total FROM credit_ledger WHERE org_id = $1 AND kind = 'grant'`, [orgId])).rows[0] as { n: number; total: number };
  const balance = async (orgId: string) =>
    (await db().query('SELECT granted, available, reserved, charged FROM credit_balances WHERE org_id = $1', [orgId])).rows[0] as Record<string, number>;

  it('credits grant refuses amounts that are not a positive decimal integer within the bound; the ledger is untouched', async () => {
    const org = await newOrg(3);
    const before = { balance: await balance(org.org_id), grants: await grants(org.org_id) };
    // Hexadecimal, exponent, padded and fractional forms Number() would take; zero; negative;
    // beyond the bound, beyond 2^53 (silently rounded before) and beyond bigint (a database error before).
    for (const amount of ['0x10', '1e3', ' 7', '1.0', '1.5', '-5', '0', '', 'abc', '1000000001', '9007199254740993', '99999999999999999999']) {
      // --credits=-5: parseArgs refuses a separate argument starting with a dash as ambiguous (exit 2 too).
      const r = await admin(['credits', 'grant', '--org', org.org_id, `--credits=${amount}`]);
      expect(r.code, `${amount}: ${r.stdout}${r.stderr}`).toBe(2);
      expect(r.stderr, amount).toMatch(amount === '' ? /--credits is required/ : /--credits must be a whole number of credits from 1 to 1000000000/);
      expect(r.stderr, amount).not.toMatch(NO_STACK);
      expect(r.stdout).toBe('');
    }
    expect(await balance(org.org_id)).toEqual(before.balance);
    expect(await grants(org.org_id)).toEqual(before.grants);

    const ok = await admin(['credits', 'grant', '--org', org.org_id, '--credits', '1000000000']);
    expect(ok.code, ok.stderr).toBe(0);
    const b = await balance(org.org_id);
    expect(b).toEqual({ ...before.balance, granted: before.balance.granted! + 1e9, available: before.balance.available! + 1e9 });
    expect(b.granted).toBe(b.available! + b.reserved! + b.charged!);
    expect(JSON.parse(ok.stdout)).toMatchObject({ org_id: org.org_id, granted_now: 1e9, balance: b });

    const unknown = await admin(['credits', 'grant', '--org', 'org_000000000000000000000000', '--credits', '5']);
    expect(unknown.code).toBe(1);
    expect(JSON.parse(unknown.stderr.trim()).error).toBe('organization org_000000000000000000000000 not found');
  });

  it('org create: credits as for grants (0 allowed), a name of 1 to 100 readable characters as the console takes; nothing created when refused', async () => {
    const tag = `cli-${Date.now()}`;
    for (const [args, said] of [
      [['--name', `${tag} a`, '--credits', '0x10'], /--credits must be a whole number of credits from 0 to 1000000000/],
      [['--name', `${tag} b`, '--credits=-1'], /--credits must be a whole number/],
      [['--name', '   ', '--credits', '1'], /--name must be 1 to 100 characters/],
      [['--name', `${tag} ${'x'.repeat(100)}`, '--credits', '1'], /--name must be 1 to 100 characters/],
      // Read by its members and invitees: as sign-up refuses, a name that shows as something it is not.
      [['--name', `${tag} Acme\u202Egnp.exe`, '--credits', '1'], /--name must not contain control characters or direction overrides/],
      [['--name', `${tag} Ac\u200Bme`, '--credits', '1'], /--name must not contain invisible characters/],
    ] as const) {
      const r = await admin(['org', 'create', ...args]);
      expect(r.code, r.stdout + r.stderr).toBe(2);
      expect(r.stderr).toMatch(said);
      expect(r.stderr).not.toMatch(NO_STACK);
    }
    expect((await db().query('SELECT count(*)::int AS n FROM organizations WHERE name LIKE $1', [`${tag}%`])).rows[0].n).toBe(0);
    const made = await admin(['org', 'create', '--name', `  ${tag} ok  `, '--credits', '0']);
    expect(made.code, made.stderr).toBe(0);
    const org = JSON.parse(made.stdout);
    expect(org).toMatchObject({ name: `${tag} ok`, credits: 0 });
    expect(await balance(org.org_id)).toEqual({ granted: 0, available: 0, reserved: 0, charged: 0 });
  });

  it('key create --expires-at takes an ISO 8601 date in the future, not whatever Date() parses', async () => {
    const org = await newOrg(1);
    const keys = async () => (await db().query('SELECT count(*)::int AS n FROM api_keys WHERE org_id = $1', [org.org_id])).rows[0].n as number;
    const before = await keys();
    for (const [value, said] of [
      ['1', /ISO 8601/],
      ['12', /ISO 8601/],
      ['tomorrow', /ISO 8601/],
      ['2099-02-30', /ISO 8601/],
      ['2020-01-01T00:00:00Z', /in the future/],
    ] as const) {
      const r = await admin(['key', 'create', '--org', org.org_id, '--expires-at', value]);
      expect(r.code, `${value}: ${r.stdout}${r.stderr}`).toBe(2);
      expect(r.stderr, value).toMatch(said);
    }
    expect(await keys()).toBe(before);
    const ok = await admin(['key', 'create', '--org', org.org_id, '--expires-at', '2099-01-31T12:00:00+02:00']);
    expect(ok.code, ok.stderr).toBe(0);
    expect(JSON.parse(ok.stdout).expires_at).toBe('2099-01-31T10:00:00.000Z');
  });

  it('a configuration that does not load is one JSON error and exit 1, not a stack trace', async () => {
    const r = await admin(['org', 'show', '--org', 'org_x'], undefined, { MCP_GET_RUN_WAITS_PER_ORG: 'many' });
    expect(r.code).toBe(1);
    expect(r.stderr).not.toMatch(NO_STACK);
    expect(JSON.parse(r.stderr.trim()).error).toMatch(/^Invalid configuration:\n {2}MCP_GET_RUN_WAITS_PER_ORG: /);
  });

  it('a refused argument is said even when the database cannot be reached (checked first, exit 2)', async () => {
    const down = { DATABASE_URL: 'postgres://nobody@127.0.0.1:1/none' };
    for (const [args, said] of [
      [['key', 'revoke'], 'key revoke takes one of --id <key_id> or --key <api_key>|-'],
      [['connection', 'add', '--org', 'org_x', '--kind', 'password', '--name', 'n', '--site', 's', '--secret', '{}'], '--kind must be account or access_key'],
      [['user', 'create', '--email', 'a@example.com', '--password', 'x', '--org', 'org_x', '--role', 'root'], '--role must be owner, admin or member'],
      [['credits', 'grant', '--org', 'org_x', '--credits', '1e3'], '--credits must be a whole number'],
    ] as const) {
      const r = await admin([...args], undefined, down);
      expect(r.code, `${args.join(' ')}: ${r.stderr}`).toBe(2);
      expect(r.stderr).toContain(said);
      expect(r.stderr).not.toMatch(/ECONNREFUSED/);
    }
    // Past the arguments, the database that cannot be reached is one JSON error, exit 1.
    const r = await admin(['org', 'show', '--org', 'org_x'], undefined, down);
    expect(r.code).toBe(1);
    expect(JSON.parse(r.stderr.trim()).error).toMatch(/ECONNREFUSED/);
  });

  it('a word after the command is refused, not ignored', async () => {
    const org = await newOrg(1);
    const r = await admin(['credits', 'grant', 'now', '--org', org.org_id, '--credits', '5']);
    expect(r.code).toBe(2);
    expect(r.stderr).toContain('unexpected argument "now"');
    expect((await balance(org.org_id)).granted).toBe(1);
  });
});
