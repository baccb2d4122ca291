// Real Chromium for the console tests (playwright-core with Debian's Chromium, launched like the
// browser engine), an axe-core check of the WCAG 2.x A/AA rules, and screenshots to
// .tools/screenshots/ (ignored; a few good ones are copied to docs/screenshots/ by hand). A test file
// takes one Chromium for all its tests with `chromiumPages()`.
import fs from 'node:fs/promises';
import path from 'node:path';
import { chromium, type Browser, type Page } from 'playwright-core';
import { afterAll, beforeAll, expect } from 'vitest';
import { loadConfig } from '../../shared/config.ts';
import { CHROMIUM_ARGS } from '../../activities/engines/browser-engine.ts';
import { ROOT } from './processes.ts';
import { stack } from './stack.ts';

export const AXE_TAGS = ['wcag2a', 'wcag2aa', 'wcag21a', 'wcag21aa', 'wcag22aa'];
const AXE_PATH = path.join(ROOT, 'node_modules/axe-core/axe.min.js');
export const SCREENSHOTS = path.join(ROOT, '.tools/screenshots');

export const launchBrowser = (): Promise<Browser> =>
  chromium.launch({ executablePath: loadConfig().CHROMIUM_PATH, args: [...CHROMIUM_ARGS], headless: true });

/** A fresh browser context (its own cookies), under the pages' own Content-Security-Policy. */
export async function newPage(browser: Browser, baseURL: string): Promise<Page> {
  const context = await browser.newContext({ baseURL, viewport: { width: 1200, height: 800 } });
  return context.newPage();
}

/**
 * One Chromium for the calling test file, launched before its tests and closed after them (hooks
 * registered here). Returns an opener of fresh pages (each its own context) on the stack's API.
 */
export function chromiumPages(): () => Promise<Page> {
  let browser: Browser | undefined;
  beforeAll(async () => {
    browser = await launchBrowser();
  }, 60_000);
  afterAll(async () => {
    await browser?.close();
  });
  return () => {
    if (!browser) throw new Error('Chromium is launched in beforeAll: open pages inside a test');
    return newPage(browser, stack().baseUrl);
  };
}

/** Submits the sign-in form the page shows. */
export async function fillSignIn(page: Page, email: string, password: string): Promise<void> {
  await page.getByLabel('Email').fill(email);
  await page.getByLabel('Password').fill(password);
  await page.getByRole('button', { name: 'Sign in' }).click();
}

/** Opens the sign-in page, signs in and waits for the Overview it lands on. */
export async function signIn(page: Page, email: string, password: string): Promise<void> {
  await page.goto('/console/sign-in');
  await fillSignIn(page, email, password);
  await page.getByRole('heading', { level: 1, name: 'Overview' }).waitFor();
}

/** Adds an access-key connection on the Connections page, reached through the console's navigation. */
export async function addAccessKey(page: Page, name: string, site: string, value: string): Promise<void> {
  await page.getByRole('link', { name: 'Connections', exact: true }).click();
  await page.getByLabel('Kind').selectOption('access_key');
  await page.getByLabel('Name', { exact: true }).fill(name);
  await page.getByLabel('Site').fill(site);
  await page.getByLabel('Key value').fill(value);
  await page.getByRole('button', { name: 'Save connection' }).click();
}

let axeSource: Promise<string> | undefined;

export interface AxeViolation {
  id: string;
  impact: string | null;
  help: string;
  targets: string[];
}

/** axe-core's violations of the WCAG 2.0/2.1/2.2 A and AA rules on the current page. */
export async function axeViolations(page: Page): Promise<AxeViolation[]> {
  // Evaluated through the DevTools protocol, which the page's CSP (script-src 'self') does not govern;
  // a <script> tag would be refused, as it should be.
  if (!(await page.evaluate(() => 'axe' in window))) await page.evaluate(await (axeSource ??= fs.readFile(AXE_PATH, 'utf8')));
  return page.evaluate(async (tags) => {
    const axe = (window as unknown as { axe: { run(ctx: Document, opts: unknown): Promise<{ violations: Array<{ id: string; impact: string | null; help: string; nodes: Array<{ target: unknown[] }> }> }> } }).axe;
    const result = await axe.run(document, { runOnly: { type: 'tag', values: tags } });
    return result.violations.map((v) => ({ id: v.id, impact: v.impact, help: v.help, targets: v.nodes.map((n) => String(n.target)) }));
  }, AXE_TAGS);
}

export async function screenshot(page: Page, name: string): Promise<void> {
  await fs.mkdir(SCREENSHOTS, { recursive: true });
  await page.screenshot({ path: path.join(SCREENSHOTS, `${name}.png`), fullPage: true });
}

/** The page has no axe violation (the assertion names it), and its screenshot is written as `name`. */
export async function look(page: Page, name: string): Promise<void> {
  expect(await axeViolations(page), `axe on ${name}`).toEqual([]);
  await screenshot(page, name);
}
