// Console sign-up, open, on an API process of this file's own (TRUST_PROXY names the loopback, so
// each test speaks from addresses of its own through X-Forwarded-For and no budget it uses up is
// another test's):
// - names people read (an organization's, an address) refuse control, direction and invisible
//   characters, with the form's error and that field marked; a Persian name's ZWNJ or an emoji's
//   ZWJ stays; invitations refuse such an address alike;
// - accounts made per client address are budgeted (CONSOLE_SIGNUP_MAX_PER_IP, 2 here): the next is
//   the 429 page with Retry-After, refused sign-ups do not use the budget up, a concurrent burst
//   makes no more than it, and the budget outlives sign-in's shorter window.
import { createHash, randomBytes } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import { deleteEndedWindows } from '../shared/accounts/throttle.ts';
import { db } from './helpers/stack.ts';
import { ownPairPool } from './helpers/own-pair.ts';
import { ConsoleClient, orgWithUser, PASSWORD } from './helpers/console-http.ts';
import { chromium } from 'playwright-core';
import { loadConfig } from '../shared/config.ts';
import { CHROMIUM_ARGS } from '../activities/engines/browser-engine.ts';
import { axeViolations, screenshot } from './helpers/console-browser.ts';

const BUDGET = 2;
const pool = ownPairPool('signup', {
  CONSOLE_SIGNUP: 'open',
  CONSOLE_SIGNUP_CREDITS: '25',
  CONSOLE_SIGNUP_MAX_PER_IP: String(BUDGET),
  TRUST_PROXY: '127.0.0.1, ::1',
});

/** An address of the test's own (documentation range, random /64). */
const someAddress = () => `2001:db8:${randomBytes(2).toString('hex')}:${randomBytes(2).toString('hex')}::1`;
const someEmail = (tag: string) => `${tag}-${randomBytes(5).toString('hex')}@example.com`;

async function start() {
  const api = await pool.spawn('api');
  return String(api.started.url);
}

/** Post the sign-up form from `from` (X-Forwarded-For), with a token of a fresh page. */
async function signUp(base: string, from: string, fields: { organization: string; email: string; password?: string }, c = new ConsoleClient(base)) {
  const headers = { 'x-forwarded-for': from };
  const page = await c.request('GET', '/console/sign-up', { headers });
  const token = /name="_csrf" value="([^"]+)"/.exec(page.text)![1]!;
  return c.request('POST', '/console/sign-up', { form: { _csrf: token, password: PASSWORD, ...fields }, headers });
}

const orgsNamed = async (name: string) => (await db().query('SELECT id FROM organizations WHERE name = $1', [name])).rowCount;
const userCount = async (email: string) => (await db().query('SELECT 1 FROM users WHERE email = $1', [email.toLowerCase()])).rowCount;
const alertOf = (text: string) => /<p class="alert" role="alert"[^>]*>([^<]*)<\/p>/.exec(text)?.[1] ?? null;

// Each inside a name ("Acme<c>Corp"): C0 and C1 controls, DEL, the line separator, bidirectional
// overrides and isolates, direction marks, zero-width and other invisible characters, and joiners
// between Latin letters (where they only make a lookalike).
const REFUSED: Record<string, string> = {
  'C0 (SOH)': '\u0001',
  ESC: '\u001b',
  DEL: '\u007f',
  'C1 NEL': '\u0085',
  'C1 CSI': '\u009b',
  'line separator': '\u2028',
  RLO: '\u202e',
  LRE: '\u202a',
  LRI: '\u2066',
  RLI: '\u2067',
  FSI: '\u2068',
  PDI: '\u2069',
  ZWSP: '\u200b',
  'ZWNJ between Latin letters': '\u200c',
  'ZWJ between Latin letters': '\u200d',
  LRM: '\u200e',
  RLM: '\u200f',
  ALM: '\u061c',
  BOM: '\ufeff',
  'word joiner': '\u2060',
  'soft hyphen': '\u00ad',
  'Hangul filler': '\u3164',
};

describe('names a sign-up sets', () => {
  it('refuses an organization name with a control, direction or invisible character: the form says so, nothing is made', async () => {
    const base = await start();
    for (const [what, ch] of Object.entries(REFUSED)) {
      const name = `Acme${ch}Corp ${randomBytes(3).toString('hex')}`;
      const email = someEmail('name');
      const res = await signUp(base, someAddress(), { organization: name, email });
      expect(res.status, what).toBe(400);
      expect(alertOf(res.text), what).toMatch(/^The organization name must not contain (control characters or direction overrides|invisible characters \(zero-width spaces, direction marks, fillers\))\.$/);
      expect(res.text, what).toMatch(/<input id="organization"[^>]* aria-invalid="true" aria-describedby="sign-up-error"/);
      expect(res.setCookies.some((s) => s.startsWith('wqs_session=')), what).toBe(false);
      expect(await orgsNamed(name), what).toBe(0);
      expect(await userCount(email), what).toBe(0);
    }
  });

  it('keeps what names need: accents, scripts, a Persian word\'s ZWNJ, an emoji\'s ZWJ', async () => {
    const base = await start();
    for (const name of ['Café Zürich', 'می\u200cخواهم', '👩\u200d💻 Labs']) {
      const unique = `${name} ${randomBytes(3).toString('hex')}`;
      const res = await signUp(base, someAddress(), { organization: unique, email: someEmail('ok') });
      expect(res.status, name).toBe(303);
      expect(await orgsNamed(unique), name).toBe(1);
    }
  });

  it('refuses such an address at sign-up and in an invitation', async () => {
    const base = await start();
    for (const ch of ['\u202e', '\u200b', '\u200d', '\u0007', '\u2060']) {
      const email = `ceo${ch}@example.com`;
      const res = await signUp(base, someAddress(), { organization: 'Address test', email });
      expect(res.status).toBe(400);
      expect(alertOf(res.text)).toMatch(/^The email must not contain /);
      expect(res.text).toMatch(/<input id="email"[^>]* aria-invalid="true"/);
      expect(await userCount(email)).toBe(0);
    }
    const owner = await orgWithUser('owner');
    const c = new ConsoleClient(base);
    expect((await c.signIn(owner.email, PASSWORD)).status).toBe(303);
    const invited = await c.submit('/console/members', '/console/members', { email: 'ceo\u202e@example.com', role: 'admin' });
    expect(invited.status).toBe(400);
    expect(alertOf(invited.text)).toBe('Email must not contain control characters or direction overrides.');
    expect((await db().query('SELECT 1 FROM member_invitations WHERE org_id = $1', [owner.org.org_id])).rowCount).toBe(0);
  });
});

describe('accounts made per client address', () => {
  it('allows CONSOLE_SIGNUP_MAX_PER_IP, then answers the 429 page with Retry-After; another address is not held back', async () => {
    const base = await start();
    const from = someAddress();
    const tag = `Farm ${randomBytes(3).toString('hex')}`;
    for (let i = 0; i < BUDGET; i++) expect((await signUp(base, from, { organization: tag, email: someEmail('farm') })).status).toBe(303);
    const email = someEmail('farm');
    const over = await signUp(base, from, { organization: tag, email });
    expect(over.status).toBe(429);
    expect(Number(over.headers.get('retry-after'))).toBeGreaterThan(23 * 3600);
    expect(over.text).toContain('Too many accounts were created from your network. Wait 24 hour(s) and try again');
    expect(await orgsNamed(tag)).toBe(BUDGET);
    expect(await userCount(email)).toBe(0);
    // The same address on another port, or in the same /64, is the same client.
    expect((await signUp(base, `[${from}]:4444`, { organization: tag, email })).status).toBe(429);
    expect((await signUp(base, from.replace(/::1$/, '::ab'), { organization: tag, email })).status).toBe(429);
    // Someone else is not held back.
    expect((await signUp(base, someAddress(), { organization: tag, email })).status).toBe(303);
    expect(await orgsNamed(tag)).toBe(BUDGET + 1);
  });

  it('counts only accounts made: refused sign-ups use none of the budget', async () => {
    const base = await start();
    const from = someAddress();
    const taken = await orgWithUser('member');
    for (let i = 0; i < 3; i++) expect(alertOf((await signUp(base, from, { organization: 'Taken', email: taken.email })).text)).toContain('That email cannot be used.');
    expect((await signUp(base, from, { organization: 'Weak', email: someEmail('weak'), password: 'short' })).status).toBe(400);
    for (let i = 0; i < BUDGET; i++) expect((await signUp(base, from, { organization: 'Real', email: someEmail('real') })).status).toBe(303);
    expect((await signUp(base, from, { organization: 'Real', email: someEmail('real') })).status).toBe(429);
  });

  it('holds against a concurrent burst: no more accounts than the budget', async () => {
    const base = await start();
    const from = someAddress();
    const tag = `Burst ${randomBytes(3).toString('hex')}`;
    const answers = await Promise.all(Array.from({ length: 6 }, () => signUp(base, from, { organization: tag, email: someEmail('burst') })));
    expect(answers.filter((r) => r.status === 303)).toHaveLength(BUDGET);
    expect(answers.filter((r) => r.status === 429)).toHaveLength(6 - BUDGET);
    expect(await orgsNamed(tag)).toBe(BUDGET);
  });

  it('outlives sign-in\'s window: housekeeping deletes a budget only after its own day', async () => {
    const id = randomBytes(4).toString('hex');
    const rows = [`signups:t-${id}`, `signup-ip:t-${id}`, `ip:t-${id}`];
    const at = async (ago: string) => {
      await db().query(`DELETE FROM sign_in_throttle WHERE bucket = ANY($1)`, [rows]);
      await db().query(`INSERT INTO sign_in_throttle (bucket, window_start, attempts) SELECT b, now() - $2::interval, 1 FROM unnest($1::text[]) AS b`, [rows, ago]);
      const c = loadConfig();
      await deleteEndedWindows(
        db(),
        { windowMs: c.CONSOLE_SIGNIN_WINDOW_SECONDS * 1000, perIp: 50, perEmail: 10 },
        { windowMs: c.CONSOLE_SIGNUP_WINDOW_SECONDS * 1000, perIp: 5 },
      );
      return (await db().query(`SELECT bucket FROM sign_in_throttle WHERE bucket = ANY($1) ORDER BY bucket`, [rows])).rows.map((r) => r.bucket);
    };
    expect(await at('1 hour')).toEqual([`signups:t-${id}`]);
    expect(await at('25 hours')).toEqual([]);
  });
});

describe('names stored without these rules, as pages show them', () => {
  it('writes direction and invisible characters of an OAuth client\'s name and an older organization name as visible escapes', async () => {
    const base = await start();
    // Anyone may register a client; the consent page names it twice, around its own words. Such a
    // name is refused at registration now (test/oauth-refusals.test.ts): this one was stored before.
    const reg = await fetch(`${base}/oauth/register`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ client_name: 'Helper', redirect_uris: ['http://127.0.0.1:40125/cb'] }),
    });
    expect(reg.status).toBe(201);
    const clientId = ((await reg.json()) as { client_id: string }).client_id;
    await db().query('UPDATE oauth_clients SET client_name = $2 WHERE id = $1', [clientId, 'Helper\u202Egnp.exe\u200B']);
    const owner = await orgWithUser('owner');
    // An organization name stored before the rules (as an operator's `org create` still may).
    await db().query('UPDATE organizations SET name = $2 WHERE id = $1', [owner.org.org_id, 'Old\u2066Co\u0007']);
    const c = new ConsoleClient(base);
    expect((await c.signIn(owner.email, PASSWORD)).status).toBe(303);
    const verifier = randomBytes(32).toString('base64url');
    const params = {
      response_type: 'code',
      client_id: clientId,
      redirect_uri: 'http://127.0.0.1:40125/cb',
      code_challenge: createHash('sha256').update(verifier).digest('base64url'),
      code_challenge_method: 'S256',
      state: 'st',
      resource: `${base}/mcp`,
    };
    const page = await c.get(`/console/oauth/authorize?${new URLSearchParams(params)}`);
    expect(page.status).toBe(200);
    expect(page.text).toContain('<h1>Connect Helper\\u202Egnp.exe\\u200B</h1>');
    expect(page.text).toContain('<strong>Helper\\u202Egnp.exe\\u200B</strong> wants to use');
    expect(page.text).toContain('Old\\u2066Co\\u0007');
    expect(page.text).not.toMatch(/[\u202E\u200B\u2066\u0007]/);
  });
});

describe('the sign-up page in Chromium', () => {
  it('shows a refused name with the field marked, and the over-budget page (axe, screenshots)', async () => {
    const base = await start();
    const browser = await chromium.launch({ executablePath: loadConfig().CHROMIUM_PATH, args: [...CHROMIUM_ARGS], headless: true });
    try {
      const context = await browser.newContext({ baseURL: base, viewport: { width: 1200, height: 800 }, extraHTTPHeaders: { 'x-forwarded-for': someAddress() } });
      const page = await context.newPage();
      await page.goto('/console/sign-up');
      await page.getByLabel('Organization name').fill('Acme\u202egnp.exe');
      await page.getByLabel('Email').fill(someEmail('browser'));
      await page.getByLabel('Password', { exact: true }).fill(PASSWORD);
      await page.getByRole('button', { name: 'Create account' }).click();
      await page.getByRole('alert').waitFor();
      expect(await page.getByRole('alert').innerText()).toBe('The organization name must not contain control characters or direction overrides.');
      expect(await page.getByLabel('Organization name').getAttribute('aria-invalid')).toBe('true');
      expect(await axeViolations(page)).toEqual([]);
      await screenshot(page, 'sign-up-refused-name');
      for (let i = 0; i <= BUDGET; i++) {
        await page.goto('/console/sign-up');
        await page.getByLabel('Organization name').fill('Budget Co');
        await page.getByLabel('Email').fill(someEmail('browser'));
        await page.getByLabel('Password', { exact: true }).fill(PASSWORD);
        await page.getByRole('button', { name: 'Create account' }).click();
        await page.waitForLoadState();
        if (i < BUDGET) {
          await page.getByRole('heading', { level: 1, name: 'Overview' }).waitFor();
          await context.clearCookies();
        }
      }
      await page.getByRole('heading', { level: 1, name: 'Too many attempts' }).waitFor();
      expect(await axeViolations(page)).toEqual([]);
      await screenshot(page, 'sign-up-over-budget');
    } finally {
      await browser.close();
    }
  });
});
