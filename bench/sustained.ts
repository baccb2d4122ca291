// A sustained run: direct queries at c=16 for BENCH_SUSTAINED_SECONDS (default 180), reported in
// 30-second windows (is latency flat?), with every process's RSS before and after (does anything
// grow?) and the ledger checked afterwards (granted = available + reserved + charged, nothing left
// reserved, and the charge equal to the queries that succeeded: zero drift). The baseline beside it
// is the same site request made directly, in the same run.
import { Agent, request } from 'undici';
import pg from 'pg';
import { print, summarize } from './stats.ts';
import { snapshot, cpuBetween } from './procs.ts';

export interface SustainedInput {
  baseUrl: string;
  apiKey: string;
  siteOrigin: string;
  databaseUrl: string;
}

const WINDOW_S = 30;

export async function benchSustained({ baseUrl, apiKey, siteOrigin, databaseUrl }: SustainedInput) {
  const seconds = Number(process.env.BENCH_SUSTAINED_SECONDS ?? 180);
  const concurrency = 16;
  const body = JSON.stringify({ api: '@weather', operation: 'current_weather', input: { city: 'Paris' } });
  const db = new pg.Client({ connectionString: databaseUrl });
  await db.connect();
  try {
    const ledgerOf = async () => {
      // bigint columns: cast so node-postgres hands back numbers.
      const r = await db.query<{ org_id: string; granted: number; available: number; reserved: number; charged: number; settled_rows: number }>(
        `SELECT b.org_id, b.granted::float8 AS granted, b.available::float8 AS available, b.reserved::float8 AS reserved, b.charged::float8 AS charged,
                (SELECT coalesce(sum(amount), 0)::float8 FROM credit_ledger l WHERE l.org_id = b.org_id AND l.kind = 'settle') AS settled_rows
           FROM credit_balances b`,
      );
      return r.rows;
    };
    const ledgerBefore = await ledgerOf();
    const cold = snapshot();
    // Memory is compared from the end of the first window (warm: caches filled, pools open) to the end.
    let rssBefore: ReturnType<typeof snapshot> | undefined;

    const windows: Array<{ latencies: number[]; errors: number; started: number }> = [];
    const started = performance.now();
    const end = started + seconds * 1000;
    let ok = 0;
    await Promise.all(
      Array.from({ length: concurrency }, async () => {
        while (performance.now() < end) {
          const w = Math.floor((performance.now() - started) / (WINDOW_S * 1000));
          if (w >= 1 && !rssBefore) rssBefore = snapshot();
          const win = (windows[w] ??= { latencies: [], errors: 0, started: performance.now() });
          const t = performance.now();
          let good = false;
          try {
            const res = await fetch(`${baseUrl}/v1/query`, {
              method: 'POST',
              headers: { authorization: `Bearer ${apiKey}`, 'content-type': 'application/json' },
              body,
            });
            await res.arrayBuffer();
            good = res.status === 200;
          } catch {
            good = false;
          }
          win.latencies.push(performance.now() - t);
          if (good) ok += 1;
          else win.errors += 1;
        }
      }),
    );
    const rssAfter = snapshot();
    // Let the last settlements commit before reading the ledger.
    await new Promise((r) => setTimeout(r, 2000));
    const ledgerAfter = await ledgerOf();

    const table: Record<string, ReturnType<typeof summarize>> = {};
    windows.forEach((w, i) => {
      const span = Math.min(WINDOW_S, seconds - i * WINDOW_S);
      table[`${i * WINDOW_S}-${i * WINDOW_S + span}s`] = summarize(w.latencies, w.errors, span);
    });

    // The baseline: the same site request made directly, c=16, for 10 seconds.
    const agent = new Agent({ connections: 32 });
    const direct: number[] = [];
    const dEnd = performance.now() + 10_000;
    await Promise.all(
      Array.from({ length: concurrency }, async () => {
        while (performance.now() < dEnd) {
          const t = performance.now();
          const res = await request(`${siteOrigin}/api/v1/current?city=Paris`, { headers: { host: 'weather.example.test' }, dispatcher: agent });
          await res.body.arrayBuffer();
          direct.push(performance.now() - t);
        }
      }),
    );
    await agent.close();
    table['direct site request, 10 s'] = summarize(direct, 0, 10);
    print(`Sustained: POST /v1/query at c=${concurrency} for ${seconds} s, in ${WINDOW_S}-second windows`, table);

    const warm = rssBefore ?? cold;
    const rss: Record<string, { processes: number; rss_cold_mb: number; rss_warm_mb: number; rss_end_mb: number; private_warm_mb: number; private_end_mb: number; private_growth_pct: number }> = {};
    for (const [name, g] of Object.entries(rssAfter.groups)) {
      const w = warm.groups[name];
      const growth = w?.anon_mb ? Math.round(((g.anon_mb - w.anon_mb) / w.anon_mb) * 1000) / 10 : NaN;
      rss[name] = {
        processes: g.processes,
        rss_cold_mb: cold.groups[name]?.rss_mb ?? NaN,
        rss_warm_mb: w?.rss_mb ?? NaN,
        rss_end_mb: g.rss_mb,
        private_warm_mb: w?.anon_mb ?? NaN,
        private_end_mb: g.anon_mb,
        private_growth_pct: growth,
      };
    }
    print('Memory of each process group: RSS at the start, after the first window, at the end; private (anonymous) memory and its growth from the first window to the end', rss);
    const cpu = cpuBetween(cold, rssAfter, ok);

    // Ledger: every organization's identity, nothing left reserved, and the benchmark
    // organization's charge grown by exactly (queries that succeeded) × price.
    const ledger = ledgerAfter.map((row) => {
      const before = ledgerBefore.find((b) => b.org_id === row.org_id);
      return {
        org_id: row.org_id,
        identity_holds: row.granted === row.available + row.reserved + row.charged,
        reserved_after: row.reserved,
        charged_delta: row.charged - (before?.charged ?? 0),
        // The balance's charge agrees with the ledger's settle rows.
        rows_agree: row.charged === row.settled_rows,
      };
    });
    const price = await db.query<{ cost_credits: number }>(
      `SELECT o.cost_credits FROM operations o JOIN apis a ON a.id = o.api_id WHERE a.handle = '@weather' AND o.name = 'current_weather' ORDER BY a.id LIMIT 1`,
    ).catch(() => ({ rows: [] as Array<{ cost_credits: number }> }));
    const cost = price.rows[0]?.cost_credits;
    const charged = ledger.reduce((s, l) => s + l.charged_delta, 0);
    const drift = cost === undefined ? null : charged - ok * cost;
    const checks = {
      queries_ok: ok,
      errors: windows.reduce((s, w) => s + w.errors, 0),
      identity_holds_everywhere: ledger.every((l) => l.identity_holds),
      balances_agree_with_ledger_rows: ledger.every((l) => l.rows_agree),
      reserved_left: ledger.reduce((s, l) => s + l.reserved_after, 0),
      credits_charged: charged,
      price: cost ?? null,
      ledger_drift_credits: drift,
    };
    print('Ledger after the sustained run', { checks });
    return { seconds, concurrency, windows: table, rss, cpu, ledger: checks };
  } finally {
    await db.end();
  }
}
