// The console's Workflows pages in real Chromium, on the real stack (test runs go through Temporal to
// the demo bookshop). The issue's journey: sign in, create a key, add a connection, build a private
// workflow from the template, test-run, publish (100 credits in the ledger), query it over HTTP,
// update it to version 2, pin version 1, compare versions, share it, find it in the public catalog,
// restore. A Member builds too and meets 402 when short of credits; another organization's
// workflow is 404 everywhere; a definition changed after its test run cannot be published.
import { randomBytes } from 'node:crypto';
import type { Page } from 'playwright-core';
import { afterAll, describe, expect, it } from 'vitest';
import { Client, Connection } from '@temporalio/client';
import { testRunWorkflowId, workflowTemplate, type BuilderDefinition } from '../shared/builder/index.ts';
import { balanceOf, call, closeDb, dataConverter, db, query, stack, until } from './helpers/stack.ts';
import { orgWithUser, signedIn } from './helpers/console-http.ts';
import { addAccessKey, chromiumPages, look, signIn } from './helpers/console-browser.ts';

const openPage = chromiumPages();
afterAll(closeDb);

const INPUT = { isbn13: '9782918455943' };
const EXPECTED = workflowTemplate().operations[0]!.examples[0]!.output as Record<string, unknown>;
const newHandle = (p: string) => `@${p}-${randomBytes(4).toString('hex')}`;

/** Version 2 of the template: `authors` is no longer read. */
function withoutAuthors(def: BuilderDefinition): BuilderDefinition {
  const d = structuredClone(def);
  const op = d.operations[0]!;
  delete ((op.recipe.steps as Array<Record<string, unknown>>)[2]!.fields as Record<string, unknown>).authors;
  const schema = op.output_schema as { required: string[]; properties: Record<string, unknown> };
  schema.required = schema.required.filter((k) => k !== 'authors');
  delete schema.properties.authors;
  const { authors: _a, ...rest } = op.examples[0]!.output as Record<string, unknown>;
  op.examples[0]!.output = rest;
  return d;
}

const editor = (page: Page) => page.getByLabel('Definition (JSON)');
const publishButton = (page: Page) => page.getByRole('button', { name: 'Publish', exact: true });

/** Test run from the build page; waits for the outcome line (the run goes through Temporal). */
async function testRunOnPage(page: Page) {
  await page.getByRole('button', { name: 'Test run', exact: true }).click();
  await page.getByRole('heading', { name: 'Test run results' }).waitFor({ timeout: 120_000 });
}

async function buildRows(orgId: string) {
  const r = await db().query(`SELECT amount FROM credit_ledger WHERE org_id = $1 AND kind = 'build' ORDER BY id`, [orgId]);
  return r.rows.map((x) => Number(x.amount));
}

describe('console Workflows in Chromium', () => {
  it('an Owner builds, tests, publishes, queries, updates, pins, compares, shares and restores a workflow', async () => {
    const owner = await orgWithUser('owner', 300);
    const h = newHandle('console-books');
    const page = await openPage();
    await signIn(page, owner.email, owner.password);

    // A key for the HTTP calls, and a connection (the journey's; this recipe needs none).
    await page.getByRole('link', { name: 'API keys', exact: true }).click();
    await page.getByRole('button', { name: 'Create key' }).click();
    const key = await page.getByLabel('Your new API key').inputValue();
    await addAccessKey(page, 'BOOKS_API_KEY', 'books.example.test', 'sk-books-secret-9876');
    expect(await page.getByRole('row').filter({ hasText: 'books.example.test' }).innerText()).toContain('connected');

    // Build: the template, Publish disabled with its reason.
    await page.getByRole('link', { name: 'Workflows', exact: true }).click();
    await page.getByRole('link', { name: 'Build', exact: true }).click();
    await page.getByRole('heading', { level: 1, name: 'Build a workflow' }).waitFor();
    expect(JSON.parse(await editor(page).inputValue())).toEqual(workflowTemplate());
    expect(await publishButton(page).isDisabled()).toBe(true);
    await page.getByText('Publish is available once a test run of exactly this definition passes').waitFor();
    expect(await page.getByText(/costs 100 credits/).count()).toBeGreaterThan(0);
    await look(page, 'workflow-build');

    // Problems are listed next to the editor as pointer + message; the draft comes back as typed.
    const def = workflowTemplate(h);
    const broken = structuredClone(def);
    (broken.operations[0]!.examples[0]!.output as Record<string, unknown>).price = 'cheap';
    await editor(page).fill(JSON.stringify(broken, null, 2));
    await page.getByRole('button', { name: 'Check', exact: true }).click();
    const issues = page.getByRole('region', { name: /problem/ });
    await issues.waitFor();
    expect(await issues.innerText()).toContain('/operations/0/examples/0/output/price');
    expect(JSON.parse(await editor(page).inputValue())).toEqual(broken);
    expect(await publishButton(page).isDisabled()).toBe(true);
    await look(page, 'workflow-build-issues');
    await editor(page).fill('{"handle": ');
    await page.getByRole('button', { name: 'Check', exact: true }).click();
    expect(await page.getByRole('region', { name: /problem/ }).innerText()).toContain('is not valid JSON');

    // Test run: output next to expected, equal, schema valid; then Publish is enabled.
    await editor(page).fill(JSON.stringify(def, null, 2));
    await testRunOnPage(page);
    await page.getByText('Test run: every example passed (1 of 1).').waitFor();
    const example = page.locator('section.example');
    expect(await example.innerText()).toMatch(/passed[\s\S]*Output equals expected\s*yes[\s\S]*Output schema\s*valid/);
    expect(JSON.parse(await example.getByLabel('Output of A mystery that is nearly sold out', { exact: true }).innerText())).toEqual(EXPECTED);
    expect(JSON.parse(await example.getByLabel('Expected output of A mystery that is nearly sold out', { exact: true }).innerText())).toEqual(EXPECTED);
    expect(JSON.parse(await editor(page).inputValue())).toEqual(def);
    expect(await publishButton(page).isEnabled()).toBe(true);
    await look(page, 'workflow-build-tested');

    // Publish privately: version 1, 100 credits through the ledger, the identity holds.
    await publishButton(page).click();
    await page.getByText('Version 1 published: private, 100 credits charged.').waitFor();
    expect(await buildRows(owner.org.org_id)).toEqual([100]);
    const afterV1 = await balanceOf(owner.org.org_id);
    expect(afterV1).toMatchObject({ granted: 300, available: 200, charged: 100, reserved: 0 });
    const ran = await query(key, { api: h, operation: 'book_price', input: INPUT });
    expect(ran.status, ran.text).toBe(200);
    expect(ran.body.data.output).toEqual(EXPECTED);

    // Update to version 2 from the latest version's text.
    await page.getByRole('link', { name: 'Update', exact: true }).click();
    await page.getByRole('heading', { level: 1, name: `Update ${h}` }).waitFor();
    expect(JSON.parse(await editor(page).inputValue())).toEqual(def);
    expect(await page.getByLabel('Share in the public catalog').isChecked()).toBe(false);
    const v2 = withoutAuthors(def);
    await editor(page).fill(JSON.stringify(v2, null, 2));
    await testRunOnPage(page);
    await page.getByText('Test run: every example passed (1 of 1).').waitFor();
    await publishButton(page).click();
    await page.getByText('Version 2 published: private, 100 credits charged.').waitFor();
    expect(await buildRows(owner.org.org_id)).toEqual([100, 100]);

    // The current version answers by default; version 1 by pin, as the page's hint says.
    const latest = await query(key, { api: h, operation: 'book_price', input: INPUT });
    expect(latest.body.data.output.authors).toBeUndefined();
    const hint = JSON.parse(await page.getByLabel('A query pinned to version 1').innerText());
    expect(hint).toEqual({ api: h, operation: 'book_price', version: 1, input: INPUT });
    const pinned = await query(key, hint);
    expect(pinned.status, pinned.text).toBe(200);
    expect(pinned.body.data.output).toEqual(EXPECTED);

    // Versions with the current marker; a diff of 1 → 2 whose removed lines say so in text.
    const rows = page.getByRole('table', { name: `Versions of ${h}` }).getByRole('row');
    expect(await rows.nth(1).innerText()).toMatch(/^2\s+current/);
    await page.getByLabel('From version', { exact: true }).selectOption('1');
    await page.getByLabel('To version', { exact: true }).selectOption('2');
    await page.getByRole('button', { name: 'Show diff' }).click();
    await page.getByRole('heading', { name: 'Version 1 → version 2' }).waitFor();
    const removed = await page.locator('pre.diff del').allInnerTexts();
    expect(removed.some((l) => l.includes('removed:') && l.includes('"authors"'))).toBe(true);
    expect(await page.locator('pre.diff ins').count()).toBe(0);
    await look(page, 'workflow');

    // Share: the tested v2 text is publishable as is; shared is free and public.
    await page.getByRole('link', { name: 'Update', exact: true }).click();
    expect(await publishButton(page).isEnabled()).toBe(true);
    await page.getByLabel('Share in the public catalog').check();
    await publishButton(page).click();
    await page.getByText('Version 3 published: public, 0 credits charged.').waitFor();
    expect(await buildRows(owner.org.org_id)).toEqual([100, 100]);
    const detail = await call('GET', `/v1/catalog/detail?api=${encodeURIComponent(h)}`);
    expect(detail.status, detail.text).toBe(200);
    const found = await until(async () => {
      const r = await call('GET', `/v1/catalog?query=${encodeURIComponent(h.slice(1))}`);
      return r.body.data.items.find((i: { api: string }) => i.api === h);
    }, 60_000);
    expect(found).toMatchObject({ api: h, visibility: 'public' });

    // Restore version 1 (free now: the workflow is shared) as version 4.
    await page.getByRole('button', { name: 'Restore version 1' }).click();
    await page.getByText('Version 4 published (restored from version 1): public, 0 credits charged.').waitFor();
    const restored = await query(key, { api: h, operation: 'book_price', input: INPUT });
    expect(restored.body.data.output).toEqual(EXPECTED);
    const b = await balanceOf(owner.org.org_id);
    expect(b.granted).toBe(b.available + b.reserved + b.charged);
    expect(await buildRows(owner.org.org_id)).toEqual([100, 100]);

    // The list shows it with its latest version and a link to its page.
    await page.getByRole('navigation', { name: 'Console' }).getByRole('link', { name: 'Workflows', exact: true }).click();
    expect(await page.getByRole('row').filter({ hasText: h }).innerText()).toMatch(/public\s+4/);
    await look(page, 'workflows-list');
    await page.getByRole('link', { name: h }).click();
    await page.getByRole('heading', { level: 1, name: h }).waitFor();
    await page.context().close();
  }, 420_000);

  it('a Member builds, and a private publish without the credits is a 402 message that charges nothing', async () => {
    const m = await orgWithUser('member', 100);
    const h = newHandle('member-books');
    const page = await openPage();
    await signIn(page, m.email, m.password);
    expect((await page.goto('/console/keys'))?.status()).toBe(403);
    await page.goto('/console/workflows/build');
    const def = workflowTemplate(h);
    await editor(page).fill(JSON.stringify(def, null, 2));
    // By keyboard: from the editor, Tab reaches Check, then Test run; Enter runs it.
    await editor(page).focus();
    await page.keyboard.press('Tab');
    expect(await page.evaluate(() => document.activeElement?.textContent)).toBe('Check');
    await page.keyboard.press('Tab');
    expect(await page.evaluate(() => document.activeElement?.textContent)).toBe('Test run');
    await page.keyboard.press('Enter');
    await page.getByText('Test run: every example passed (1 of 1).').waitFor({ timeout: 120_000 });
    await publishButton(page).click();
    await page.getByText('Version 1 published: private, 100 credits charged.').waitFor();

    const v2 = structuredClone(def);
    v2.operations[0]!.label = 'Book price and stock';
    await page.getByRole('link', { name: 'Update', exact: true }).click();
    await editor(page).fill(JSON.stringify(v2, null, 2));
    await testRunOnPage(page);
    const [res] = await Promise.all([
      page.waitForResponse((r) => r.url().endsWith('/console/workflows/build') && r.request().method() === 'POST'),
      publishButton(page).click(),
    ]);
    expect(res.status()).toBe(402);
    await page.getByRole('alert').filter({ hasText: 'a private version costs 100 credits and your organization has 0 available. Nothing was charged.' }).waitFor();
    expect(JSON.parse(await editor(page).inputValue())).toEqual(v2);
    expect(await buildRows(m.org.org_id)).toEqual([100]);
    expect(await balanceOf(m.org.org_id)).toEqual({ granted: 100, available: 0, reserved: 0, charged: 100 });
    await look(page, 'workflow-build-refused');
    await page.context().close();
  }, 300_000);
});

describe('console Workflows over HTTP', () => {
  it("a Test run while the organization's other test run runs is refused on the page, the draft kept", async () => {
    const owner = await signedIn('member');
    const def = JSON.stringify(workflowTemplate(newHandle('busy')));
    // The organization's running test run, held open: its workflow id, on a queue no worker polls.
    const connection = await Connection.connect({ address: stack().temporalAddress });
    const temporal = new Client({ connection, dataConverter: await dataConverter() });
    const held = await temporal.workflow.start('builderTestRunWorkflow', {
      taskQueue: `nobody-${randomBytes(4).toString('hex')}`,
      workflowId: testRunWorkflowId(owner.org.org_id),
      args: [{ orgId: owner.org.org_id, testRunId: 'trun_held', examples: [] }],
    });
    try {
      const busy = await owner.client.submit('/console/workflows/build', '/console/workflows/build', { definition: def, action: 'test' });
      expect(busy.status).toBe(429);
      expect(busy.text).toContain('A test run of this organization is already running');
      expect(busy.text).toContain('book_price'); // the draft is sent back
      expect((await db().query('SELECT 1 FROM builder_test_runs WHERE org_id = $1', [owner.org.org_id])).rowCount).toBe(0);
    } finally {
      await held.terminate('test over').catch(() => {});
      await connection.close();
    }
    const free = await owner.client.submit('/console/workflows/build', '/console/workflows/build', { definition: def, action: 'test' });
    expect(free.status, free.text).toBe(200);
    expect(free.text).toContain('every example passed');
  });

  it("another organization's workflow is 404 on every page, and an untested text is refused", async () => {
    const owner = await signedIn('owner');
    const rival = await signedIn('member');
    const h = newHandle('theirs');
    // Build and publish through the console's own form.
    const def = JSON.stringify(workflowTemplate(h));
    const tested = await owner.client.submit('/console/workflows/build', '/console/workflows/build', { definition: def, action: 'test' });
    expect(tested.status, tested.text).toBe(200);
    expect(tested.text).toContain('every example passed');
    const done = await owner.client.submit('/console/workflows/build', '/console/workflows/build', { definition: def, action: 'publish' });
    expect([done.status, done.location]).toEqual([303, `/console/workflows/${encodeURIComponent(h)}?published=1`]);

    const path = `/console/workflows/${encodeURIComponent(h)}`;
    expect((await owner.client.get(path)).status).toBe(200);
    for (const p of [path, `${path}?from=1&to=1`, `/console/workflows/build?api=${encodeURIComponent(h)}`]) {
      const res = await rival.client.get(p);
      expect(res.status, p).toBe(404);
      expect(res.text).not.toContain('My bookshop prices');
    }
    const restore = await rival.client.submit('/console/workflows', `${path}/restore`, { version: '1' });
    expect(restore.status).toBe(404);
    // Publishing the rival's copy of the same text needs the rival's own test run.
    const copy = await rival.client.submit('/console/workflows/build', '/console/workflows/build', { definition: def, action: 'publish' });
    expect(copy.status).toBe(409);
    expect(copy.text).toContain('has no passing test run yet');
    expect(await buildRows(rival.org.org_id)).toEqual([]);

    // A text changed after its test run: Publish disabled on the page, refused if posted anyway.
    const changed = JSON.stringify({ ...workflowTemplate(h), name: 'Renamed after the test' });
    const checked = await owner.client.submit('/console/workflows/build', '/console/workflows/build', { definition: changed, action: 'check' });
    expect(checked.text).toMatch(/<button type="submit" name="action" value="publish" disabled/);
    const refused = await owner.client.submit('/console/workflows/build', '/console/workflows/build', { definition: changed, action: 'publish' });
    expect(refused.status).toBe(409);
    expect(await buildRows(owner.org.org_id)).toEqual([100]);

    // A failing example: shown as such (output ≠ expected) and Publish stays disabled.
    const wrong = workflowTemplate(h);
    (wrong.operations[0]!.examples[0]!.output as Record<string, unknown>).price = 8.99;
    const failed = await owner.client.submit('/console/workflows/build', '/console/workflows/build', { definition: JSON.stringify(wrong), action: 'test' });
    expect(failed.status, failed.text).toBe(200);
    expect(failed.text).toContain('some examples failed (0 of 1)');
    expect(failed.text).toMatch(/Output equals expected<\/dt><dd>no</);
    expect(failed.text).toMatch(/<button type="submit" name="action" value="publish" disabled/);

    // Bad versions and handles.
    expect((await owner.client.get(`${path}?from=1&to=7`)).status).toBe(400);
    expect((await owner.client.get(`${path}?from=x`)).status).toBe(400);
    expect((await owner.client.get('/console/workflows/not-a-handle')).status).toBe(404);
    expect((await owner.client.submit('/console/workflows/build', '/console/workflows/build', { definition: def, action: 'deploy' })).status).toBe(400);
  }, 300_000);
});
