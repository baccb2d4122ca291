// The console's rating form and the API's feedback route share one per-organization bound in an
// API process (apps/api/routes/feedback.ts FeedbackGate, wired once in apps/api/app.ts): at most
// FEEDBACK_WRITES_PER_ORG of an organization's feedback writes reach PostgreSQL at once, whichever
// door they came through. One more waits its turn up to FEEDBACK_WRITE_WAIT_MS, then is refused:
// through the API as 429 organization_concurrency_limit, through the console as its 429 page with
// Retry-After, nothing changed. Another organization's rating is served meanwhile.
import { randomBytes } from 'node:crypto';
import { afterAll, describe, expect, it } from 'vitest';
import { call, closeDb, newOrg, stack, until, type Call } from './helpers/stack.ts';
import { processPool } from './helpers/processes.ts';
import { startPgProxy } from './helpers/pg-proxy.ts';
import { signedIn, type ConsoleClient, type Page } from './helpers/console-http.ts';

const s = () => stack();
const pool = processPool(() => ({ databaseUrl: s().databaseUrl, temporalAddress: s().temporalAddress, hostMap: s().hostMap, taskQueue: 'console-feedback-unused' }));
afterAll(async () => {
  await pool.killAll();
  await closeDb();
});

const unknownId = () => `req_${randomBytes(9).toString('hex')}`;

/** The answer with the time it took, or 'pending' when it took longer than `ms`. */
async function within<T>(ms: number, p: Promise<T>): Promise<(T & { ms: number }) | 'pending'> {
  const t = Date.now();
  let timer: NodeJS.Timeout | undefined;
  const late = new Promise<'pending'>((r) => (timer = setTimeout(() => r('pending'), ms)));
  try {
    return await Promise.race([p.then((r) => ({ ...r, ms: Date.now() - t })), late]);
  } finally {
    clearTimeout(timer);
  }
}

describe("one organization's feedback writes, through the API and the console together", () => {
  it('share FEEDBACK_WRITES_PER_ORG: a console rating past two API calls gets the 429 page; an API call past two console ratings gets 429 organization_concurrency_limit', async () => {
    const flooder = await newOrg(1);
    const other = await newOrg(1);
    // Every statement that names the flooding organization (its feedback lookups) is held.
    const proxy = await startPgProxy(s().databaseUrl, () => false, (bind) => bind.includes(flooder.org_id));
    try {
      const p = await pool.spawn('api', {
        databaseUrl: proxy.url,
        temporalAddress: s().temporalAddress,
        hostMap: s().hostMap,
        taskQueue: 'console-feedback-unused',
        env: { WQS_SKIP_MIGRATIONS: '1', FEEDBACK_WRITES_PER_ORG: '2', FEEDBACK_WRITE_WAIT_MS: '800' },
      });
      const url = String(p.started.url);
      const apiRate = (id: string) => call('POST', `/v1/query/requests/${id}/feedback`, { key: flooder.api_key, body: { value: null }, baseUrl: url });
      // Signed in, with a form token, before anything is held (the pages read the organization's rows).
      const mine = await signedIn('member', flooder.org_id, url);
      const theirs = await signedIn('member', other.org_id, url);
      const tokens = new Map<ConsoleClient, string>([
        [mine.client, await mine.client.token('/console')],
        [theirs.client, await theirs.client.token('/console')],
      ]);
      const consoleRate = (c: ConsoleClient, id: string): Promise<Page> => c.request('POST', `/console/requests/${id}/feedback`, { form: { _csrf: tokens.get(c)!, value: 'up' } });
      expect((await apiRate(unknownId())).status).toBe(404);
      expect((await consoleRate(mine.client, unknownId())).status).toBe(404);

      // Two API calls in PostgreSQL; a console rating of the same organization waits, then is refused.
      proxy.hold();
      let viaApi: Call[] = [];
      let refusedPage: (Page & { ms: number }) | 'pending';
      let served: (Page & { ms: number }) | 'pending';
      let heldAfter = 0;
      try {
        const sent = [apiRate(unknownId()), apiRate(unknownId())];
        await until(async () => proxy.held() >= 2, 10_000, 20);
        refusedPage = await within(3_000, consoleRate(mine.client, unknownId()));
        served = await within(1_500, consoleRate(theirs.client, unknownId()));
        heldAfter = proxy.held();
        proxy.release();
        viaApi = await Promise.all(sent);
      } finally {
        proxy.release();
      }
      expect(refusedPage).not.toBe('pending');
      expect(served).not.toBe('pending');
      if (refusedPage === 'pending' || served === 'pending') return;
      expect(heldAfter).toBe(2);
      for (const r of viaApi) expect(r.status, r.text).toBe(404);
      expect(refusedPage.status).toBe(429);
      expect(refusedPage.headers.get('retry-after')).toBe('1');
      expect(refusedPage.headers.get('content-type')).toMatch(/^text\/html/);
      expect(refusedPage.text).toContain('<h1>Too many ratings at once</h1>');
      expect(refusedPage.text).toContain('Nothing was changed. Try again in 1 second.');
      expect(refusedPage.text).not.toMatch(/postgres|organization_concurrency_limit|stack/i);
      expect(refusedPage.ms).toBeGreaterThanOrEqual(750);
      // Another organization's rating went to PostgreSQL at once (an unknown id: 404 page).
      expect(served.status).toBe(404);

      // The other way round: two console ratings in PostgreSQL; an API call waits, then is refused.
      proxy.hold();
      let viaConsole: Page[] = [];
      let refused: (Call & { ms: number }) | 'pending';
      try {
        const sent = [consoleRate(mine.client, unknownId()), consoleRate(mine.client, unknownId())];
        await until(async () => proxy.held() >= 2, 10_000, 20);
        refused = await within(3_000, apiRate(unknownId()));
        heldAfter = proxy.held();
        proxy.release();
        viaConsole = await Promise.all(sent);
      } finally {
        proxy.release();
      }
      expect(refused).not.toBe('pending');
      if (refused === 'pending') return;
      expect(heldAfter).toBe(2);
      for (const r of viaConsole) expect(r.status).toBe(404);
      expect(refused.status, refused.text).toBe(429);
      expect(refused.body.error).toMatchObject({ code: 'organization_concurrency_limit', status: 429, retryable: true, details: { feedback_in_flight: 2 } });
      expect(refused.headers.get('retry-after')).toBe('1');
      expect(refused.ms).toBeGreaterThanOrEqual(750);

      // Released: both doors are served again.
      expect((await consoleRate(mine.client, unknownId())).status).toBe(404);
      expect((await apiRate(unknownId())).status).toBe(404);
    } finally {
      await proxy.close();
    }
  }, 120_000);
});
