// `npm run chaos`: keyed queries at concurrency 16 over several organizations on a fresh `npm run
// cluster`, while a worker, an API process, the Temporal server and PostgreSQL are each killed with
// SIGKILL in turn and restarted. Then checks that nothing was lost, doubled or left open, prints the
// figures and exits 1 on any violation (apps/chaos/README.md). Loopback only; bounded in count and time.
import fs from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { createOrg } from '../../shared/db/orgs.ts';
import { createPool } from '../../shared/db/pool.ts';
import { startCluster, type Cluster } from '../cluster/cluster.ts';
import { checkInvariants, waitForResolved } from './checks.ts';
import { makeJobs, openSlots, outcomeOf, runJob, send, type Job, type Outcome } from './load.ts';

const num = (name: string, def: number) => {
  const v = Number(process.env[name] ?? def);
  if (!Number.isInteger(v) || v <= 0) throw new Error(`${name} must be a positive integer`);
  return v;
};
const QUERIES = num('CHAOS_QUERIES', 240);
const CONCURRENCY = num('CHAOS_CONCURRENCY', 16);
const ORGS = num('CHAOS_ORGS', 4);
/** The whole run, start-up and checks included, stops with a failure past this. */
const TIME_LIMIT_MS = num('CHAOS_TIME_LIMIT_SECONDS', 1_800) * 1000;
const CREDITS = 10_000;
/** In turn: a worker, an API process, the Temporal server, PostgreSQL (then the browser worker). */
const VICTIMS = ['worker-http-1', 'api-1', 'temporal', 'postgres', 'worker-browser-1'];

const began = Date.now();
const deadline = began + TIME_LIMIT_MS;
const log = (event: string, fields: Record<string, unknown> = {}) =>
  console.error(JSON.stringify({ t: ((Date.now() - began) / 1000).toFixed(1), event, ...fields }));
const limit = setTimeout(() => {
  log('time_limit', { seconds: TIME_LIMIT_MS / 1000 });
  process.exit(2);
}, TIME_LIMIT_MS + 120_000);
limit.unref();

const dataDir = await fs.mkdtemp(path.join(os.tmpdir(), 'wqs-chaos-'));
let cluster: Cluster | undefined;
let exitCode = 1;
try {
  cluster = await startCluster({
    dataDir,
    log,
    env: {
      // Short deadlines and a frequent reconciler, so an interrupted query settles within the run.
      QUERY_DEADLINE_MS: '60000',
      EXECUTE_HEARTBEAT_TIMEOUT_MS: '5000',
      RECONCILE_INTERVAL_SECONDS: '10',
      RECONCILE_MARGIN_MS: '10000',
      STALE_CLAIM_MS: '15000',
      // Health checks would run every example on the demo sites and muddle the action counts.
      HEALTH_CHECKS_ENABLED: 'false',
      // Retries during an outage add requests; the plan's per-minute limit is not what is tested.
      PLAN_REQUESTS_PER_MINUTE: '100000',
      ORG_REQUESTS_PER_SECOND: '100000',
      ORG_REQUEST_BURST: '100000',
    },
  });
  const c = cluster;
  await fetch(`${c.sites.origin}/__demo/reset`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: '{}' });
  const db = createPool(c.databaseUrl, 2);
  const orgs: Array<{ org_id: string; api_key: string }> = [];
  for (let i = 0; i < ORGS; i++) orgs.push(await createOrg(db, `Chaos org ${i + 1}`, CREDITS));
  await db.end();
  const runId = Date.now().toString(36);
  const jobs = makeJobs(QUERIES, ORGS, await openSlots(c.sites.origin, Math.ceil(QUERIES / 4) + 1), runId);
  log('load_start', { queries: QUERIES, concurrency: CONCURRENCY, orgs: ORGS, apis: c.apiUrls });

  // Kill k happens when the dispatcher hands out job (k+1)·N/(K+2), after kill k-1 has recovered:
  // every kill lands while queries are in flight, one at a time.
  const thresholds = VICTIMS.map((_, k) => Math.floor(((k + 1) * QUERIES) / (VICTIMS.length + 2)));
  const kills: Array<{ part: string; recovery_s: number }> = [];
  let lastKill: Promise<void> = Promise.resolve();
  const retries = new Map<string, number>();
  const outcomes = new Map<string, { job: Job; outcome: Outcome }>();
  let next = 0;
  let lock: Promise<void> = Promise.resolve();
  const take = (): Promise<Job | undefined> => {
    const got = lock.then(async () => {
      if (next >= jobs.length) return undefined;
      const k = thresholds.indexOf(next);
      if (k >= 0) {
        await lastKill;
        lastKill = killAndRecover(c, VICTIMS[k]!, c.devApiKey, runId).then((r) => void kills.push(r));
      }
      return jobs[next++];
    });
    lock = got.then(() => undefined);
    return got;
  };
  const runners = Array.from({ length: CONCURRENCY }, async () => {
    for (let job = await take(); job; job = await take()) {
      const outcome = await runJob(job, c.apiUrls, orgs[job.orgIndex]!.api_key, deadline, (reason) => retries.set(reason, (retries.get(reason) ?? 0) + 1));
      outcomes.set(job.key, { job, outcome });
    }
  });
  await Promise.all(runners);
  await lastKill;
  const loadSeconds = (Date.now() - began) / 1000;
  log('load_done', { outcomes: outcomes.size });

  const unresolvedWait = await waitForResolved(c.databaseUrl, orgs.map((o) => o.org_id), deadline);
  // A retry with each key returns the same outcome (it may go to either API process).
  const replays = new Map<string, Outcome>();
  const keys = [...outcomes.values()];
  await Promise.all(
    Array.from({ length: CONCURRENCY }, async (_, r) => {
      for (let i = r; i < keys.length; i += CONCURRENCY) {
        const { job } = keys[i]!;
        const sent = await send(c.apiUrls[(i + 1) % c.apiUrls.length]!, orgs[job.orgIndex]!.api_key, job);
        replays.set(job.key, outcomeOf(sent, 1));
      }
    }),
  );
  const state = (await (await fetch(`${c.sites.origin}/__demo/state`)).json()) as { bookings: number };
  const violations = await checkInvariants({ databaseUrl: c.databaseUrl, orgs, jobs, outcomes, replays, siteBookings: state.bookings });

  const byCode: Record<string, number> = {};
  for (const { outcome } of outcomes.values()) byCode[outcome.code] = (byCode[outcome.code] ?? 0) + 1;
  const byKind: Record<string, Record<string, number>> = {};
  for (const { job, outcome } of outcomes.values()) {
    byKind[job.kind] ??= {};
    byKind[job.kind]![outcome.code] = (byKind[job.kind]![outcome.code] ?? 0) + 1;
  }
  const figures = {
    queries: outcomes.size,
    concurrency: CONCURRENCY,
    organizations: ORGS,
    kills,
    // Parts that died on their own (then restarted by the supervisor), e.g. as a consequence of a kill.
    unexpected_exits: c.supervisor.unexpectedExits,
    outcomes_by_code: byCode,
    outcomes_by_kind: byKind,
    client_retries: Object.fromEntries([...retries.entries()].sort((a, b) => b[1] - a[1])),
    site_bookings: state.bookings,
    load_seconds: loadSeconds,
    reconciler_wait_seconds: unresolvedWait,
    total_seconds: (Date.now() - began) / 1000,
    violations,
  };
  console.log(JSON.stringify(figures, null, 2));
  exitCode = violations.length === 0 ? 0 : 1;
  log(exitCode === 0 ? 'chaos_passed' : 'chaos_failed', { violations: violations.length });
} catch (err) {
  log('chaos_error', { error: err instanceof Error ? err.message : String(err) });
  if (cluster) log('logs', { dir: cluster.logDir });
} finally {
  await cluster?.stop().catch((err) => log('stop_failed', { error: String(err) }));
  // The data folder stays when the run failed (or CHAOS_KEEP_DATA=1): its logs/ tell what happened.
  if (exitCode === 0 && process.env.CHAOS_KEEP_DATA !== '1') await fs.rm(dataDir, { recursive: true, force: true }).catch(() => undefined);
  else log('kept', { dataDir });
}
process.exit(exitCode);

/**
 * SIGKILL one part, start it again, and measure recovery: from the kill until a fresh keyed query
 * succeeds through the API processes again (probes run as the dev organization, outside the checks).
 */
async function killAndRecover(c: Cluster, part: string, apiKey: string, runId: string): Promise<{ part: string; recovery_s: number }> {
  const t0 = Date.now();
  log('kill', { part, pid: c.supervisor.pidOf(part) });
  await c.supervisor.kill(part);
  await new Promise((r) => setTimeout(r, 2_000));
  await c.supervisor.restart(part);
  const restarted = (Date.now() - t0) / 1000;
  const probe: Job = { index: 0, orgIndex: 0, key: `probe-${runId}-${part}`, kind: 'http_read', body: { api: '@weather', operation: 'current_weather', input: { city: 'London' } } };
  for (let i = 0; Date.now() < deadline; i++) {
    const outcome = await runJob({ ...probe, index: i }, c.apiUrls, apiKey, deadline, () => undefined);
    if (outcome.code === 'ok') break;
    probe.key = `probe-${runId}-${part}-${i}`;
    await new Promise((r) => setTimeout(r, 500));
  }
  const recovery = (Date.now() - t0) / 1000;
  log('recovered', { part, restarted_s: restarted, recovery_s: recovery });
  return { part, recovery_s: recovery };
}
