// The console's accounts, sessions, roles and boundaries over HTTP, on the shared stack's API
// process (and one of this file's own for https cookies and open sign-up):
// - sign-in: generic refusal, hashed server-side session regenerated at each sign-in, cookie flags;
// - CSRF on every form; sign-out and member removal end sessions at once;
// - roles: Members cannot reach keys, connections or members; the last Owner stays (race-safe);
// - invitations: adding a member grants nothing until the invited user accepts; sign-in opens the
//   oldest membership, never one chosen by name; a known and an unknown email answer alike; an
//   account signed up with the invited address accepts only with the invitation's link (shown
//   once, replaced when sent again, never logged), an operator-created one also from the Overview;
// - other organizations' ids are 404; a cookie is never an API/MCP credential and a key never opens
//   the console; sign-in throttling answers 429 with Retry-After;
// - CSRF tokens of a signed-in browser are its session's in its organization (a planted cookie, another
//   session's token, one from before the sign-in or from before an organization switch is refused);
//   Strict-Transport-Security only on an https base URL, on every answer there;
// - admin commands `user create`, `user verify` and `org show`.
import { execFile } from 'node:child_process';
import { promisify } from 'node:util';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { sha256 } from '../shared/ids.ts';
import { barePage } from '../apps/api/console/context.ts';
import { freePort } from '../shared/infra/free-port.ts';
import { changeMember, createUserInOrg, membershipsOf } from '../shared/accounts/users.ts';
import { addConnection, loadKeyring } from '../shared/db/connections.ts';
import { loadConfig } from '../shared/config.ts';
import { hstsHeader } from '../apps/api/plugins/transport-security.ts';
import { admitClaim } from '../shared/db/requests.ts';
import { newRequestId } from '../shared/ids.ts';
import { call, closeDb, db, newOrg, ownPair, stack } from './helpers/stack.ts';
import { startApiProcess, ROOT, type ServiceProcess } from './helpers/processes.ts';
import { ConsoleClient, orgWithUser, PASSWORD, signedIn } from './helpers/console-http.ts';

const run = promisify(execFile);

afterAll(async () => {
  await closeDb();
});

async function keyCount(orgId: string) {
  const r = await db().query('SELECT count(*)::int AS n FROM api_keys WHERE org_id = $1', [orgId]);
  return r.rows[0].n as number;
}

/** Ids of the invitations a user's Overview offers to accept. */
const invitationIds = (text: string) => [...text.matchAll(/action="\/console\/invitations\/(inv_[0-9a-f]{24})\/accept"/g)].map((m) => m[1]!);

/** The invitation link shown once on the Members page answering "Invite" (its path: the page names the base URL). */
function linkOn(text: string) {
  const m = /value="https?:\/\/[^"/]+(\/console\/invitations\/(inv_[0-9a-f]{24})\?token=([A-Za-z0-9_-]{43}))"/.exec(text);
  return m ? { path: m[1]!, id: m[2]!, token: m[3]! } : null;
}

/** The answer to accepting or declining an invitation, as the invited person sees it (status and page heading). */
async function answerAs(c: ConsoleClient, id: string, action: 'accept' | 'decline' = 'accept', form: Record<string, string> = {}) {
  const res = await c.submit('/console', `/console/invitations/${id}/${action}`, form);
  return { status: res.status, h1: /<h1>([^<]*)<\/h1>/.exec(res.text)?.[1] ?? null, message: /<main[^>]*>[\s\S]*?<p>([^<]*)<\/p>/.exec(res.text)?.[1] ?? null };
}

const memberRole = async (orgId: string, userId: string) =>
  (await db().query('SELECT role FROM memberships WHERE org_id = $1 AND user_id = $2', [orgId, userId])).rows[0]?.role ?? null;

/** A request row of an organization, as the query path writes it (no run needed to see it listed). */
async function requestRow(orgId: string) {
  const id = newRequestId();
  const op = await db().query(`SELECT o.id FROM operations o JOIN apis a ON a.id = o.api_id WHERE a.handle = '@weather' AND o.name = 'current_weather' AND a.visibility = 'public'`);
  const { request } = await admitClaim(
    db(),
    {
      id, orgId, keyHash: null, fingerprint: null, workflowId: `wf-${id}`, api: '@weather', operation: 'current_weather',
      operationId: Number(op.rows[0].id), version: 1, performsActions: false, isPublicApi: true,
    },
    { requestsPerMinute: 1_000, concurrency: 1_000, unresolvedKeyed: 1_000 },
  );
  expect(request?.id).toBe(id);
  return id;
}

describe('sign-in and sessions', () => {
  it('refuses a wrong password and an unknown email alike, without a session', async () => {
    const f = await orgWithUser('owner');
    const c = new ConsoleClient();
    const wrong = await c.signIn(f.email, 'not the password at all');
    const unknown = await c.signIn(`nobody-${f.email}`, 'not the password at all');
    for (const res of [wrong, unknown]) {
      expect(res.status).toBe(401);
      expect(res.text).toContain('Wrong email or password.');
      expect(res.setCookies.some((s) => s.startsWith('wqs_session='))).toBe(false);
    }
  });

  it('stores only the hash of a fresh session id, in an HttpOnly SameSite=Lax cookie (plain http: no Secure, no __Host-)', async () => {
    const f = await orgWithUser('owner');
    const c = new ConsoleClient();
    const first = await c.signIn(f.email, PASSWORD);
    expect(first.status).toBe(303);
    expect(first.location).toBe('/console');
    const cookie = first.setCookies.find((s) => s.startsWith('wqs_session='))!;
    expect(cookie).toMatch(/HttpOnly/i);
    expect(cookie).toMatch(/SameSite=Lax/i);
    expect(cookie).toMatch(/Path=\//);
    expect(cookie).not.toMatch(/Secure/i);
    const id1 = c.cookies.get('wqs_session')!;
    const rows = await db().query('SELECT id_hash FROM console_sessions WHERE user_id = $1', [f.userId]);
    expect(rows.rows.map((r) => Buffer.from(r.id_hash).toString('hex'))).toEqual([sha256(id1).toString('hex')]);
    // Signing in again (same browser) gives a new id and deletes the old session: no fixation.
    expect((await c.get('/console/sign-in')).location).toBe('/console'); // already signed in
    expect((await c.submit('/console', '/console/sign-in', { email: f.email, password: PASSWORD })).status).toBe(303);
    const id2 = c.cookies.get('wqs_session')!;
    expect(id2).not.toBe(id1);
    const after = await db().query('SELECT id_hash FROM console_sessions WHERE user_id = $1', [f.userId]);
    expect(after.rows.map((r) => Buffer.from(r.id_hash).toString('hex'))).toEqual([sha256(id2).toString('hex')]);
    const overview = await c.get('/console');
    expect(overview.status).toBe(200);
    expect(overview.text).toContain('<h1>Overview</h1>');
    expect(overview.text).toContain('>100<'); // the org's 100 available credits
  });

  it('serves pages with a strict Content-Security-Policy, no caching, and htmx and the stylesheet from this origin', async () => {
    const { client } = await signedIn('member');
    const page = await client.get('/console');
    expect(page.headers.get('content-type')).toMatch(/^text\/html/);
    expect(page.headers.get('content-security-policy')).toContain("script-src 'self'");
    expect(page.headers.get('content-security-policy')).toContain("frame-ancestors 'none'");
    expect(page.headers.get('cache-control')).toBe('no-store');
    expect(page.text).toContain('<script src="/console/assets/htmx.min.js" defer></script>');
    const htmx = await client.get('/console/assets/htmx.min.js');
    expect(htmx.status).toBe(200);
    expect(htmx.headers.get('content-type')).toMatch(/^text\/javascript/);
    expect(htmx.text).toContain('htmx');
    const css = await client.get('/console/assets/console.css');
    expect(css.headers.get('content-type')).toMatch(/^text\/css/);
    expect(css.text).toContain(':focus-visible');
  });

  it('escapes the bare page answered when the layout cannot render (database down), as the templates do', () => {
    // Its title and message may carry request text, e.g. an OAuth client_id in "This app cannot connect".
    const page = barePage('This app cannot connect', `The client's metadata document at https://x.test/"><script>alert(1)</script> cannot be used (<b>).`);
    expect(page).not.toContain('<script>');
    expect(page).not.toContain('<b>');
    expect(page).toContain('at https://x.test/&quot;&gt;&lt;script&gt;alert(1)&lt;/script&gt; cannot be used (&lt;b&gt;).');
    expect(page).toContain('<h1>This app cannot connect</h1>');
  });

  it('ends a session on sign-out (the old cookie opens nothing)', async () => {
    const { client } = await signedIn('owner');
    const old = client.cookies.get('wqs_session')!;
    expect((await client.submit('/console', '/console/sign-out', {})).status).toBe(303);
    const stale = new ConsoleClient();
    stale.cookies.set('wqs_session', old);
    const res = await stale.get('/console');
    expect(res.status).toBe(303);
    expect(res.location).toBe('/console/sign-in');
    expect((await db().query('SELECT 1 FROM console_sessions WHERE id_hash = $1', [sha256(old)])).rowCount).toBe(0);
  });

  it('ignores a `next` holding a character a Location header cannot carry: signing in still works and lands on the Overview', async () => {
    const legit = '/console/oauth/authorize?client_id=x';
    for (const raw of ['\u{1F600}', '\u0001', '\u00e9']) {
      const next = encodeURIComponent(`${legit}&state=${raw}`);
      // Signed out: the page keeps no such `next`; posting it anyway signs in to the Overview.
      const f = await orgWithUser('member');
      const c = new ConsoleClient();
      const page = await c.get(`/console/sign-in?next=${next}`);
      expect(page.status).toBe(200);
      expect(page.text).not.toContain('name="next"');
      const res = await c.request('POST', '/console/sign-in', { form: { _csrf: await c.token('/console/sign-in'), email: f.email, password: PASSWORD, next: `${legit}&state=${raw}` } });
      expect(res.status).toBe(303);
      expect(res.location).toBe('/console');
      // Signed in: the sign-in page sends to the Overview.
      const again = await c.get(`/console/sign-in?next=${next}`);
      expect(again.status).toBe(303);
      expect(again.location).toBe('/console');
    }
    // A `next` of the shape the service writes still returns there.
    const { client } = await signedIn('member');
    expect((await client.get(`/console/sign-in?next=${encodeURIComponent(legit)}`)).location).toBe(legit);
  });

  it('ends an idle or expired session', async () => {
    const { client, userId } = await signedIn('member');
    await db().query(`UPDATE console_sessions SET last_seen_at = now() - interval '3 hours' WHERE user_id = $1`, [userId]);
    expect((await client.get('/console')).location).toBe('/console/sign-in');
    const again = await signedIn('member');
    await db().query(`UPDATE console_sessions SET expires_at = now() - interval '1 second' WHERE user_id = $1`, [again.userId]);
    expect((await again.client.get('/console')).location).toBe('/console/sign-in');
  });

  it('switches between the organizations of a user, and only to those', async () => {
    const a = await signedIn('owner');
    const other = await newOrg(5, 'Second org');
    await db().query(`INSERT INTO memberships (org_id, user_id, role) VALUES ($1, $2, 'member')`, [other.org_id, a.userId]);
    const before = await a.client.get('/console');
    expect(before.text).toContain('id="org-switch"');
    expect((await a.client.submit('/console', '/console/switch-org', { org_id: other.org_id })).status).toBe(303);
    const after = await a.client.get('/console');
    expect(after.text).toMatch(/<dt>Available<\/dt><dd>5<\/dd>/);
    // As a Member there, the keys page is closed.
    expect((await a.client.get('/console/keys')).status).toBe(403);
    const stranger = await newOrg(1, 'Not mine');
    expect((await a.client.submit('/console', '/console/switch-org', { org_id: stranger.org_id })).status).toBe(404);
  });
});

describe('hostile bytes', () => {
  it('a NUL in a form field or query parameter is the 400 page, never a 500 (PostgreSQL text cannot hold one), and changes nothing', async () => {
    // Signed out: sign-in and the authorization page.
    const c = new ConsoleClient();
    const signIn = await c.signIn('a\u0000b@example.com', PASSWORD);
    expect(signIn.status).toBe(400);
    expect(signIn.text).toContain('cannot be used (NUL)');
    expect((await c.get('/console/oauth/authorize?client_id=%00')).status).toBe(400);
    // Signed in: a form naming an organization or a client; a name of a field with one.
    const a = await signedIn('owner');
    for (const [from, action, form] of [
      ['/console', '/console/switch-org', { org_id: 'org_\u0000' }],
      ['/console/mcp-clients', '/console/mcp-clients/revoke', { client_id: 'mcpc_\u0000' }],
      ['/console/members', '/console/members', { email: 'x@example.com', role: 'member', 'x\u0000': '1' }],
    ] as const) {
      const res = await a.client.submit(from, action, form);
      expect(res.status, action).toBe(400);
      expect(res.text).toContain('Bad request');
    }
    expect((await db().query('SELECT 1 FROM member_invitations WHERE org_id = $1', [a.org.org_id])).rowCount).toBe(0);
    expect((await a.client.get('/console')).status).toBe(200);
  });
});

describe('CSRF', () => {
  it('takes url-encoded forms only: a JSON body, broken or not, is the 415 page (not a 500), and does nothing', async () => {
    const { client, org } = await signedIn('owner');
    const before = await keyCount(org.org_id);
    const post = (path: string, body: string, cookie?: string) =>
      fetch(`${stack().baseUrl}${path}`, { method: 'POST', redirect: 'manual', headers: { 'content-type': 'application/json', ...(cookie ? { cookie } : {}) }, body });
    const cookie = [...client.cookies].map(([k, v]) => `${k}=${v}`).join('; ');
    const token = await client.token('/console/keys');
    for (const [path, body, jar] of [
      ['/console/sign-in', '{', undefined],
      ['/console/sign-in', '', undefined],
      ['/console/keys', '{"_csrf":', cookie],
      ['/console/keys', JSON.stringify({ _csrf: token }), cookie],
    ] as const) {
      const res = await post(path, body, jar);
      expect(res.status, `${path} ${body}`).toBe(415);
      expect(res.headers.get('content-type')).toMatch(/^text\/html/);
      expect(res.headers.get('x-frame-options')).toBe('DENY');
      const page = await res.text();
      expect(page).toContain('<h1>Unsupported form type</h1>');
      expect(page).toContain('application/x-www-form-urlencoded');
    }
    // A form over the console's 64 KiB: 413, said as such.
    const big = await fetch(`${stack().baseUrl}/console/keys`, {
      method: 'POST',
      redirect: 'manual',
      headers: { 'content-type': 'application/x-www-form-urlencoded', cookie },
      body: new URLSearchParams({ _csrf: token, name: 'x'.repeat(70 * 1024) }).toString(),
    });
    expect(big.status).toBe(413);
    expect(await big.text()).toContain('<h1>Form too large</h1>');
    expect(await keyCount(org.org_id)).toBe(before);
  });

  it('refuses a form without its token or with a wrong one (403), and changes nothing', async () => {
    const { client, org } = await signedIn('owner');
    const before = await keyCount(org.org_id);
    const missing = await client.request('POST', '/console/keys', { form: {} });
    expect(missing.status).toBe(403);
    expect(missing.text).toContain('Form expired');
    const wrong = await client.request('POST', '/console/keys', { form: { _csrf: 'forged-token' } });
    expect(wrong.status).toBe(403);
    // A token from another browser (its own CSRF cookie) does not fit this one.
    const other = await signedIn('owner');
    const foreign = await other.client.token('/console/keys');
    expect((await client.request('POST', '/console/keys', { form: { _csrf: foreign } })).status).toBe(403);
    expect(await keyCount(org.org_id)).toBe(before);
    // The sign-in form is protected too.
    expect((await new ConsoleClient().request('POST', '/console/sign-in', { form: { email: 'a@example.com', password: 'x' } })).status).toBe(403);
  });

  it('refuses a CSRF cookie planted in a signed-in browser with its matching token (403), and changes nothing', async () => {
    // Whoever can set cookies for the console's host (a sibling subdomain, plain http on the way)
    // takes a cookie and token pair of their own from the sign-in page and plants the cookie.
    const attacker = new ConsoleClient();
    const token = await attacker.token('/console/sign-in');
    const planted = attacker.cookies.get('wqs_csrf')!;
    expect(planted).toBeTruthy();
    const victim = await signedIn('owner');
    const before = await keyCount(victim.org.org_id);
    victim.client.cookies.set('wqs_csrf', planted);
    const forged = await victim.client.request('POST', '/console/keys', { form: { _csrf: token } });
    expect(forged.status).toBe(403);
    expect(forged.text).toContain('Form expired');
    expect(await keyCount(victim.org.org_id)).toBe(before);
    // The victim's own form still works (with the planted cookie still there).
    expect((await victim.client.submit('/console/keys', '/console/keys', {})).status).toBe(200);
    expect(await keyCount(victim.org.org_id)).toBe(before + 1);
  });

  it("refuses one session's token in another session, whatever other cookies come with it", async () => {
    const a = await signedIn('owner');
    const b = await signedIn('owner');
    const tokenA = await a.client.token('/console/keys');
    // A's cookies (all but its session) in B's browser, and A's token: B's session refuses it.
    for (const [name, value] of a.client.cookies) if (name !== 'wqs_session') b.client.cookies.set(name, value);
    const before = await keyCount(b.org.org_id);
    expect((await b.client.request('POST', '/console/keys', { form: { _csrf: tokenA } })).status).toBe(403);
    expect(await keyCount(b.org.org_id)).toBe(before);
    // In A's own session the same token works, and a token is not bound to one page.
    expect((await a.client.request('POST', '/console/keys', { form: { _csrf: tokenA } })).status).toBe(200);
    expect((await a.client.request('POST', '/console/keys', { form: { _csrf: tokenA } })).status).toBe(200);
  });

  it('voids a token issued before sign-in once signed in, even with its CSRF cookie sent back', async () => {
    const f = await orgWithUser('owner');
    const c = new ConsoleClient();
    const early = await c.token('/console/sign-in');
    const cookie = c.cookies.get('wqs_csrf')!;
    const signIn = await c.request('POST', '/console/sign-in', { form: { _csrf: early, email: f.email, password: PASSWORD } });
    expect(signIn.status).toBe(303);
    // The sign-in clears the CSRF cookie; one who set it before (or the browser's other tab) sends it again.
    expect(c.cookies.has('wqs_csrf')).toBe(false);
    c.cookies.set('wqs_csrf', cookie);
    const before = await keyCount(f.org.org_id);
    const res = await c.request('POST', '/console/keys', { form: { _csrf: early } });
    expect(res.status).toBe(403);
    expect(res.text).toContain('Form expired');
    expect(await keyCount(f.org.org_id)).toBe(before);
  });

  it("voids a form of one organization once the session switched to another (another tab): nothing is done in the organization the page was not about", async () => {
    const a = await signedIn('owner');
    const b = await newOrg(1, 'Switched to');
    await db().query(`INSERT INTO memberships (org_id, user_id, role) VALUES ($1, $2, 'owner')`, [b.org_id, a.userId]);
    const stranger = await orgWithUser('admin');
    await db().query(`INSERT INTO memberships (org_id, user_id, role) VALUES ($1, $2, 'admin')`, [b.org_id, stranger.userId]);
    // The first tab shows organization A's pages; a second tab switches the session to B.
    const keysOfA = await a.client.token('/console/keys');
    const membersOfA = await a.client.token('/console/members');
    expect((await a.client.submit('/console', '/console/switch-org', { org_id: b.org_id })).status).toBe(303);
    const [keysBefore, aBefore] = [await keyCount(b.org_id), await keyCount(a.org.org_id)];
    // The first tab's forms, meant for A, must not act on B: no key made there, no member removed,
    // nobody invited to it.
    const made = await a.client.request('POST', '/console/keys', { form: { _csrf: keysOfA } });
    expect(made.status).toBe(403);
    expect(made.text).toContain('Form expired');
    expect((await a.client.request('POST', `/console/members/${stranger.userId}/remove`, { form: { _csrf: membersOfA } })).status).toBe(403);
    expect((await a.client.request('POST', '/console/members', { form: { _csrf: membersOfA, email: 'someone@example.com', role: 'admin' } })).status).toBe(403);
    expect(await keyCount(b.org_id)).toBe(keysBefore);
    expect(await keyCount(a.org.org_id)).toBe(aBefore);
    expect(await memberRole(b.org_id, stranger.userId)).toBe('admin');
    expect((await db().query(`SELECT count(*)::int AS n FROM member_invitations WHERE org_id = $1`, [b.org_id])).rows[0].n).toBe(0);
    // A page of B gives a form of B, which works; switching back voids it again.
    expect((await a.client.submit('/console/keys', '/console/keys', {})).status).toBe(200);
    expect(await keyCount(b.org_id)).toBe(keysBefore + 1);
    const keysOfB = await a.client.token('/console/keys');
    expect((await a.client.submit('/console', '/console/switch-org', { org_id: a.org.org_id })).status).toBe(303);
    expect((await a.client.request('POST', '/console/keys', { form: { _csrf: keysOfB } })).status).toBe(403);
    expect(await keyCount(a.org.org_id)).toBe(aBefore);
  });

  it('answers a signed-in form whose session has ended with the sign-in page, doing nothing', async () => {
    const { client, org } = await signedIn('owner');
    const token = await client.token('/console/keys');
    const old = client.cookies.get('wqs_session')!;
    expect((await client.submit('/console', '/console/sign-out', {})).status).toBe(303);
    const before = await keyCount(org.org_id);
    const stale = new ConsoleClient();
    stale.cookies.set('wqs_session', old);
    const res = await stale.request('POST', '/console/keys', { form: { _csrf: token } });
    expect(res.status).toBe(303);
    expect(res.location).toBe('/console/sign-in');
    expect(await keyCount(org.org_id)).toBe(before);
    // Signed out, the pages carry cookie-bound tokens again, and sign-in takes them.
    expect(await client.token('/console/sign-in')).not.toMatch(/^s\./);
  });
});

describe('API keys in the console', () => {
  it('creates a key shown once, records its use, and revokes it for the next request', async () => {
    const { client, org } = await signedIn('admin');
    const created = await client.submit('/console/keys', '/console/keys', {});
    expect(created.status).toBe(200);
    const key = /id="new-key" class="secret" readonly value="(svc_sk_[A-Za-z0-9]+)"/.exec(created.text)![1]!;
    const used = await call('GET', '/v1/catalog/tools', { key });
    expect(used.status).toBe(200);
    const row = await db().query('SELECT id, last_used_at FROM api_keys WHERE key_hash = $1', [sha256(key)]);
    expect(row.rows[0].last_used_at).not.toBeNull();
    const list = await client.get('/console/keys');
    expect(list.text).toContain(`${key.slice(0, 12)}…`);
    expect(list.text).not.toContain(key); // never shown again
    const revoke = await client.submit('/console/keys', `/console/keys/${row.rows[0].id}/revoke`, {});
    expect(revoke.status).toBe(303);
    const after = await call('GET', '/v1/catalog/tools', { key });
    expect(after.status).toBe(401);
    expect(after.body.error.code).toBe('revoked_api_key');
    // The org's original key still works.
    expect((await call('GET', '/v1/catalog/tools', { key: org.api_key })).status).toBe(200);
  });
});

describe('roles', () => {
  it('keeps Members out of keys, connections and members (403 page), and changes nothing', async () => {
    const { client, org } = await signedIn('member');
    for (const path of ['/console/keys', '/console/connections', '/console/members']) {
      const res = await client.get(path);
      expect(res.status, path).toBe(403);
      expect(res.text).toContain('Only Owners and Administrators');
    }
    const token = await client.token('/console');
    expect((await client.request('POST', '/console/keys', { form: { _csrf: token } })).status).toBe(403);
    expect(await keyCount(org.org_id)).toBe(1);
    const home = await client.get('/console');
    expect(home.text).not.toContain('href="/console/keys"');
    expect((await client.get('/console/requests')).status).toBe(200);
    expect((await client.get('/console/workflows')).status).toBe(200);
  });

  it('invites a member by email (a membership once accepted), changes roles, and removing a member ends their session at once', async () => {
    const owner = await signedIn('owner');
    const joiner = await orgWithUser('member'); // a user of another organization
    const add = await owner.client.submit('/console/members', '/console/members', { email: joiner.email.toUpperCase(), role: 'member' });
    expect(add.status).toBe(200);
    const jc = new ConsoleClient();
    await jc.signIn(joiner.email, PASSWORD);
    // Not a member until accepted.
    expect((await jc.submit('/console', '/console/switch-org', { org_id: owner.org.org_id })).status).toBe(404);
    const id = /action="\/console\/invitations\/(inv_[0-9a-f]{24})\/accept"/.exec((await jc.get('/console')).text)![1]!;
    expect((await jc.submit('/console', `/console/invitations/${id}/accept`, {})).status).toBe(303);
    expect((await jc.submit('/console', '/console/switch-org', { org_id: owner.org.org_id })).status).toBe(303);
    expect((await jc.get('/console/members')).status).toBe(403);
    expect((await owner.client.submit('/console/members', `/console/members/${joiner.userId}/role`, { role: 'admin' })).status).toBe(303);
    expect((await jc.get('/console/members')).status).toBe(200); // the role is read on every request
    expect((await owner.client.submit('/console/members', `/console/members/${joiner.userId}/remove`, {})).status).toBe(303);
    const gone = await jc.get('/console');
    expect(gone.status).toBe(303);
    expect(gone.location).toBe('/console/sign-in');
  });

  it('never removes or demotes the last Owner, even when two owners demote each other at once', async () => {
    const owner = await signedIn('owner');
    const lone = await owner.client.submit('/console/members', `/console/members/${owner.userId}/role`, { role: 'member' });
    expect(lone.status).toBe(409);
    expect(lone.text).toContain('last Owner');
    expect((await owner.client.submit('/console/members', `/console/members/${owner.userId}/remove`, {})).status).toBe(409);
    const second = await orgWithUser('member');
    await db().query(`INSERT INTO memberships (org_id, user_id, role) VALUES ($1, $2, 'owner')`, [owner.org.org_id, second.userId]);
    const results = await Promise.allSettled([
      changeMember(db(), 'owner', owner.org.org_id, owner.userId, 'member'),
      changeMember(db(), 'owner', owner.org.org_id, second.userId, null),
    ]);
    expect(results.filter((r) => r.status === 'fulfilled')).toHaveLength(1);
    const owners = await db().query(`SELECT count(*)::int AS n FROM memberships WHERE org_id = $1 AND role = 'owner'`, [owner.org.org_id]);
    expect(owners.rows[0].n).toBe(1);
  });

  it('lets only an Owner grant the Owner role', async () => {
    const admin = await signedIn('admin');
    const target = await signedIn('member', admin.org.org_id);
    const res = await admin.client.submit('/console/members', `/console/members/${target.userId}/role`, { role: 'owner' });
    expect(res.status).toBe(403);
    expect((await db().query('SELECT role FROM memberships WHERE user_id = $1 AND org_id = $2', [target.userId, admin.org.org_id])).rows[0].role).toBe('member');
  });
});

describe('roles: an Administrator and the Owners', () => {
  it('an Administrator can neither promote themselves nor demote or remove an Owner (403, nothing changes)', async () => {
    const owner = await signedIn('owner');
    const org = owner.org.org_id;
    const admin = await signedIn('admin', org);
    for (const [target, form, action] of [
      [admin.userId, { role: 'owner' }, 'role'],
      [owner.userId, { role: 'member' }, 'role'],
      [owner.userId, { role: 'admin' }, 'role'],
      [owner.userId, {}, 'remove'],
    ] as const) {
      const res = await admin.client.submit('/console/members', `/console/members/${target}/${action}`, form);
      expect(res.status).toBe(403);
    }
    expect(await memberRole(org, admin.userId)).toBe('admin');
    expect(await memberRole(org, owner.userId)).toBe('owner');
    // Another organization's member id is the 404 page, whatever the role.
    const stranger = await signedIn('member');
    expect((await owner.client.submit('/console/members', `/console/members/${stranger.userId}/remove`, {})).status).toBe(404);
    expect(await memberRole(stranger.org.org_id, stranger.userId)).toBe('member');
  });
});

describe('invitations (adding a member needs their consent)', () => {
  const sessionOrg = async (userId: string) => (await db().query('SELECT org_id FROM console_sessions WHERE user_id = $1', [userId])).rows.map((r) => r.org_id);

  it("a stranger's organization named \"AAA…\" adding a user grants nothing, and never becomes where that user signs in", async () => {
    const victim = await orgWithUser('owner'); // their own organization, "Console org …"
    const attackerOrg = await newOrg(0, 'AAA first in line');
    const attacker = await signedIn('owner', attackerOrg.org_id);
    const add = await attacker.client.submit('/console/members', '/console/members', { email: victim.email, role: 'admin' });
    expect(add.status).toBe(200);
    expect((await db().query('SELECT 1 FROM memberships WHERE org_id = $1 AND user_id = $2', [attackerOrg.org_id, victim.userId])).rowCount).toBe(0);
    expect((await membershipsOf(db(), victim.userId)).map((m) => m.org_id)).toEqual([victim.org.org_id]); // OAuth consent, switcher read this

    const vc = new ConsoleClient();
    expect((await vc.signIn(victim.email, PASSWORD)).status).toBe(303);
    expect(await sessionOrg(victim.userId)).toEqual([victim.org.org_id]);
    const home = await vc.get('/console');
    expect(home.text).toContain('<h2 id="invitations-h">Invitations</h2>');
    expect(home.text).toMatch(/<td>AAA first in line [a-z0-9]+<\/td>/);
    expect(home.text).not.toContain(`value="${attackerOrg.org_id}"`); // not in the org switcher
    expect((await vc.submit('/console', '/console/switch-org', { org_id: attackerOrg.org_id })).status).toBe(404);

    // Accepted, it is a membership: in the switcher, but sign-in still opens the oldest membership.
    const [id] = invitationIds(home.text);
    expect((await vc.submit('/console', `/console/invitations/${id}/accept`, {})).status).toBe(303);
    expect((await db().query('SELECT role FROM memberships WHERE org_id = $1 AND user_id = $2', [attackerOrg.org_id, victim.userId])).rows[0].role).toBe('admin');
    const after = await vc.get('/console');
    expect(after.text).toContain(`value="${attackerOrg.org_id}"`);
    expect(invitationIds(after.text)).toEqual([]);
    const again = new ConsoleClient();
    expect((await again.signIn(victim.email, PASSWORD)).status).toBe(303);
    expect(await sessionOrg(victim.userId)).toEqual([victim.org.org_id, victim.org.org_id]);
  });

  it('answers an address with an account and one without exactly alike', async () => {
    const owner = await signedIn('owner');
    const known = await orgWithUser('member');
    const unknown = `nobody-${Math.random().toString(36).slice(2, 10)}@example.com`;
    // The answer's notice, the address and the link's id and secret (different each time) left out.
    const notice = (text: string, email: string) =>
      /<div class="notice" role="status">[\s\S]*?<\/div>/.exec(text)?.[0].replaceAll(email, '<email>').replace(/inv_[0-9a-f]{24}\?token=[A-Za-z0-9_-]{43}"/, '<link>"');
    const answers = [];
    for (const email of [known.email, unknown]) {
      const res = await owner.client.submit('/console/members', '/console/members', { email, role: 'member' });
      answers.push({ status: res.status, location: res.location, notice: notice(res.text, email) });
    }
    expect(answers[0]).toEqual(answers[1]);
    expect(answers[0]!.status).toBe(200);
    expect(answers[0]!.notice).toContain('Invitation recorded; it takes effect when that person accepts it.');
    expect(answers[0]!.notice).toContain(`value="${stack().baseUrl}/console/invitations/<link>"`);
    const page = await owner.client.get('/console/members');
    expect(page.text).not.toContain('No user with');
    expect(page.text).toContain(known.email);
    expect(page.text).toContain(unknown); // both pending, listed alike
    // Only what the inviter can see anyway is refused: a malformed address, someone already listed.
    expect((await owner.client.submit('/console/members', '/console/members', { email: 'not-an-address', role: 'member' })).status).toBe(400);
    expect((await owner.client.submit('/console/members', '/console/members', { email: owner.email, role: 'member' })).status).toBe(409);
  });

  it('declines for good, withdraws, refuses answering for someone else, and keeps the Owner role for Owners', async () => {
    const owner = await signedIn('owner');
    const invitee = await signedIn('owner');
    const other = await signedIn('owner');
    await owner.client.submit('/console/members', '/console/members', { email: invitee.email, role: 'member' });
    const [id] = invitationIds((await invitee.client.get('/console')).text);
    // Someone else cannot accept or decline it (404), and a form without its token changes nothing.
    expect((await other.client.submit('/console', `/console/invitations/${id}/accept`, {})).status).toBe(404);
    expect((await invitee.client.request('POST', `/console/invitations/${id}/accept`, { form: {} })).status).toBe(403);
    expect((await invitee.client.submit('/console', `/console/invitations/${id}/decline`, {})).status).toBe(303);
    expect((await invitee.client.submit('/console', `/console/invitations/${id}/accept`, {})).status).toBe(404);
    expect((await db().query('SELECT 1 FROM memberships WHERE org_id = $1 AND user_id = $2', [owner.org.org_id, invitee.userId])).rowCount).toBe(0);
    // Inviting again answers as ever, but a declined invitation is not shown again.
    expect((await owner.client.submit('/console/members', '/console/members', { email: invitee.email, role: 'admin' })).status).toBe(200);
    expect(invitationIds((await invitee.client.get('/console')).text)).toEqual([]);
    expect((await owner.client.get('/console/members')).text).not.toContain(invitee.email);

    // Withdrawn by the organization: nothing left to accept.
    await owner.client.submit('/console/members', '/console/members', { email: other.email, role: 'member' });
    const [otherId] = invitationIds((await other.client.get('/console')).text);
    const pending = (await db().query('SELECT id FROM member_invitations WHERE id = $1', [otherId])).rows[0].id;
    expect((await owner.client.submit('/console/members', `/console/members/invitations/${pending}/revoke`, {})).status).toBe(303);
    expect((await other.client.submit('/console', `/console/invitations/${otherId}/accept`, {})).status).toBe(404);

    // An Administrator cannot invite an Owner.
    const admin = await signedIn('admin', owner.org.org_id);
    expect((await admin.client.submit('/console/members', '/console/members', { email: other.email, role: 'owner' })).status).toBe(403);
  });

  it("keeps an Owner's pending Owner invitation out of an Administrator's reach: inviting the address again is refused, its role, link and expiry stay", async () => {
    const owner = await signedIn('owner');
    const admin = await signedIn('admin', owner.org.org_id);
    const invitee = await signedIn('owner');
    // As if they had signed up themselves: only the Owner's link lets them answer.
    await db().query('UPDATE users SET email_verified = false WHERE id = $1', [invitee.userId]);
    const sent = await owner.client.submit('/console/members', '/console/members', { email: invitee.email, role: 'owner' });
    const link = linkOn(sent.text)!;
    const before = (await db().query('SELECT role, token_hash, invited_by, expires_at FROM member_invitations WHERE id = $1', [link.id])).rows[0];
    expect(before.role).toBe('owner');
    // The Administrator sees it listed (as Owner), cannot withdraw it, and cannot re-send it as anything else.
    expect((await admin.client.submit('/console/members', `/console/members/invitations/${link.id}/revoke`, {})).status).toBe(403);
    for (const role of ['admin', 'member']) {
      const res = await admin.client.submit('/console/members', '/console/members', { email: invitee.email, role });
      expect(res.status).toBe(403);
      expect(res.text).toContain('Only an Owner can grant or change the Owner role.');
      expect(linkOn(res.text)).toBeNull();
    }
    const after = (await db().query('SELECT role, token_hash, invited_by, expires_at FROM member_invitations WHERE id = $1', [link.id])).rows[0];
    expect(after).toEqual(before);
    // The Owner's link still works, for the Owner role.
    expect((await answerAs(invitee.client, link.id, 'accept', { token: link.token })).status).toBe(303);
    expect(await memberRole(owner.org.org_id, invitee.userId)).toBe('owner');
    // An Administrator still re-sends invitations of roles they may grant.
    const other = await signedIn('owner');
    expect((await owner.client.submit('/console/members', '/console/members', { email: other.email, role: 'member' })).status).toBe(200);
    const resent = await admin.client.submit('/console/members', '/console/members', { email: other.email, role: 'admin' });
    expect(resent.status).toBe(200);
    expect(linkOn(resent.text)).not.toBeNull();
  });

  const acceptAs = (c: ConsoleClient, id: string) => answerAs(c, id);

  it('lets a user an operator created (their address vouched for) accept from the Overview, without the link', async () => {
    const owner = await signedIn('owner');
    const invitee = await signedIn('member');
    await owner.client.submit('/console/members', '/console/members', { email: invitee.email, role: 'admin' });
    const [id] = invitationIds((await invitee.client.get('/console')).text);
    expect(id).toMatch(/^inv_/);
    expect((await acceptAs(invitee.client, id!)).status).toBe(303);
    expect(await memberRole(owner.org.org_id, invitee.userId)).toBe('admin');
    expect((await db().query('SELECT email_verified FROM users WHERE id = $1', [invitee.userId])).rows[0].email_verified).toBe(true);
  });

  it('expires an invitation after 7 days: not listed, and accepting it answers like an unknown one; inviting again renews it', async () => {
    const owner = await signedIn('owner');
    const invitee = await signedIn('owner');
    await owner.client.submit('/console/members', '/console/members', { email: invitee.email, role: 'member' });
    const [id] = invitationIds((await invitee.client.get('/console')).text);
    const row = (await db().query(`SELECT extract(epoch FROM expires_at - created_at)::int AS ttl FROM member_invitations WHERE id = $1`, [id])).rows[0];
    expect(row.ttl).toBe(7 * 24 * 3600);

    await db().query(`UPDATE member_invitations SET created_at = created_at - interval '7 days 1 minute', expires_at = expires_at - interval '7 days 1 minute' WHERE id = $1`, [id]);
    expect(invitationIds((await invitee.client.get('/console')).text)).toEqual([]);
    const unknown = await acceptAs(invitee.client, 'inv_000000000000000000000000');
    expect(unknown.status).toBe(404);
    expect(await acceptAs(invitee.client, id!)).toEqual(unknown);
    expect(await memberRole(owner.org.org_id, invitee.userId)).toBeNull();
    // The organization's list shows it as expired; inviting again renews the same invitation.
    expect((await owner.client.get('/console/members')).text).toMatch(/<td>[^<]*\(expired\)<\/td>/);
    expect((await owner.client.submit('/console/members', '/console/members', { email: invitee.email, role: 'member' })).status).toBe(200);
    expect(invitationIds((await invitee.client.get('/console')).text)).toEqual([id]);
    expect((await acceptAs(invitee.client, id!)).status).toBe(303);
    expect(await memberRole(owner.org.org_id, invitee.userId)).toBe('member');
  });

  it("grants nothing once its inviter may no longer grant that role (removed, or demoted below it), answering like an unknown one", async () => {
    const first = await signedIn('owner');
    const org = first.org.org_id;
    const inviter = await signedIn('owner', org);
    const admin = await signedIn('admin', org);
    const toOwner = await signedIn('owner');
    const toAdmin = await signedIn('owner');
    const fromAdmin = await signedIn('owner');
    expect((await inviter.client.submit('/console/members', '/console/members', { email: toOwner.email, role: 'owner' })).status).toBe(200);
    expect((await inviter.client.submit('/console/members', '/console/members', { email: toAdmin.email, role: 'admin' })).status).toBe(200);
    expect((await admin.client.submit('/console/members', '/console/members', { email: fromAdmin.email, role: 'admin' })).status).toBe(200);
    const idOf = async (c: ConsoleClient) => invitationIds((await c.get('/console')).text)[0]!;
    const [ownerInv, adminInv, fromAdminInv] = [await idOf(toOwner.client), await idOf(toAdmin.client), await idOf(fromAdmin.client)];

    // The inviter is demoted to Administrator: an Owner invitation is void, an Administrator one stands.
    expect((await first.client.submit('/console/members', `/console/members/${inviter.userId}/role`, { role: 'admin' })).status).toBe(303);
    const unknown = await acceptAs(toOwner.client, 'inv_000000000000000000000000');
    expect(invitationIds((await toOwner.client.get('/console')).text)).toEqual([]);
    expect(await acceptAs(toOwner.client, ownerInv)).toEqual(unknown);
    expect(await memberRole(org, toOwner.userId)).toBeNull();
    expect((await acceptAs(toAdmin.client, adminInv)).status).toBe(303);
    expect(await memberRole(org, toAdmin.userId)).toBe('admin');

    // The inviting Administrator is removed: their invitation grants nothing.
    expect((await first.client.submit('/console/members', `/console/members/${admin.userId}/remove`, {})).status).toBe(303);
    expect(await acceptAs(fromAdmin.client, fromAdminInv)).toEqual(unknown);
    expect(await memberRole(org, fromAdmin.userId)).toBeNull();
  });

  it('removing a member voids an invitation of their address still pending: the removed person cannot come back through it', async () => {
    const owner = await signedIn('owner');
    const org = owner.org.org_id;
    // Invited as Administrator; meanwhile an operator adds the address directly, as a Member.
    const email = `stale-${Math.random().toString(36).slice(2, 10)}@example.com`;
    const link = linkOn((await owner.client.submit('/console/members', '/console/members', { email, role: 'admin' })).text)!;
    const user = await createUserInOrg(db(), { email, password: PASSWORD, orgId: org, role: 'member' });
    // Somewhere to sign in to once removed.
    const elsewhere = await newOrg(1);
    await db().query(`INSERT INTO memberships (org_id, user_id, role) VALUES ($1, $2, 'member')`, [elsewhere.org_id, user.user_id]);
    expect((await owner.client.submit('/console/members', `/console/members/${user.user_id}/remove`, {})).status).toBe(303);
    expect(await memberRole(org, user.user_id)).toBeNull();

    const removed = new ConsoleClient();
    expect((await removed.signIn(email, PASSWORD)).status).toBe(303);
    // Neither listed (an operator-created address is vouched for) nor accepted, with or without the link.
    expect(invitationIds((await removed.get('/console')).text)).toEqual([]);
    expect((await removed.get(link.path)).status).toBe(404);
    expect((await answerAs(removed, link.id, 'accept', { token: link.token })).status).toBe(404);
    expect((await answerAs(removed, link.id)).status).toBe(404);
    expect(await memberRole(org, user.user_id)).toBeNull();
    expect((await owner.client.get('/console/members')).text).not.toContain(email);
    // Inviting them again is a new invitation, with a link that works.
    const again = linkOn((await owner.client.submit('/console/members', '/console/members', { email, role: 'member' })).text)!;
    expect((await removed.submit(again.path, `/console/invitations/${again.id}/accept`, { token: again.token })).status).toBe(303);
    expect(await memberRole(org, user.user_id)).toBe('member');
  });
});

describe('pages of an organization', () => {
  it('lists requests newest first, filters them by status and workflow, and pages with a cursor', async () => {
    const { client, org } = await signedIn('member');
    const ids: string[] = [];
    for (let i = 0; i < 27; i++) ids.push(await requestRow(org.org_id));
    await db().query(`UPDATE requests SET status = 'failed', error_code = 'site_error', completed_at = created_at + interval '2 seconds' WHERE id = $1`, [ids[0]]);
    const first = await client.get('/console/requests');
    const shown = (text: string) => [...text.matchAll(/href="\/console\/requests\/(req_[A-Za-z0-9_-]+)"/g)].map((m) => m[1]!);
    const page1 = shown(first.text);
    expect(page1).toHaveLength(25);
    const next = /href="\/console\/requests\?([^"]+)">Older requests/.exec(first.text)![1]!.replace(/&amp;/g, '&');
    const page2 = shown((await client.get(`/console/requests?${next}`)).text);
    expect(page2).toHaveLength(2);
    // Newest first over both pages: every row exactly once.
    expect([...page1, ...page2]).toEqual([...ids].reverse());
    const failed = await client.get('/console/requests?status=failed&workflow=%40weather');
    expect(shown(failed.text)).toEqual([ids[0]]);
    expect(failed.text).toContain('site_error');
    expect(failed.text).toContain('2.0 s');
    expect(shown((await client.get('/console/requests?workflow=%40nothing')).text)).toEqual([]);
    expect((await client.get('/console/requests?status=bogus')).status).toBe(400);
    expect((await client.get('/console/requests?cursor=not-a-cursor')).status).toBe(400);
  });

  it('answers a hand-made cursor beyond the database integer range with the 400 filter page, not a 500', async () => {
    const { client } = await signedIn('member');
    const cursor = (micros: string) => Buffer.from(`${micros}|req_aaaaaaaaaaaaaaaa`).toString('base64url');
    for (const micros of ['99999999999999999999', '9223372036854775808']) {
      const res = await client.get(`/console/requests?cursor=${cursor(micros)}`);
      expect(res.status).toBe(400);
      expect(res.text).toContain('<h1>Bad filter</h1>');
    }
    // A real position still pages (now, in microseconds: 16 digits).
    expect((await client.get(`/console/requests?cursor=${cursor(String(Date.now() * 1000))}`)).status).toBe(200);
  });

  it("lists the organization's own workflows, private and public, and no one else's", async () => {
    const { client, org } = await signedIn('member');
    const other = await newOrg(1);
    const handle = `@own-${Math.random().toString(36).slice(2, 8)}`;
    await db().query(`INSERT INTO apis (handle, visibility, owner_org_id, name, category) VALUES ($1, 'private', $2, 'Our tool', 'Testing'), ($1, 'private', $3, 'Their tool', 'Testing')`, [handle, org.org_id, other.org_id]);
    const page = await client.get('/console/workflows');
    expect(page.text).toContain(handle);
    expect(page.text).toContain('Our tool');
    expect(page.text).not.toContain('Their tool');
  });

  it('replaces a connection (the old one revoked, the new one connected) without ever showing a value', async () => {
    const { client, org } = await signedIn('owner');
    const add = (password: string) => client.submit('/console/connections', '/console/connections', { kind: 'account', name: 'shop_account', site: 'Shop.Example.Test', email: 'me@shop.test', password });
    expect((await add('first-secret-value')).status).toBe(303);
    expect((await add('second-secret-value')).status).toBe(303);
    const rows = await db().query(`SELECT status FROM connections WHERE org_id = $1 ORDER BY created_at`, [org.org_id]);
    expect(rows.rows.map((r) => r.status)).toEqual(['revoked', 'active']);
    const page = await client.get('/console/connections');
    expect(page.text).toContain('shop.example.test');
    expect(page.text).toContain('email, password');
    expect(page.text).not.toContain('secret-value');
    const bad = await client.submit('/console/connections', '/console/connections', { kind: 'account', name: 'bad name!', site: 'shop.example.test', email: 'x', password: 'y' });
    expect(bad.status).toBe(400);
    expect(bad.text).toContain('Not saved: name must match');
    expect(bad.text).toMatch(/<input id="name" name="name"[^>]* aria-invalid="true"/);
    // A secret redaction could not protect (shared/secrets.ts) is refused, its field marked; nothing stored.
    const before = (await db().query('SELECT count(*)::int AS n FROM connections WHERE org_id = $1', [org.org_id])).rows[0].n;
    // Two characters no generated name or id holds (they are lower-case base36): 'q9' was found in
    // an organization name ("Console org rcwq9i") once.
    const short = await add('Q~');
    expect(short.status).toBe(400);
    expect(short.text).toContain('Not saved: secret field &quot;password&quot; must be at least 3 characters');
    expect(short.text).toMatch(/<input id="conn-password"[^>]* aria-invalid="true" aria-describedby="add-error"/);
    // The page's CSRF token is random and may hold any two characters: it is left out of the check.
    expect(short.text.replace(/name="_csrf" value="[^"]*"/g, 'name="_csrf"')).not.toContain('Q~');
    const key = await client.submit('/console/connections', '/console/connections', { kind: 'access_key', name: 'WEATHER_API_KEY', site: 'weather.example.test', value: 'k' });
    expect(key.status).toBe(400);
    expect(key.text).toMatch(/<input id="conn-value"[^>]* aria-invalid="true"/);
    expect((await db().query('SELECT count(*)::int AS n FROM connections WHERE org_id = $1', [org.org_id])).rows[0].n).toBe(before);
  });
});

describe('isolation and boundaries', () => {
  it("answers 404 for another organization's request, key, connection and member ids", async () => {
    const mine = await signedIn('owner');
    const theirs = await orgWithUser('owner');
    const theirRequest = await requestRow(theirs.org.org_id);
    const myRequest = await requestRow(mine.org.org_id);
    expect((await mine.client.get(`/console/requests/${myRequest}`)).status).toBe(200);
    expect((await mine.client.get(`/console/requests/${theirRequest}`)).status).toBe(404);
    const theirKey = (await db().query('SELECT id FROM api_keys WHERE org_id = $1', [theirs.org.org_id])).rows[0].id;
    expect((await mine.client.submit('/console/keys', `/console/keys/${theirKey}/revoke`, {})).status).toBe(404);
    expect((await call('GET', '/v1/catalog/tools', { key: theirs.org.api_key })).status).toBe(200);
    const conn = await addConnection(db(), await loadKeyring({ ...loadConfig(), dataDir: stack().dataDir }), {
      orgId: theirs.org.org_id, kind: 'access_key', name: 'WEATHER_API_KEY', site: 'weather.example.test', secret: 'their-secret-value',
    });
    expect((await mine.client.submit('/console/connections', `/console/connections/${conn.connection_id}/disconnect`, {})).status).toBe(404);
    expect((await db().query('SELECT status FROM connections WHERE id = $1', [conn.connection_id])).rows[0].status).toBe('active');
    expect((await mine.client.submit('/console/members', `/console/members/${theirs.userId}/remove`, {})).status).toBe(404);
    expect((await mine.client.submit(`/console/requests/${myRequest}`, `/console/requests/${theirRequest}/feedback`, { value: 'up' })).status).toBe(404);
    const list = await mine.client.get('/console/requests');
    expect(list.text).toContain(myRequest);
    expect(list.text).not.toContain(theirRequest);
  });

  it('never takes a session cookie as an API or MCP credential', async () => {
    const { client } = await signedIn('owner');
    const cookie = [...client.cookies].map(([k, v]) => `${k}=${v}`).join('; ');
    const q = await call('POST', '/v1/query', { body: { api: '@weather', operation: 'current_weather', input: { city: 'London' } }, headers: { cookie } });
    expect(q.status).toBe(401);
    expect(q.body.error.code).toBe('api_key_required');
    const mcp = await call('POST', '/mcp', { body: { jsonrpc: '2.0', id: 1, method: 'tools/list' }, headers: { cookie, accept: 'application/json, text/event-stream' } });
    expect(mcp.status).toBe(401);
  });

  it('never opens the console with an API key', async () => {
    const org = await newOrg(10);
    const c = new ConsoleClient();
    for (const path of ['/console', '/console/keys', '/console/requests']) {
      const res = await c.get(path, { authorization: `Bearer ${org.api_key}` });
      expect(res.status, path).toBe(303);
      expect(res.location).toBe('/console/sign-in');
      expect(res.text).not.toContain('Available');
    }
  });
});

describe('sign-in throttling', () => {
  it('answers 429 with Retry-After and a friendly page after too many failures for one email, even with the right password', async () => {
    const f = await orgWithUser('owner');
    const c = new ConsoleClient();
    const limit = loadConfig().CONSOLE_SIGNIN_MAX_PER_EMAIL;
    for (let i = 0; i < limit; i++) expect((await c.signIn(f.email, `wrong password ${i}`)).status).toBe(401);
    const blocked = await c.signIn(f.email, PASSWORD);
    expect(blocked.status).toBe(429);
    expect(Number(blocked.headers.get('retry-after'))).toBeGreaterThan(0);
    expect(blocked.text).toContain('Too many sign-in attempts');
    expect(blocked.setCookies.some((s) => s.includes('wqs_session='))).toBe(false);
  });
});

describe('sign-in throttling under concurrency', () => {
  it('holds the per-email limit against a burst of concurrent attempts: no more guesses than the limit get a password check', async () => {
    const f = await orgWithUser('owner');
    const c = new ConsoleClient();
    const token = await c.token('/console/sign-in');
    const limit = loadConfig().CONSOLE_SIGNIN_MAX_PER_EMAIL;
    // All sent at once, as an attacker would: each passed the check before any failure was counted.
    const burst = await Promise.all(
      Array.from({ length: 3 * limit }, (_, i) => c.request('POST', '/console/sign-in', { form: { _csrf: token, email: f.email, password: `wrong password ${i}` } })),
    );
    const statuses = burst.map((r) => r.status);
    expect(statuses.filter((s) => s === 401)).toHaveLength(limit);
    expect(statuses.filter((s) => s === 429)).toHaveLength(2 * limit);
    const bucket = await db().query('SELECT attempts FROM sign_in_throttle WHERE bucket = $1', [`email:${sha256(f.email).toString('hex')}`]);
    expect(bucket.rows[0].attempts).toBe(limit);
    // The right password waits for the window too.
    const blocked = await c.signIn(f.email, PASSWORD);
    expect(blocked.status).toBe(429);
    expect(blocked.setCookies.some((s) => s.includes('wqs_session='))).toBe(false);
  });

  it('does not count a successful sign-in against the limits', async () => {
    const f = await orgWithUser('owner');
    const emailBucket = `email:${sha256(f.email).toString('hex')}`;
    const limit = loadConfig().CONSOLE_SIGNIN_MAX_PER_EMAIL;
    const c = new ConsoleClient();
    for (let i = 0; i < limit - 1; i++) expect((await c.signIn(f.email, `wrong password ${i}`)).status).toBe(401);
    for (let i = 0; i < 3; i++) expect((await new ConsoleClient().signIn(f.email, PASSWORD)).status).toBe(303);
    expect((await db().query('SELECT attempts FROM sign_in_throttle WHERE bucket = $1', [emailBucket])).rows[0].attempts).toBe(limit - 1);
  });
});

describe('on an https base URL, with sign-up open', () => {
  let api: ServiceProcess;
  let base: string;
  beforeAll(async () => {
    // The process's base URL is the public https one; it listens on this loopback port.
    const port = await freePort();
    base = `http://127.0.0.1:${port}`;
    api = await startApiProcess(
      ownPair('console-https', {
        PORT: String(port),
        PUBLIC_BASE_URL: 'https://console.example.test',
        CONSOLE_SIGNUP: 'open',
        CONSOLE_SIGNUP_CREDITS: '25',
        // Low, to see the per-IP limit; the IP bucket is shared (PostgreSQL) with the stack's own API.
        CONSOLE_SIGNIN_MAX_PER_IP: '3',
        // Every request logged, to see that invitation links never are.
        LOG_LEVEL: 'info',
      }),
    );
  }, 120_000);
  afterAll(async () => {
    await api?.kill();
  });

  it('sends Strict-Transport-Security on console pages, API answers, 404s, hijacked streams and answers made before routing', async () => {
    const org = await newOrg(1, 'HSTS');
    const init = { jsonrpc: '2.0', id: 1, method: 'initialize', params: { protocolVersion: '2025-06-18', capabilities: {}, clientInfo: { name: 'x', version: '1' } } };
    const answers = {
      'sign-in page': await new ConsoleClient(base).get('/console/sign-in'),
      'console redirect': await new ConsoleClient(base).get('/console'),
      health: await call('GET', '/health', { baseUrl: base }),
      'API 401': await call('GET', '/v1/catalog/tools', { baseUrl: base }),
      'API 200': await call('GET', '/v1/catalog/tools', { baseUrl: base, key: org.api_key }),
      'unknown path': await call('GET', '/no-such-path', { baseUrl: base }),
      'MCP (hijacked)': await call('POST', '/mcp', { baseUrl: base, key: org.api_key, body: init, headers: { accept: 'application/json, text/event-stream' } }),
      // Answered before any hook runs: a path that is not valid percent-encoding (Fastify's
      // frameworkErrors), and a method Node's parser does not know (written raw to the socket).
      'bad percent-encoding': await call('GET', '/console/%zz', { baseUrl: base }),
      'unknown method': await call('FOO', '/v1/catalog/tools', { baseUrl: base }),
    };
    expect(answers['bad percent-encoding'].status).toBe(400);
    expect(answers['unknown method'].status).toBe(405);
    for (const [what, res] of Object.entries(answers)) {
      expect(res.headers.get('strict-transport-security'), what).toBe('max-age=31536000; includeSubDomains');
    }
    expect(answers['MCP (hijacked)'].status).toBe(200);
  });

  it('uses __Host- cookies with Secure, and signs up a new Owner with the configured credits', async () => {
    const c = new ConsoleClient(base);
    const form = await c.get('/console/sign-up');
    expect(form.status).toBe(200);
    expect(form.setCookies.find((s) => s.startsWith('__Host-wqs_csrf='))).toMatch(/Secure/);
    const email = `new-${Math.random().toString(36).slice(2, 8)}@example.com`;
    const res = await c.submit('/console/sign-up', '/console/sign-up', { organization: 'Fresh Co', email, password: PASSWORD });
    expect(res.status).toBe(303);
    const session = res.setCookies.find((s) => s.startsWith('__Host-wqs_session='))!;
    expect(session).toMatch(/; Secure/i);
    expect(session).toMatch(/Path=\//);
    expect(session).not.toMatch(/Domain=/i);
    const home = await c.get('/console');
    expect(home.text).toMatch(/<dt>Available<\/dt><dd>25<\/dd>/);
    const user = await db().query(`SELECT u.password_hash, m.role FROM users u JOIN memberships m ON m.user_id = u.id WHERE u.email = $1`, [email]);
    expect(user.rows[0].role).toBe('owner');
    expect(user.rows[0].password_hash).toMatch(/^\$argon2id\$/);
  });

  /** A console user who signed up (an address nobody vouches for), signed in on this process. */
  async function signUpAs(email: string) {
    const c = new ConsoleClient(base);
    expect((await c.submit('/console/sign-up', '/console/sign-up', { organization: 'Signed up', email, password: PASSWORD })).status).toBe(303);
    return { client: c, userId: (await db().query('SELECT id FROM users WHERE email = $1', [email])).rows[0].id as string };
  }

  it('lets an account signed up with the invited address accept only with the invitation link', async () => {
    const owner = await signedIn('owner');
    const orgName = (await db().query('SELECT name FROM organizations WHERE id = $1', [owner.org.org_id])).rows[0].name;
    const email = `bob-${Math.random().toString(36).slice(2, 10)}@example.com`;
    // Anyone can sign up with any address (nothing is mailed): this account may not be Bob's.
    const squatter = await signUpAs(email);
    const invited = await owner.client.submit('/console/members', '/console/members', { email, role: 'admin' });
    const id = (await db().query('SELECT id FROM member_invitations WHERE org_id = $1 AND email = $2', [owner.org.org_id, email])).rows[0].id;

    // Without the link: not offered on the Overview, and answering it is like answering an unknown one.
    const home = await squatter.client.get('/console');
    expect(invitationIds(home.text)).toEqual([]);
    expect(home.text).not.toContain(orgName);
    const unknown = await answerAs(squatter.client, 'inv_000000000000000000000000');
    expect(unknown.status).toBe(404);
    expect(await answerAs(squatter.client, id)).toEqual(unknown);
    expect(await answerAs(squatter.client, id, 'accept', { token: 'A'.repeat(43) })).toEqual(unknown);
    expect(await answerAs(squatter.client, id, 'decline')).toEqual(unknown);
    expect((await squatter.client.get(`/console/invitations/${id}?token=${'A'.repeat(43)}`)).status).toBe(404);
    expect(await memberRole(owner.org.org_id, squatter.userId)).toBeNull();

    // The inviter is shown the link once; only its hash is stored.
    expect(invited.status).toBe(200);
    const link = linkOn(invited.text)!;
    expect(link.id).toBe(id);
    expect(invited.text).toContain('shown only this once');
    expect((await db().query('SELECT token_hash FROM member_invitations WHERE id = $1', [id])).rows[0].token_hash).toEqual(sha256(link.token));
    expect((await owner.client.get('/console/members')).text).not.toContain(link.token);

    // Not signed in, the link goes to sign-in and comes back after it.
    const anonymous = new ConsoleClient(base);
    const toSignIn = await anonymous.get(link.path);
    expect(toSignIn.status).toBe(303);
    expect(toSignIn.location).toBe(`/console/sign-in?next=${encodeURIComponent(link.path)}`);
    expect((await anonymous.get(toSignIn.location!)).text).toContain(`name="next" value="${link.path}"`);
    const fresh = new ConsoleClient(); // the stack's own API: this process's per-IP sign-in limit is tiny
    const signIn = await fresh.submit('/console/sign-in', '/console/sign-in', { email, password: PASSWORD, next: link.path });
    expect(signIn.status).toBe(303);
    expect(signIn.location).toBe(link.path);

    // With the link: the invitation is shown and can be accepted.
    const page = await squatter.client.get(link.path);
    expect(page.status).toBe(200);
    expect(page.text).toContain(orgName);
    expect((await squatter.client.submit(link.path, `/console/invitations/${id}/accept`, { token: link.token })).status).toBe(303);
    expect(await memberRole(owner.org.org_id, squatter.userId)).toBe('admin');

    // This process logged those requests (at info), never the token.
    expect(api.output()).toContain(`/console/invitations/${id}`);
    expect(api.output()).not.toContain(link.token);
    expect((await db().query('SELECT email_verified FROM users WHERE id = $1', [squatter.userId])).rows[0].email_verified).toBe(false);
  });

  it('makes a new link when an invitation is sent again: the old link stops working', async () => {
    const owner = await signedIn('owner');
    const email = `carol-${Math.random().toString(36).slice(2, 10)}@example.com`;
    const invitee = await signUpAs(email);
    const first = linkOn((await owner.client.submit('/console/members', '/console/members', { email, role: 'admin' })).text)!;
    const second = linkOn((await owner.client.submit('/console/members', '/console/members', { email, role: 'member' })).text)!;
    expect(second.id).toBe(first.id);
    expect(second.token).not.toBe(first.token);
    const unknown = await answerAs(invitee.client, 'inv_000000000000000000000000', 'accept', { token: first.token });
    expect((await invitee.client.get(first.path)).status).toBe(404);
    expect(await answerAs(invitee.client, first.id, 'accept', { token: first.token })).toEqual(unknown);
    expect(await memberRole(owner.org.org_id, invitee.userId)).toBeNull();
    expect((await invitee.client.get(second.path)).status).toBe(200);
    expect((await invitee.client.submit(second.path, `/console/invitations/${second.id}/accept`, { token: second.token })).status).toBe(303);
    expect(await memberRole(owner.org.org_id, invitee.userId)).toBe('member');
  });

  it('limits failed sign-ins per client IP, across different emails', async () => {
    const c = new ConsoleClient(base);
    let blocked: Awaited<ReturnType<ConsoleClient['signIn']>> | undefined;
    // Distinct emails each time, so no per-email bucket is near its limit: only the IP's can refuse.
    for (let i = 0; i < 5 && !blocked; i++) {
      const res = await c.signIn(`ip-${i}-${Math.random().toString(36).slice(2, 8)}@example.com`, 'wrong password here');
      if (res.status === 429) blocked = res;
      else expect(res.status).toBe(401);
    }
    expect(blocked?.status).toBe(429);
    expect(Number(blocked!.headers.get('retry-after'))).toBeGreaterThan(0);
  });

  it('counts refused sign-ups against the client IP as well: sign-up cannot probe addresses past that limit', async () => {
    const known = await orgWithUser('member');
    const c = new ConsoleClient(base);
    let blocked: Awaited<ReturnType<ConsoleClient['submit']>> | undefined;
    for (let i = 0; i < 6 && !blocked; i++) {
      const res = await c.submit('/console/sign-up', '/console/sign-up', { organization: 'Probe', email: known.email, password: PASSWORD });
      if (res.status === 429) blocked = res;
      else expect(res.text).toContain('That email cannot be used.');
    }
    expect(blocked?.status).toBe(429);
    expect(Number(blocked!.headers.get('retry-after'))).toBeGreaterThan(0);
    expect(blocked!.text).toContain('Too many sign-up attempts');
  });

  it('holds the sign-up limit against a burst of concurrent probes: no more answers than the limit', async () => {
    const known = await orgWithUser('member');
    // A fresh window for this process's client address (the test above used it up).
    await db().query(`DELETE FROM sign_in_throttle WHERE bucket LIKE 'signup-ip:%'`);
    const c = new ConsoleClient(base);
    const token = await c.token('/console/sign-up');
    const burst = await Promise.all(
      Array.from({ length: 10 }, () => c.request('POST', '/console/sign-up', { form: { _csrf: token, organization: 'Probe', email: known.email, password: PASSWORD } })),
    );
    expect(burst.filter((r) => r.text.includes('That email cannot be used.'))).toHaveLength(3); // CONSOLE_SIGNIN_MAX_PER_IP here
    expect(burst.filter((r) => r.status === 429)).toHaveLength(7);
  });

  it('keeps sign-up closed on the shared stack (DATABASE_URL set)', async () => {
    expect((await new ConsoleClient().get('/console/sign-up')).status).toBe(404);
  });
});

describe('Strict-Transport-Security', () => {
  it('is never sent on a plain-http base URL (the stack, as `npm start` runs)', async () => {
    expect(stack().baseUrl).toMatch(/^http:/);
    for (const res of [await new ConsoleClient().get('/console/sign-in'), await call('GET', '/health'), await call('GET', '/no-such-path')]) {
      expect(res.headers.get('strict-transport-security')).toBeNull();
    }
  });

  it('follows HSTS_MAX_AGE_SECONDS and HSTS_INCLUDE_SUBDOMAINS on https, and refuses a bad value at start', () => {
    const at = (env: Record<string, string>) => hstsHeader(loadConfig({ PUBLIC_BASE_URL: 'https://wqs.example.com', ...env }));
    expect(at({})).toBe('max-age=31536000; includeSubDomains');
    expect(at({ HSTS_MAX_AGE_SECONDS: '600', HSTS_INCLUDE_SUBDOMAINS: 'false' })).toBe('max-age=600');
    expect(at({ HSTS_MAX_AGE_SECONDS: '0' })).toBe('max-age=0; includeSubDomains');
    expect(at({ HSTS_MAX_AGE_SECONDS: 'off' })).toBeNull();
    expect(hstsHeader(loadConfig({ PUBLIC_BASE_URL: 'http://wqs.example.com' }))).toBeNull();
    expect(hstsHeader(loadConfig({}))).toBeNull();
    // An empty value (`HSTS_MAX_AGE_SECONDS=` in an env file) is not 0, which would tell browsers to drop the policy.
    for (const bad of ['-1', 'one year', '1.5', '99999999999', '', ' ']) {
      expect(() => loadConfig({ HSTS_MAX_AGE_SECONDS: bad }), bad).toThrow(/HSTS_MAX_AGE_SECONDS/);
    }
  });
});

describe('admin commands', () => {
  const admin = (args: string[], input?: string) => {
    const child = run('node', ['--import', 'tsx', 'apps/admin/main.ts', ...args], {
      cwd: ROOT,
      env: { ...process.env, DATABASE_URL: stack().databaseUrl, LOG_LEVEL: 'silent' },
    });
    if (input !== undefined) {
      child.child.stdin!.end(input);
    }
    return child;
  };

  it('creates a user (password from stdin) and shows the organization with its credits', async () => {
    const org = await newOrg(42);
    const email = `ops-${Math.random().toString(36).slice(2, 8)}@example.com`;
    const made = JSON.parse((await admin(['user', 'create', '--email', email, '--password', '-', '--org', org.org_id, '--role', 'owner'], `${PASSWORD}\n`)).stdout);
    expect(made).toMatchObject({ email, org_id: org.org_id, role: 'owner' });
    expect(made.user_id).toMatch(/^usr_/);
    expect((await new ConsoleClient().signIn(email, PASSWORD)).status).toBe(303);
    const shown = JSON.parse((await admin(['org', 'show', '--org', org.org_id])).stdout);
    expect(shown).toMatchObject({ org_id: org.org_id, credits: { granted: 42, available: 42, reserved: 0, charged: 0 }, members: [{ email, role: 'owner' }] });
    const bad = await admin(['user', 'create', '--email', email, '--password', 'short', '--org', org.org_id, '--role', 'owner']).catch((e) => e);
    expect(bad.code).toBe(1);
    expect(bad.stderr).toContain('at least 10 characters');
    expect(bad.stderr).not.toContain('short');
  });

  it('vouches for a user\'s address (user verify): an unverified user then accepts invitations from the Overview', async () => {
    const owner = await signedIn('owner');
    const invitee = await signedIn('member');
    // As if made by sign-up: nobody vouched for the address, so the Overview offers no invitation.
    await db().query('UPDATE users SET email_verified = false WHERE id = $1', [invitee.userId]);
    await owner.client.submit('/console/members', '/console/members', { email: invitee.email, role: 'member' });
    expect(invitationIds((await invitee.client.get('/console')).text)).toEqual([]);
    const done = JSON.parse((await admin(['user', 'verify', '--email', invitee.email.toUpperCase()])).stdout);
    expect(done).toEqual({ user_id: invitee.userId, email: invitee.email, email_verified: true });
    const [id] = invitationIds((await invitee.client.get('/console')).text);
    expect((await answerAs(invitee.client, id!)).status).toBe(303);
    expect(await memberRole(owner.org.org_id, invitee.userId)).toBe('member');
    const none = await admin(['user', 'verify', '--email', 'nobody-here@example.com']).catch((e) => e);
    expect(none.code).toBe(1);
    expect(none.stderr).toContain('no user has that email');
  });
});
