// POST /v1/query through the full stack (API → Temporal → worker → browser engine → demo site) for
// a demo browser operation, beside the same steps run by a standalone warm playwright-core script
// in the same process and run: one Chromium launched once with the engine's flags and host
// mapping, a fresh context per run, the recipe's navigate / wait / fill / select / click / wait,
// and the same fields read. Latency at concurrency 1, throughput at concurrency 4. What the
// service adds on top of the script (so in the ratios): HTTP + Temporal round trips, the run's
// guarded proxy on every connection of the context, and extraction from a snapshot of the page
// (page.content() + cheerio) instead of one in-page read. Four more figures at concurrency 1,
// interleaved with the two above, say which of those parts costs what: the script through a
// guarded proxy, the script parsing a snapshot, the worker's recipe runner alone, and the script
// given the engine's own trick (its context and page made while the call before it ran): the
// service's overhead with that trick taken out of the comparison.
import { chromium, type Browser, type BrowserContext, type Page } from 'playwright-core';
import * as cheerio from 'cheerio';
import { CHROMIUM_ARGS, hostResolverRules } from '../activities/engines/browser-engine.ts';
import { startGuardedProxy } from '../activities/engines/guarded-proxy.ts';
import { createRecipeRunner } from '../activities/engines/index.ts';
import { defaultChromiumPath, loadConfig } from '../shared/config.ts';
import { jobsApi } from '../shared/catalog/demo/jobs.ts';
import { interleaved, load, print, ratio } from './stats.ts';
import { cpuBetween, snapshot } from './procs.ts';

export interface BrowserBenchInput {
  baseUrl: string;
  apiKey: string;
  siteOrigin: string;
  hostMap: Record<string, string>;
  chromiumPath?: string;
  total?: number;
}

// `@jobs search_jobs`, example "TypeScript jobs in London": a client-rendered form search.
const API = '@jobs';
const OPERATION = 'search_jobs';
const INPUT = { keywords: 'typescript', location: 'london' };
const HOST = 'jobs.example.test';

// The browser engine's context options (activities/engines/browser-engine.ts, contextOptions()).
const CONTEXT_OPTIONS = {
  serviceWorkers: 'block' as const,
  acceptDownloads: false,
  javaScriptEnabled: true,
  locale: 'en-GB',
  timezoneId: 'UTC',
  viewport: { width: 1280, height: 900 },
  userAgent: 'Mozilla/5.0 (X11; Linux x86_64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/140.0 Safari/537.36 WorkflowQueryService/0.1',
};

const text = (s: string | null | undefined) => (s == null ? null : s.replace(/\s+/g, ' ').trim());
const int = (s: string | null | undefined) => (s == null || s.trim() === '' ? null : Number.parseInt(s.replace(/,/g, ''), 10));

interface RawJob {
  job_id: string | null;
  title: string | null;
  company: string | null;
  location: string | null;
  min: string | null;
  max: string | null;
  currency: string | null;
  employment_type: string | null;
  posted: string | null;
  url: string | null;
}

/** What the script adds of the service's own work, to see where the service's time goes. */
interface Variant {
  /** Every connection through a guarded proxy of the run's own, as the engine does. */
  guarded?: { hostMap: Record<string, string> };
  /** Also take the page's HTML and parse it (page.content() + cheerio), as the engine's extraction does. */
  snapshot?: boolean;
  /** Take a context and page made ahead of the call, as the engine does. */
  ahead?: Ahead;
}

/**
 * The script given the engine's trick: the next call's context and page are made while this one
 * runs. A call ends only once that is done and its own context is closed, as in the engine, so no
 * work of it spills into the call measured after it (interleaved() runs the variants in turn).
 */
class Ahead {
  private next: Promise<{ context: BrowserContext; page: Page }> | null = null;
  constructor(private readonly browser: Browser) {}
  private make() {
    return this.browser.newContext(CONTEXT_OPTIONS).then(async (context) => ({ context, page: await context.newPage() }));
  }
  async take() {
    const got = await (this.next ?? this.make());
    this.next = this.make();
    return got;
  }
  async ready() {
    await this.next;
  }
  async close() {
    const n = this.next;
    this.next = null;
    if (n) await (await n).context.close();
  }
}

/** The recipe's steps, by hand: what a warm standalone playwright-core script would do. */
export async function searchJobs(browser: Browser, input: typeof INPUT, variant: Variant = {}) {
  const proxy = variant.guarded
    ? await startGuardedProxy({ hostMap: variant.guarded.hostMap, allowPrivateNetwork: false, allowedHosts: new Set([HOST]), onRefused: () => undefined })
    : null;
  const made = variant.ahead ? await variant.ahead.take() : null;
  const context = made?.context ?? (await browser.newContext({ ...CONTEXT_OPTIONS, ...(proxy ? { proxy: { server: proxy.server } } : {}) }));
  try {
    const page = made?.page ?? (await context.newPage());
    await page.goto(`http://${HOST}/`, { waitUntil: 'load' });
    await page.locator('#jobs[data-loaded="true"]').first().waitFor({ state: 'attached' });
    await page.locator('#q').first().fill(input.keywords);
    await page.locator('#location').first().selectOption({ value: input.location });
    await page.locator('#search').first().click();
    await page.locator('#jobs[data-loaded="true"]:not([aria-busy])').first().waitFor({ state: 'attached' });
    // One read of the rendered DOM: the error check, the total, the cards and whether more pages exist.
    // (No named helpers inside: tsx/esbuild would wrap them in __name(), absent in the page.)
    const raw = await page.evaluate(() => ({
      error: !!document.querySelector('#results-status.error'),
      total: document.querySelector('#results-status')?.getAttribute('data-total') ?? null,
      more: !document.querySelector('#load-more[hidden]'),
      jobs: [...document.querySelectorAll('#jobs > li.job')].map((li) => ({
        job_id: li.getAttribute('data-job-id'),
        title: li.querySelector('.job-title')?.textContent ?? null,
        company: li.querySelector('.company')?.textContent ?? null,
        location: li.querySelector('.location')?.textContent ?? null,
        min: li.querySelector('.salary')?.getAttribute('data-min') ?? null,
        max: li.querySelector('.salary')?.getAttribute('data-max') ?? null,
        currency: li.querySelector('.salary')?.getAttribute('data-currency') ?? null,
        employment_type: li.querySelector('.employment-type')?.textContent ?? null,
        posted: li.querySelector('.posted time')?.getAttribute('datetime') ?? null,
        url: (li.querySelector('.job-title a') as HTMLAnchorElement | null)?.href ?? null,
      })),
    }));
    if (variant.snapshot) cheerio.load(await page.content());
    if (raw.error) throw new Error('The job board could not load its listings');
    // The example's result fits on the first page; more pages would need the "Load more" clicks.
    if (raw.more) throw new Error('More than one page of results: the baseline does not paginate');
    const jobs = (raw.jobs as RawJob[]).slice(0, 10).map((j) => ({
      job_id: text(j.job_id),
      title: text(j.title),
      company: text(j.company),
      location: text(j.location),
      salary_min: int(j.min),
      salary_max: int(j.max),
      currency: text(j.currency),
      employment_type: text(j.employment_type),
      posted: j.posted ? /(\d{4}-\d{2}-\d{2})/.exec(j.posted)?.[1] ?? null : null,
      url: j.url,
    }));
    return { total_results: int(raw.total) ?? 0, returned: jobs.length, jobs };
  } finally {
    await context.close();
    await proxy?.close();
    await variant.ahead?.ready();
  }
}

/** Deep equality of JSON values, key order ignored. */
function same(a: unknown, b: unknown): boolean {
  if (a === b) return true;
  if (typeof a !== 'object' || typeof b !== 'object' || a === null || b === null) return false;
  if (Array.isArray(a) !== Array.isArray(b)) return false;
  const ka = Object.keys(a).filter((k) => (a as Record<string, unknown>)[k] !== undefined);
  const kb = Object.keys(b).filter((k) => (b as Record<string, unknown>)[k] !== undefined);
  return ka.length === kb.length && ka.every((k) => same((a as Record<string, unknown>)[k], (b as Record<string, unknown>)[k]));
}

export async function benchBrowser({ baseUrl, apiKey, hostMap, chromiumPath, total = 30 }: BrowserBenchInput) {
  const op = jobsApi.operations.find((o) => o.name === OPERATION)!;
  const example = op.versions[0]!.examples!.find((e) => same(e.input, INPUT));
  if (!example) throw new Error(`${API} ${OPERATION}: no verified example with input ${JSON.stringify(INPUT)}`);

  const body = JSON.stringify({ api: API, operation: OPERATION, input: INPUT });
  const callService = async () => {
    const res = await fetch(`${baseUrl}/v1/query`, {
      method: 'POST',
      headers: { authorization: `Bearer ${apiKey}`, 'content-type': 'application/json' },
      body,
    });
    const json = (await res.json()) as Record<string, unknown>;
    return { status: res.status, json };
  };

  const args = [...CHROMIUM_ARGS];
  const rules = hostResolverRules(hostMap);
  if (rules) args.push(`--host-resolver-rules=${rules}`);
  const browser = await chromium.launch({ executablePath: chromiumPath ?? defaultChromiumPath(), args, headless: true });
  try {
    // The comparison is honest only if both paths read the same values: check before timing.
    const first = await callService();
    if (first.status !== 200) throw new Error(`${API} ${OPERATION} through the service: HTTP ${first.status} ${JSON.stringify(first.json)}`);
    const serviceOutput = (first.json.data as { output?: unknown } | undefined)?.output;
    const baselineOutput = await searchJobs(browser, INPUT);
    if (!same(baselineOutput, example.output)) throw new Error(`The standalone script read ${JSON.stringify(baselineOutput)}, not the example's ${JSON.stringify(example.output)}`);
    if (!same(serviceOutput, baselineOutput)) throw new Error(`The service returned ${JSON.stringify(serviceOutput)}, the standalone script read ${JSON.stringify(baselineOutput)}`);

    const viaService = async () => {
      const r = await callService();
      return r.status === 200 && r.json.success === true;
    };
    const standalone = async () => (await searchJobs(browser, INPUT)).returned === baselineOutput.returned;
    // Concurrency 1 interleaved (stats.ts), so the small differences between them are measured on
    // the same machine state: the service, the script, and the script with each of two parts of
    // the engine's own work, its guarded proxy and its page snapshot parsed for extraction.
    // The engine alone (the worker's recipe runner, no API and no Temporal), with a browser of its own.
    const runner = createRecipeRunner({ hostMap, chromiumPath, browserConcurrency: 1 });
    const recipe = op.versions[0]!.recipe;
    const viaEngine = async () => {
      const out = (await runner.run(recipe as never, INPUT, { signal: AbortSignal.timeout(60_000), heartbeat: () => undefined })) as { returned?: number };
      return out.returned === baselineOutput.returned;
    };
    const ahead = new Ahead(browser);
    const c1 = await interleaved(
      {
        service_c1: viaService,
        standalone_c1: standalone,
        engine_c1: viaEngine,
        standalone_guarded_c1: async () => (await searchJobs(browser, INPUT, { guarded: { hostMap } })).returned === baselineOutput.returned,
        standalone_snapshot_c1: async () => (await searchJobs(browser, INPUT, { snapshot: true })).returned === baselineOutput.returned,
        standalone_ahead_c1: async () => (await searchJobs(browser, INPUT, { ahead })).returned === baselineOutput.returned,
      },
      // A pause between calls: without it, a variant that makes its next context ahead (the
      // service, `ahead`) left Chromium work on the call measured after it, measured at +200 ms.
      { total, warmup: 3, pauseMs: 300 },
    );
    // CPU by process at c=4, per query: on two cores that is what bounds throughput.
    const cpu_c4: Record<string, ReturnType<typeof cpuBetween>> = {};
    const measured = async <T,>(name: string, run: () => Promise<T>) => {
      const before = snapshot();
      const out = await run();
      cpu_c4[name] = cpuBetween(before, snapshot(), total * 2 + 4);
      return out;
    };
    const figures = {
      service_c1: c1.service_c1!,
      standalone_c1: c1.standalone_c1!,
      service_c4: await measured('service_c4', () => load(viaService, { total: total * 2, concurrency: 4, warmup: 4 })),
      standalone_c4: await measured('standalone_c4', () => load(standalone, { total: total * 2, concurrency: 4, warmup: 4 })),
      standalone_guarded_c1: c1.standalone_guarded_c1!,
      standalone_snapshot_c1: c1.standalone_snapshot_c1!,
      standalone_ahead_c1: c1.standalone_ahead_c1!,
      engine_c1: c1.engine_c1!,
    };
    await runner.close();
    await ahead.close();
    // The service runs at most BROWSER_CONCURRENCY contexts per worker (bench/main.ts reads the
    // same environment); the standalone script runs up to 4.
    const browserConcurrency = loadConfig(process.env).BROWSER_CONCURRENCY;
    print(`POST /v1/query (${API} ${OPERATION}, browser) vs the same steps in a standalone warm playwright-core script (service BROWSER_CONCURRENCY=${browserConcurrency})`, figures);
    for (const [name, cpu] of Object.entries(cpu_c4)) print(`CPU by process during ${name} (warm-up included in the per-query figure)`, cpu);
    return {
      operation: `${API} ${OPERATION}`,
      input: INPUT,
      service_browser_concurrency: browserConcurrency,
      ...figures,
      cpu_c4,
      ratios: {
        p50_c1: ratio(figures.service_c1.p50_ms, figures.standalone_c1.p50_ms),
        p99_c1: ratio(figures.service_c1.p99_ms, figures.standalone_c1.p99_ms),
        qps_c4_standalone_over_service: ratio(figures.standalone_c4.qps, figures.service_c4.qps),
        p50_c1_guarded_over_standalone: ratio(figures.standalone_guarded_c1.p50_ms, figures.standalone_c1.p50_ms),
        p50_c1_snapshot_over_standalone: ratio(figures.standalone_snapshot_c1.p50_ms, figures.standalone_c1.p50_ms),
        p50_c1_engine_over_standalone: ratio(figures.engine_c1.p50_ms, figures.standalone_c1.p50_ms),
        p50_c1_service_over_engine: ratio(figures.service_c1.p50_ms, figures.engine_c1.p50_ms),
        p50_c1_ahead_over_standalone: ratio(figures.standalone_ahead_c1.p50_ms, figures.standalone_c1.p50_ms),
        p50_c1_service_over_ahead: ratio(figures.service_c1.p50_ms, figures.standalone_ahead_c1.p50_ms),
      },
    };
  } finally {
    await browser.close().catch(() => undefined);
  }
}
