// Who created each API key, over HTTP on the shared stack's API process: recorded when a member
// creates a key in the console (an operator's keys marked as such, older keys unknown), shown on the
// keys page (escaped; a removed member as removed, never another organization's data), the list
// filtered by creator; removing a member says how many of their keys still work and offers to revoke
// them in one CSRF form, which revokes exactly that member's working keys of this organization
// (then 401 revoked_api_key), is the 404 page for another organization's member and 403 for a Member.
import { afterAll, describe, expect, it } from 'vitest';
import { createUserInOrg } from '../shared/accounts/users.ts';
import { createKey } from '../shared/db/orgs.ts';
import { sha256 } from '../shared/ids.ts';
import { call, closeDb, db } from './helpers/stack.ts';
import { ConsoleClient, orgWithUser, PASSWORD, signedIn } from './helpers/console-http.ts';

afterAll(closeDb);

/** Create a key on the keys page as `who`; the key, shown this once. */
async function consoleKey(who: { client: ConsoleClient }): Promise<string> {
  const res = await who.client.submit('/console/keys', '/console/keys', {});
  expect(res.status).toBe(200);
  return /id="new-key" class="secret" readonly value="(svc_sk_[A-Za-z0-9]+)"/.exec(res.text)![1]!;
}

const keyRow = async (key: string) =>
  (await db().query('SELECT id, created_via, created_by, created_by_email, revoked_at FROM api_keys WHERE key_hash = $1', [sha256(key)])).rows[0];

/** The keys page's table row of a key (by its prefix), as text without tags. */
function rowOf(page: string, key: string): string | null {
  const rows = page.match(/<tr>[\s\S]*?<\/tr>/g) ?? [];
  return rows.find((r) => r.includes(`${key.slice(0, 12)}…`)) ?? null;
}

const authCode = async (key: string) => {
  const res = await call('GET', '/v1/auth', { key });
  return res.status === 200 ? 200 : `${res.status} ${res.body.error.code}`;
};

describe('who created an API key', () => {
  it('is recorded and shown: a member by their address (escaped), an operator, unknown before it was recorded; a removed member as removed', async () => {
    const owner = await signedIn('owner');
    const orgId = owner.org.org_id;
    // An address with markup in it (the address rules allow it): shown as text, never as HTML.
    const rest = `${Math.random().toString(36).slice(2, 8)}@example.com`;
    const email = `a"<i>x</i>${rest}`;
    const user = await createUserInOrg(db(), { email, password: PASSWORD, orgId, role: 'admin' });
    const admin = new ConsoleClient();
    expect((await admin.signIn(email, PASSWORD)).status).toBe(303);
    const made = await consoleKey({ client: admin });
    expect(await keyRow(made)).toMatchObject({ created_via: 'console', created_by: user.user_id, created_by_email: email });

    // The organization's first key (org create) and one from `admin key create` are an operator's;
    // one from before creators were recorded is unknown.
    const operator = await createKey(db(), orgId);
    const legacy = await createKey(db(), orgId);
    await db().query('UPDATE api_keys SET created_via = NULL WHERE id = $1', [legacy.key_id]);
    expect((await keyRow(owner.org.api_key)).created_via).toBe('operator');

    const page = (await owner.client.get('/console/keys')).text;
    expect(page).toContain('<th scope="col">Created by</th>');
    const mine = rowOf(page, made)!;
    expect(mine).toContain(`>a&quot;&lt;i&gt;x&lt;/i&gt;${rest}</a>`);
    expect(mine).toContain(`href="/console/keys?created_by=${user.user_id}"`);
    expect(page).not.toContain('<i>x</i>');
    expect(rowOf(page, operator.api_key)).toContain('<td>an operator</td>');
    expect(rowOf(page, owner.org.api_key)).toContain('<td>an operator</td>');
    expect(rowOf(page, legacy.api_key)).toContain('<td>unknown</td>');

    // Removed: still the organization's key, made by a removed member (the address they had here).
    const removed = await owner.client.submit('/console/members', `/console/members/${user.user_id}/remove`, {});
    expect(removed.status).toBe(303);
    const after = (await owner.client.get('/console/keys')).text;
    expect(rowOf(after, made)).toContain(`>removed member (a&quot;&lt;i&gt;x&lt;/i&gt;${rest})</a>`);
    expect(await authCode(made)).toBe(200); // removing a person revokes nothing by itself
  });

  it('filters the list by creator, a removed member included; a bad filter is 400 and another organization\'s user names no one', async () => {
    const owner = await signedIn('owner');
    const orgId = owner.org.org_id;
    const a = await signedIn('admin', orgId);
    const b = await signedIn('admin', orgId);
    const [a1, a2, b1] = [await consoleKey(a), await consoleKey(a), await consoleKey(b)];
    expect((await owner.client.submit('/console/members', `/console/members/${a.userId}/remove`, {})).status).toBe(303);

    const all = (await owner.client.get('/console/keys')).text;
    // The filter offers everyone who made keys here, the removed member marked as such.
    expect(all).toContain(`<option value="${a.userId}">removed member (${a.email})</option>`);
    expect(all).toContain(`<option value="${b.userId}">${b.email}</option>`);

    const byA = await owner.client.get(`/console/keys?created_by=${a.userId}`);
    expect(byA.status).toBe(200);
    expect(byA.text).toContain(`Keys created by removed member (${a.email})`);
    for (const k of [a1, a2]) expect(rowOf(byA.text, k)).not.toBeNull();
    for (const k of [b1, owner.org.api_key]) expect(rowOf(byA.text, k)).toBeNull();
    expect(byA.text).toContain(`action="/console/keys/created-by/${a.userId}/revoke"`);
    expect(byA.text).toContain('Revoke all 2 keys');

    const byB = (await owner.client.get(`/console/keys?created_by=${b.userId}`)).text;
    expect(rowOf(byB, b1)).not.toBeNull();
    expect(rowOf(byB, a1)).toBeNull();

    expect((await owner.client.get('/console/keys?created_by=nope')).status).toBe(400);
    // Someone who made keys elsewhere only: nothing listed, their address not shown, nothing to revoke.
    const stranger = await signedIn('owner');
    await consoleKey(stranger);
    const theirs = await owner.client.get(`/console/keys?created_by=${stranger.userId}`);
    expect(theirs.status).toBe(200);
    expect(theirs.text).toContain('Keys created by no one in this organization');
    expect(theirs.text).not.toContain(stranger.email);
    expect(theirs.text).not.toContain('/created-by/');
    expect(theirs.text.match(/<tr>/g)).toHaveLength(1); // the header row only
  });
});

describe('revoking the keys of a removed member', () => {
  it('removal says how many of their keys still work; one form revokes exactly those of this organization (then 401 revoked_api_key)', async () => {
    const owner = await signedIn('owner');
    const orgId = owner.org.org_id;
    const leaver = await signedIn('admin', orgId);
    const stays = await signedIn('admin', orgId);
    const [k1, k2, k3] = [await consoleKey(leaver), await consoleKey(leaver), await consoleKey(leaver)];
    const kept = await consoleKey(stays);
    // One already revoked keeps its own revocation time; it is not counted.
    const k3row = await keyRow(k3);
    expect((await leaver.client.submit('/console/keys', `/console/keys/${k3row.id}/revoke`, {})).status).toBe(303);
    const k3revokedAt = (await keyRow(k3)).revoked_at;
    // The same person in another organization, with a key there: not this organization's.
    const elsewhere = await signedIn('owner');
    await db().query(`INSERT INTO memberships (org_id, user_id, role) VALUES ($1, $2, 'admin')`, [elsewhere.org.org_id, leaver.userId]);
    expect((await leaver.client.submit('/console', '/console/switch-org', { org_id: elsewhere.org.org_id })).status).toBe(303);
    const theirs = await consoleKey(leaver);
    expect((await keyRow(theirs)).created_by).toBe(leaver.userId);

    const removed = await owner.client.submit('/console/members', `/console/members/${leaver.userId}/remove`, {});
    expect(removed.status).toBe(303);
    expect(removed.location).toBe(`/console/members?removed=${leaver.userId}`);
    const notice = (await owner.client.get(removed.location!)).text;
    expect(notice).toContain(`${leaver.email} is no longer a member, but 2 API keys`);
    expect(notice).toContain(`href="/console/keys?created_by=${leaver.userId}"`);
    expect(notice).toContain(`action="/console/keys/created-by/${leaver.userId}/revoke"`);
    expect(notice).toContain('Revoke all 2 of their keys');
    // Nothing is revoked by removing them.
    for (const k of [k1, k2, theirs, kept, owner.org.api_key]) expect(await authCode(k)).toBe(200);

    // Without its CSRF token the form does nothing.
    expect((await owner.client.request('POST', `/console/keys/created-by/${leaver.userId}/revoke`, { form: {} })).status).toBe(403);
    expect(await authCode(k1)).toBe(200);

    const revoke = await owner.client.submit(removed.location!, `/console/keys/created-by/${leaver.userId}/revoke`, {});
    expect(revoke.status).toBe(303);
    expect(revoke.location).toBe(`/console/keys?created_by=${leaver.userId}`);
    for (const k of [k1, k2, k3]) expect(await authCode(k)).toBe('401 revoked_api_key');
    expect((await keyRow(k3)).revoked_at).toEqual(k3revokedAt);
    for (const k of [kept, owner.org.api_key, theirs]) expect(await authCode(k)).toBe(200);
    const listed = (await owner.client.get(revoke.location!)).text;
    expect(listed).toContain('None of them still works.');
    // The notice no longer shows: nothing of theirs works. Sending the form again changes nothing.
    expect((await owner.client.get(removed.location!)).text).not.toContain('no longer a member');
    expect((await owner.client.submit('/console/keys', `/console/keys/created-by/${leaver.userId}/revoke`, {})).status).toBe(303);
    expect(await authCode(theirs)).toBe(200);
  });

  it("an Administrator of another organization gets the 404 page and revokes nothing; a Member gets 403; a member's own keys are not a removed member's notice", async () => {
    const a = await orgWithUser('owner');
    const creator = await signedIn('admin', a.org.org_id);
    const key = await consoleKey(creator);
    const otherAdmin = await signedIn('admin');
    const refused = await otherAdmin.client.submit('/console/keys', `/console/keys/created-by/${creator.userId}/revoke`, {});
    expect(refused.status).toBe(404);
    expect(refused.text).not.toContain(creator.email);
    // The notice cannot be crafted for another organization's member either.
    expect((await otherAdmin.client.get(`/console/members?removed=${creator.userId}`)).text).not.toContain(creator.email);
    expect(await authCode(key)).toBe(200);

    const member = await signedIn('member', a.org.org_id);
    const token = await member.client.token('/console');
    const forbidden = await member.client.request('POST', `/console/keys/created-by/${creator.userId}/revoke`, { form: { _csrf: token } });
    expect(forbidden.status).toBe(403);
    expect(await authCode(key)).toBe(200);

    // Still a member: no "no longer a member" notice, whoever asks.
    const owner = new ConsoleClient();
    expect((await owner.signIn(a.email, a.password)).status).toBe(303);
    expect((await owner.get(`/console/members?removed=${creator.userId}`)).text).not.toContain('no longer a member');
  });
});
