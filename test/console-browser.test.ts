// The console in real Chromium: every page driven as a person would (labels, buttons, links by their
// accessible names), each checked with axe-core (no WCAG 2.x A/AA violation) and photographed to
// .tools/screenshots/. The journey: sign in, create a key and use it over HTTP, see the request and
// rate it, revoke the key (then the API answers revoked_api_key), add a connection, members,
// workflows, sign out; removing an Administrator who made keys, then revoking those keys from the
// notice; a Member meets 403 pages; a missing CSRF token is 403; another
// organization's request is 404; too many failed sign-ins are 429.
import { afterAll, describe, expect, it } from 'vitest';
import { loadConfig } from '../shared/config.ts';
import { inviteMember } from '../shared/accounts/invitations.ts';
import { invitationLinkPath } from '../apps/api/console/pages/invitations.ts';
import { call, closeDb, db, query } from './helpers/stack.ts';
import { orgWithUser, PASSWORD, signedIn } from './helpers/console-http.ts';
import { addAccessKey, axeViolations, chromiumPages, fillSignIn, look, signIn } from './helpers/console-browser.ts';

const openPage = chromiumPages();
afterAll(closeDb);

describe('console in Chromium', () => {
  it('an Owner signs in, creates a key, uses and revokes it, sees and rates the request, connects an account, signs out', async () => {
    const owner = await orgWithUser('owner', 50);
    await signedIn('member', owner.org.org_id); // someone else on the Members page
    const page = await openPage();

    await page.goto('/console');
    expect(new URL(page.url()).pathname).toBe('/console/sign-in');
    await look(page, 'sign-in');
    // The check can fail: an input without a label is a violation.
    await page.evaluate(() => document.querySelector('main')!.insertAdjacentHTML('beforeend', '<input id="unlabelled">'));
    expect((await axeViolations(page)).map((v) => v.id)).toContain('label');
    await page.reload();
    await signIn(page, owner.email, owner.password);
    for (const name of ['Overview', 'Requests', 'API keys', 'Connections', 'Workflows', 'Members']) {
      expect(await page.getByRole('navigation', { name: 'Console' }).getByRole('link', { name, exact: true }).count(), name).toBe(1);
    }
    expect(await page.locator('dl.cards').innerText()).toContain('50');
    await look(page, 'overview-empty');

    // API keys: the full key once; then used over HTTP.
    await page.getByRole('link', { name: 'API keys', exact: true }).click();
    await page.getByRole('button', { name: 'Create key' }).click();
    const key = await page.getByLabel('Your new API key').inputValue();
    expect(key).toMatch(/^svc_sk_/);
    await look(page, 'api-keys');
    const ran = await query(key, { api: '@weather', operation: 'current_weather', input: { city: 'London' } }, { 'Idempotency-Key': `console-${Date.now()}` });
    expect(ran.status, ran.text).toBe(200);
    const requestId = ran.body.data.receipt.request_id as string;

    // Requests: the row, then its page with the receipt, stages, retained result and feedback.
    await page.getByRole('link', { name: 'Requests', exact: true }).click();
    await page.getByRole('heading', { level: 1, name: 'Requests' }).waitFor();
    const row = page.getByRole('row').filter({ hasText: requestId });
    expect(await row.innerText()).toMatch(/succeeded[\s\S]*@weather · current_weather/);
    await look(page, 'requests');
    // htmx (from this origin, under the page's CSP) refreshes the list when a filter changes.
    await page.getByLabel('Status').selectOption('failed');
    await page.getByText('No requests match.').waitFor();
    await page.waitForURL(/status=failed/);
    await page.getByLabel('Status').selectOption('succeeded');
    await page.getByRole('link', { name: requestId }).waitFor();
    await page.getByRole('link', { name: requestId }).click();
    await page.getByRole('heading', { name: 'Receipt' }).waitFor();
    expect(await page.locator('pre.json').innerText()).toContain('"success": true');
    await page.getByRole('button', { name: 'Helpful', exact: true }).click();
    await page.getByText('Your rating: helpful').waitFor();
    expect((await db().query('SELECT value FROM request_feedback WHERE request_id = $1', [requestId])).rows[0].value).toBe(1);
    await look(page, 'request');
    await page.getByRole('link', { name: 'Overview', exact: true }).click();
    await page.getByRole('link', { name: requestId }).waitFor();
    await look(page, 'overview');

    // Revoke: the next API request with the key is refused.
    await page.getByRole('link', { name: 'API keys', exact: true }).click();
    await page.getByRole('button', { name: `Revoke ${key.slice(0, 12)}…` }).click();
    await page.getByText(/revoked \d{4}-/).waitFor();
    const refused = await call('GET', '/v1/catalog/tools', { key });
    expect(refused.status).toBe(401);
    expect(refused.body.error.code).toBe('revoked_api_key');

    // Connections: add an access key; its value is never shown again.
    await addAccessKey(page, 'WEATHER_API_KEY', 'weather.example.test', 'sk-weather-very-secret-1234');
    const conn = page.getByRole('row').filter({ hasText: 'weather.example.test' });
    expect(await conn.innerText()).toContain('connected');
    expect(await page.content()).not.toContain('sk-weather-very-secret-1234');
    await look(page, 'connections');
    // Disconnect: the state moves to revoked.
    await page.getByRole('button', { name: 'Disconnect WEATHER_API_KEY on weather.example.test' }).click();
    expect(await page.getByRole('row').filter({ hasText: 'weather.example.test' }).innerText()).toContain('revoked');
    // An access error's add_url: the form filled in with what the workflow asked for.
    await page.goto('/console/connections/new?kind=access_key&name=WEATHER_API_KEY&site=weather.example.test');
    expect(await page.getByLabel('Kind').inputValue()).toBe('access_key');
    expect(await page.getByLabel('Name').inputValue()).toBe('WEATHER_API_KEY');
    expect(await page.getByLabel('Site').inputValue()).toBe('weather.example.test');
    await look(page, 'connections-new');
    // A field the server refuses is marked and described by the message.
    await page.getByLabel('Name').fill('bad name!');
    await page.getByLabel('Key value').fill('sk-weather-very-secret-1234');
    await page.getByRole('button', { name: 'Save connection' }).click();
    await page.getByRole('alert').filter({ hasText: 'Not saved: name must match' }).waitFor();
    expect(await page.getByLabel('Name').getAttribute('aria-invalid')).toBe('true');
    await look(page, 'connections-refused');

    await page.getByRole('link', { name: 'Members', exact: true }).click();
    await page.getByRole('heading', { level: 1, name: 'Members' }).waitFor();
    await look(page, 'members');
    // Inviting: one answer whatever the address, and the invitation listed as pending.
    await page.getByLabel('Email').fill('someone-new@example.com');
    await page.getByRole('button', { name: 'Invite' }).click();
    await page.getByRole('status').filter({ hasText: 'Invitation recorded' }).waitFor();
    expect(await page.getByRole('row').filter({ hasText: 'someone-new@example.com' }).count()).toBe(1);
    // The link to send them, shown this once.
    expect(await page.getByLabel('Invitation link for someone-new@example.com').inputValue()).toMatch(/\/console\/invitations\/inv_[0-9a-f]{24}\?token=[\w-]{43}$/);
    await look(page, 'members-invited');
    // Invited to another organization (this operator-created user's address is vouched for): the
    // Overview offers Accept and Decline, and so does the invitation's link.
    const inviter = await orgWithUser('owner', 0);
    const invitation = await inviteMember(db(), { actor: 'owner', actorUserId: inviter.userId, orgId: inviter.org.org_id, email: owner.email, role: 'member' });
    await page.getByRole('link', { name: 'Overview', exact: true }).click();
    await page.getByRole('heading', { level: 2, name: 'Invitations' }).waitFor();
    await page.getByRole('button', { name: /^Accept the invitation to / }).waitFor();
    await look(page, 'overview-invitation');
    await page.goto(invitationLinkPath(invitation.id, invitation.token));
    await page.getByRole('heading', { level: 1, name: 'Invitation' }).waitFor();
    await page.getByRole('button', { name: 'Accept', exact: true }).waitFor();
    await look(page, 'invitation');
    await page.getByRole('link', { name: 'Workflows', exact: true }).click();
    await page.getByRole('heading', { level: 1, name: 'Workflows' }).waitFor();
    await look(page, 'workflows');

    // The skip link is the first thing the keyboard reaches, and it moves focus to the content.
    await page.keyboard.press('Tab');
    expect(await page.evaluate(() => document.activeElement?.textContent)).toBe('Skip to content');

    // A form without its CSRF token is refused.
    await page.getByRole('link', { name: 'API keys', exact: true }).click();
    await page.evaluate(() => document.querySelector('form[action="/console/keys"] input[name="_csrf"]')?.remove());
    await page.getByRole('button', { name: 'Create key' }).click();
    await page.getByRole('heading', { name: 'Form expired' }).waitFor();
    await look(page, 'csrf-refused');
    expect((await db().query('SELECT count(*)::int AS n FROM api_keys WHERE org_id = $1', [owner.org.org_id])).rows[0].n).toBe(2);

    // Another organization's request: 404.
    const other = await orgWithUser('owner');
    const theirs = await query(other.org.api_key, { api: '@weather', operation: 'current_weather', input: { city: 'Paris' } });
    expect(theirs.status).toBe(200);
    const miss = await page.goto(`/console/requests/${theirs.body.data.receipt.request_id}`);
    expect(miss?.status()).toBe(404);
    await look(page, 'not-found');

    // Sign out: the session is gone.
    await page.goto('/console');
    await page.getByRole('button', { name: 'Sign out' }).click();
    await page.getByRole('heading', { level: 1, name: 'Sign in' }).waitFor();
    await page.goto('/console/keys');
    await page.getByRole('heading', { level: 1, name: 'Sign in' }).waitFor();
    await page.context().close();
  }, 180_000);

  it("an Owner removes an Administrator, is told their keys still work, lists them and revokes them in one step", async () => {
    const owner = await orgWithUser('owner', 0);
    const leaver = await signedIn('admin', owner.org.org_id);
    const made: string[] = [];
    for (let i = 0; i < 2; i++) {
      const res = await leaver.client.submit('/console/keys', '/console/keys', {});
      made.push(/id="new-key" class="secret" readonly value="(svc_sk_[A-Za-z0-9]+)"/.exec(res.text)![1]!);
    }
    const page = await openPage();
    await signIn(page, owner.email, owner.password);
    await page.getByRole('link', { name: 'API keys', exact: true }).click();
    expect(await page.getByRole('row').filter({ hasText: `${made[0]!.slice(0, 12)}…` }).innerText()).toContain(leaver.email);

    await page.getByRole('link', { name: 'Members', exact: true }).click();
    await page.getByRole('button', { name: `Remove ${leaver.email}` }).click();
    await page.getByRole('status').filter({ hasText: `${leaver.email} is no longer a member, but 2 API keys` }).waitFor();
    await look(page, 'members-removed-keys');
    await page.getByRole('link', { name: 'See the keys they created' }).click();
    await page.getByRole('heading', { level: 2, name: `Keys created by removed member (${leaver.email})` }).waitFor();
    expect(await page.getByLabel('Created by', { exact: true }).inputValue()).toBe(leaver.userId);
    await look(page, 'api-keys-by-creator');
    await page.getByRole('button', { name: 'Revoke all 2 keys' }).click();
    await page.getByText('None of them still works.').waitFor();
    for (const key of made) expect((await call('GET', '/v1/auth', { key })).body.error.code).toBe('revoked_api_key');
    expect((await call('GET', '/v1/auth', { key: owner.org.api_key })).status).toBe(200);
    await page.context().close();
  }, 120_000);

  it('a Member reads requests but meets 403 pages for keys, connections and members', async () => {
    const m = await orgWithUser('member');
    const page = await openPage();
    await signIn(page, m.email, m.password);
    expect(await page.getByRole('link', { name: 'API keys', exact: true }).count()).toBe(0);
    for (const path of ['/console/keys', '/console/connections', '/console/members']) {
      const res = await page.goto(path);
      expect(res?.status(), path).toBe(403);
      await page.getByRole('heading', { name: 'Not allowed' }).waitFor();
    }
    await look(page, 'forbidden');
    await page.getByRole('link', { name: 'Requests', exact: true }).click();
    await page.getByRole('heading', { level: 1, name: 'Requests' }).waitFor();
    await page.context().close();
  }, 120_000);

  it('throttles sign-in: a friendly 429 page after too many failures', async () => {
    const f = await orgWithUser('owner');
    const page = await openPage();
    for (let i = 0; i < loadConfig().CONSOLE_SIGNIN_MAX_PER_EMAIL; i++) {
      await page.goto('/console/sign-in');
      await fillSignIn(page, f.email, `wrong password ${i}`);
      await page.getByRole('alert').filter({ hasText: 'Wrong email or password.' }).waitFor();
    }
    await page.getByLabel('Email').fill(f.email);
    await page.getByLabel('Password').fill(PASSWORD);
    const [res] = await Promise.all([page.waitForResponse((r) => r.url().endsWith('/console/sign-in') && r.request().method() === 'POST'), page.getByRole('button', { name: 'Sign in' }).click()]);
    expect(res.status()).toBe(429);
    expect(Number(res.headers()['retry-after'])).toBeGreaterThan(0);
    await page.getByRole('heading', { name: 'Too many attempts' }).waitFor();
    await look(page, 'throttled');
    await page.context().close();
  }, 120_000);
});
