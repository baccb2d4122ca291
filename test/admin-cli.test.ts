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

async function admin(args: string[], stdin?: string): Promise<{ code: number | null; stdout: string; stderr: string }> {
  const proc = spawn(process.execPath, ['--import', 'tsx', 'apps/admin/main.ts', ...args], {
    cwd: ROOT,
    env: { ...process.env, DATABASE_URL: stack().databaseUrl, LOG_LEVEL: 'warn' },
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

