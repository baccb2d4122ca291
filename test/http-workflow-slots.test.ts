// A read-only HTTP query runs as a local activity inside its workflow's first workflow task, so the
// task holds one of the worker's workflow-task slots for as long as the run takes, including while
// it waits for its organization's turn at the runner's fair HTTP slots (http-fair-slots.test.ts).
// The SDK hands workflow-task slots out first come, first served; were they fewer than the runs one
// organization may have going (PLAN_CONCURRENCY), that organization's slow runs would take them
// all and another's query would wait in Temporal's queue until one of those runs ended. Here, on a
// pair with the service's default settings, one organization keeps more runs going than the SDK's
// own default of 40 slots, against a slow site, and another's query must not wait behind them.
import { describe, expect, it } from 'vitest';
import { ownPairPool, withTemporal } from './helpers/own-pair.ts';
import { balanceOf, demo, newOrg, query, sleep, workflowIdOf } from './helpers/stack.ts';
import { sdkDefaultCachedWorkflows, workerTuning } from '../apps/worker/worker.ts';
import { loadConfig } from '../shared/config.ts';
// The SDK's own option defaults (not in its public index): what Worker.create does with ours.
import { compileWorkerOptions } from '@temporalio/worker/lib/worker-options.js';
import { noopMetricMeter } from '@temporalio/common';

const pool = ownPairPool('wft-slots');

/** One organization's runs at once: above the SDK's default slots, below the plan's 64. */
const BURST = 48;
const LATENCY_MS = 6_000;
const slow = (i: number) => ({ api: '@weather', operation: 'current_weather', input: { city: i % 2 ? 'London' : 'Paris' } });
const fast = { api: '@books', operation: 'get_book', input: { isbn13: '9782918455943' } };

describe('workflow-task slots between organizations', () => {
  it("one organization's many slow runs do not hold every workflow-task slot: another's query starts at once", async () => {
    await pool.spawn('worker');
    const url = String((await pool.spawn('api')).started.url);
    const a = await newOrg(10_000, 'A');
    const b = await newOrg(100, 'B');
    expect((await query(b.api_key, fast, {}, url)).status).toBe(200);
    expect((await query(a.api_key, slow(0), {}, url)).status).toBe(200);
    const before = await balanceOf(a.org_id);

    await demo('/__demo/faults', { host: 'weather.example.test', path_prefix: '/api/v1/current', latency_ms: LATENCY_MS, times: 1000 });
    const burst = Array.from({ length: BURST }, (_, i) => query(a.api_key, slow(i), {}, url));
    // Every run of the burst has started (its workflow task taken) before B asks.
    await sleep(2_000);
    const sent = performance.now();
    const late = await query(b.api_key, fast, {}, url);
    const waited = performance.now() - sent;
    const as = await Promise.all(burst);

    // B's query answered at once, long before any of A's runs could (their site takes 6 s).
    expect(late.status, late.text).toBe(200);
    expect(waited).toBeLessThan(LATENCY_MS / 2);
    // Its workflow task was taken by the worker at once, not left waiting in Temporal's queue for a slot.
    const history = await withTemporal(async (c) => c.workflow.getHandle(await workflowIdOf(late.body.data.receipt.request_id)).fetchHistory());
    const events = history.events ?? [];
    const at = (e: (typeof events)[number] | undefined) => Number(String(e?.eventTime?.seconds)) * 1000 + (e?.eventTime?.nanos ?? 0) / 1e6;
    const scheduled = events.find((e) => e.workflowTaskScheduledEventAttributes);
    const started = events.find((e) => e.workflowTaskStartedEventAttributes);
    expect(at(started) - at(scheduled)).toBeLessThan(1_000);
    // A's runs all answered (a quarter of the HTTP slots at a time) and each was charged once.
    expect(as.map((r) => r.status)).toEqual(Array.from({ length: BURST }, () => 200));
    const after = await balanceOf(a.org_id);
    expect(after.reserved).toBe(0);
    expect(after.charged - before.charged).toBe(BURST * before.charged);
  }, 240_000);
});

describe('workflow-task slots of the query task queue (workerTuning)', () => {
  const tuning = (env: Record<string, string>, sdkCache: number) => workerTuning(loadConfig(env as NodeJS.ProcessEnv), sdkCache);
  it('are as many as the local-activity slots unless set, with a cache at least as large', () => {
    expect(tuning({}, 2_300)).toMatchObject({ maxConcurrentWorkflowTaskExecutions: 1_000, maxConcurrentLocalActivityExecutions: 1_000, maxCachedWorkflows: 2_300 });
    // A small heap: the cache grows to the slots (a workflow with a task in progress stays cached).
    expect(tuning({}, 180)).toMatchObject({ maxConcurrentWorkflowTaskExecutions: 1_000, maxCachedWorkflows: 1_000 });
    expect(tuning({ WORKER_MAX_CONCURRENT_LOCAL_ACTIVITIES: '3000' }, 2_300)).toMatchObject({ maxConcurrentWorkflowTaskExecutions: 3_000, maxCachedWorkflows: 3_000 });
  });
  it("keeps an operator's own values as they are", () => {
    expect(tuning({ WORKER_MAX_CONCURRENT_WORKFLOW_TASKS: '60' }, 2_300)).toMatchObject({ maxConcurrentWorkflowTaskExecutions: 60, maxCachedWorkflows: 2_300 });
    // Slots set above the SDK's cache size: the cache grows to them.
    expect(tuning({ WORKER_MAX_CONCURRENT_WORKFLOW_TASKS: '3000' }, 2_300)).toMatchObject({ maxConcurrentWorkflowTaskExecutions: 3_000, maxCachedWorkflows: 3_000 });
    expect(tuning({ WORKER_MAX_CACHED_WORKFLOWS: '500' }, 2_300)).toMatchObject({ maxConcurrentWorkflowTaskExecutions: 500, maxCachedWorkflows: 500 });
    // No cache: every task replays its history, and the slots are the local activities' again.
    expect(tuning({ WORKER_MAX_CACHED_WORKFLOWS: '0' }, 2_300)).toMatchObject({ maxConcurrentWorkflowTaskExecutions: 1_000, maxCachedWorkflows: 0 });
  });
  it("starts from the SDK's own cache size, and the SDK takes the slots as given", () => {
    const logger = { log() {}, trace() {}, debug() {}, info() {}, warn() {}, error() {} };
    // The SDK's defaults for this process, worked out by the SDK itself: a new SDK that sizes its
    // cache another way fails here, not silently in production.
    const sdk = compileWorkerOptions({ taskQueue: 'q', workflowsPath: '/nowhere' }, logger, noopMetricMeter);
    expect(sdkDefaultCachedWorkflows()).toBe(sdk.maxCachedWorkflows);
    const ours = compileWorkerOptions({ taskQueue: 'q', workflowsPath: '/nowhere', ...workerTuning(loadConfig({} as NodeJS.ProcessEnv)) }, logger, noopMetricMeter);
    expect(ours.tuner.workflowTaskSlotSupplier).toEqual({ type: 'fixed-size', numSlots: 1_000 });
    expect(ours.tuner.localActivityTaskSlotSupplier).toEqual({ type: 'fixed-size', numSlots: 1_000 });
    expect(ours.maxCachedWorkflows).toBe(Math.max(sdk.maxCachedWorkflows, 1_000));
  });
});
