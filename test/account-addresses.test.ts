// An address is one address however it is spelled in Unicode: full-width letters, a decomposed
// accent and the ordinary form are the same sign-in name, the same account and the same sign-in
// throttle (shared/accounts/users.ts normalizeEmail, migration 1700000002500_email_nfkc).
import fs from 'node:fs';
import path from 'node:path';
import { randomBytes } from 'node:crypto';
import { afterAll, describe, expect, it } from 'vitest';
import { AccountError, createUserInOrg, findUserByEmail } from '../shared/accounts/users.ts';
import { signUp } from '../shared/accounts/sessions.ts';
import { reserveAttempt } from '../shared/accounts/throttle.ts';
import { ROOT } from './helpers/processes.ts';
import { closeDb, db, newOrg } from './helpers/stack.ts';

const PASSWORD = 'correct horse battery staple';
afterAll(closeDb);

/** ASCII letters and digits in their full-width forms (U+FF01 block): reads as the same text. */
const fullWidth = (s: string) => s.replace(/[!-~]/g, (c) => String.fromCharCode(c.charCodeAt(0) + 0xfee0));

describe('addresses in compatibility form', () => {
  it('stores the ordinary form; the full-width and decomposed spellings find the same account and cannot make another', async () => {
    const tag = randomBytes(4).toString('hex');
    const org = await newOrg(0);
    const made = await createUserInOrg(db(), { email: fullWidth(`Dan-${tag}@Example.com`), password: PASSWORD, orgId: org.org_id, role: 'member' });
    expect(made.email).toBe(`dan-${tag}@example.com`);
    expect((await findUserByEmail(db(), `dan-${tag}@example.com`))?.id).toBe(made.user_id);
    expect((await findUserByEmail(db(), fullWidth(`DAN-${tag}@example.com`)))?.id).toBe(made.user_id);
    const taken = await signUp(db(), { email: `DAN-${tag}＠example.com`, password: PASSWORD, orgName: 'Lookalike', credits: 0 }).catch((e: unknown) => e);
    expect(taken).toBeInstanceOf(AccountError);
    expect(taken).toMatchObject({ code: 'email_taken' });

    // é as one code point and as e + combining acute: one address.
    const composed = `jos\u00e9-${tag}@example.com`;
    const user = await signUp(db(), { email: `jose\u0301-${tag}@example.com`, password: PASSWORD, orgName: 'Accents', credits: 0 });
    expect(user.email).toBe(composed);
    expect((await findUserByEmail(db(), composed))?.id).toBe(user.user_id);
  });

  it('counts sign-in attempts at one address in one bucket, whatever its spelling', async () => {
    const tag = randomBytes(4).toString('hex');
    const limits = { windowMs: 60_000, perIp: 100, perEmail: 2 };
    // Three client addresses, so only the address's bucket can refuse.
    expect(await reserveAttempt(db(), `198.51.100.${1}-${tag}`, `eve-${tag}@example.com`, limits)).toBe(0);
    expect(await reserveAttempt(db(), `198.51.100.${2}-${tag}`, fullWidth(`eve-${tag}@example.com`), limits)).toBe(0);
    expect(await reserveAttempt(db(), `198.51.100.${3}-${tag}`, `EVE-${tag}@EXAMPLE.COM`, limits)).toBeGreaterThan(0);
  });

  it('the migration brings stored addresses to that form, leaving a pair that would collide as it was', async () => {
    const tag = randomBytes(4).toString('hex');
    const org = await newOrg(0);
    // Rows as the service wrote them before: lower case, not in compatibility form.
    const insert = async (email: string) => {
      const id = `usr_${randomBytes(12).toString('hex')}`;
      await db().query(`INSERT INTO users (id, email, password_hash) VALUES ($1, $2, 'x')`, [id, email]);
      return id;
    };
    const alone = await insert(fullWidth(`fay-${tag}`) + '@example.com');
    const twin = await insert(fullWidth(`gus-${tag}`) + '@example.com');
    const plain = await insert(`gus-${tag}@example.com`);
    await db().query(`INSERT INTO member_invitations (id, org_id, email, role, token_hash) VALUES ($1, $2, $3, 'member', $4)`, [
      `inv_${randomBytes(12).toString('hex')}`,
      org.org_id,
      fullWidth(`hal-${tag}`) + '@example.com',
      randomBytes(32),
    ]);

    const file = fs.readFileSync(path.join(ROOT, 'shared/db/migrations/1700000002500_email_nfkc.sql'), 'utf8');
    await db().query(file.split('-- Down Migration')[0]!);

    const emailOf = async (id: string) => (await db().query('SELECT email FROM users WHERE id = $1', [id])).rows[0].email;
    expect(await emailOf(alone)).toBe(`fay-${tag}@example.com`);
    expect(await emailOf(plain)).toBe(`gus-${tag}@example.com`);
    expect(await emailOf(twin)).toBe(fullWidth(`gus-${tag}`) + '@example.com');
    const invited = await db().query('SELECT email FROM member_invitations WHERE org_id = $1', [org.org_id]);
    expect(invited.rows).toEqual([{ email: `hal-${tag}@example.com` }]);
  });
});
