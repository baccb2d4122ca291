// What tests get from the shared stack, and small helpers to use it.
import { inject } from 'vitest';
import { createPool, type Db } from '../../shared/db/pool.ts';
import { createLedgerPool, type LedgerDb } from '../../shared/db/credits.ts';
import { createOrg } from '../../shared/db/orgs.ts';
import { loadConfig } from '../../shared/config.ts';
import { createDataConverter } from '../../shared/temporal/data-converter.ts';
import { weatherApi } from '../../shared/catalog/demo/weather.ts';

export interface StackInfo {
  baseUrl: string;
  databaseUrl: string;
  temporalAddress: string;
  demoOrigin: string;
  hostMap: Record<string, string>;
  taskQueue: string;
  workflowBundlePath: string;
  dataDir: string;
}

declare module 'vitest' {
  export interface ProvidedContext {
    stack: StackInfo;
  }
}

export const stack = (): StackInfo => inject('stack');

/** The shared worker's health-check interval: long, so the only runs are the first and those tests trigger. */
export const STACK_HEALTH_INTERVAL_SECONDS = 86_400;

/** Connection settings for an API/worker pair of a test's own, on a task queue of its own. */
export function ownPair(name: string, env: Record<string, string> = {}) {
  const s = stack();
  return {
    databaseUrl: s.databaseUrl,
    temporalAddress: s.temporalAddress,
    hostMap: s.hostMap,
    taskQueue: `${name}-${Date.now()}-${Math.random().toString(36).slice(2, 6)}`,
    workflowBundlePath: s.workflowBundlePath,
    env,
  };
}

/** The stack's Temporal data converter (payloads encrypted; the processes share $DATA_DIR/payload-key
 *  like the connections key): for tests whose own client reads results or starts workflows there. */
export const dataConverter = () => createDataConverter(loadConfig());

let pool: Db | undefined;
/** A direct PostgreSQL connection, for asserting ledger rows and request records. */
export function db(): Db {
  pool ??= createPool(stack().databaseUrl, 4);
  return pool;
}

let ledger: LedgerDb | undefined;
/** The pool reservations run on, as the worker's (its statements end within RESERVE_STATEMENT_TIMEOUT_MS). */
export function ledgerDb(): LedgerDb {
  ledger ??= createLedgerPool(stack().databaseUrl, 2);
  return ledger;
}

export async function closeDb() {
  await Promise.all([pool?.end(), ledger?.end()]);
  pool = undefined;
  ledger = undefined;
}

/** A fresh organization per test: isolated balance, requests and keys. */
export async function newOrg(credits = 100, name = 'Test org') {
  return createOrg(db(), `${name} ${Math.random().toString(36).slice(2, 8)}`, credits);
}

export interface Call {
  status: number;
  headers: Headers;
  body: any;
  text: string;
}

export async function call(
  method: string,
  path: string,
  opts: { key?: string; body?: unknown; rawBody?: string; headers?: Record<string, string>; baseUrl?: string } = {},
): Promise<Call> {
  const headers: Record<string, string> = { ...opts.headers };
  if (opts.key) headers.authorization = `Bearer ${opts.key}`;
  let body: string | undefined;
  if (opts.rawBody !== undefined) body = opts.rawBody;
  else if (opts.body !== undefined) {
    body = JSON.stringify(opts.body);
    headers['content-type'] ??= 'application/json';
  }
  const res = await fetch(`${opts.baseUrl ?? stack().baseUrl}${path}`, { method, headers, body });
  const text = await res.text();
  let parsed: unknown = undefined;
  try {
    parsed = JSON.parse(text);
  } catch {
    /* not JSON */
  }
  return { status: res.status, headers: res.headers, body: parsed, text };
}

export const query = (key: string, body: unknown, headers: Record<string, string> = {}, baseUrl?: string) =>
  call('POST', '/v1/query', { key, body, headers, baseUrl });

/** The Temporal workflow id the service recorded for a request (its receipt's `request_id`). */
export async function workflowIdOf(requestId: string): Promise<string> {
  const r = await db().query<{ workflow_id: string }>(`SELECT workflow_id FROM requests WHERE id = $1`, [requestId]);
  return r.rows[0]!.workflow_id;
}

/** The ledger invariant and the balance of one organization. */
export async function balanceOf(orgId: string) {
  const r = await db().query('SELECT granted, available, reserved, charged FROM credit_balances WHERE org_id = $1', [orgId]);
  return r.rows[0] as { granted: number; available: number; reserved: number; charged: number };
}

export async function ledgerOf(orgId: string) {
  const r = await db().query(`SELECT request_id, kind, amount FROM credit_ledger WHERE org_id = $1 AND kind <> 'grant' ORDER BY id`, [orgId]);
  return r.rows as Array<{ request_id: string; kind: string; amount: number }>;
}

/** Demo-site control: faults (latency/status), reset, state. */
export async function demo(path: string, body?: unknown) {
  const res = await fetch(`${stack().demoOrigin}${path}`, {
    method: body === undefined && path.endsWith('state') ? 'GET' : 'POST',
    headers: { 'content-type': 'application/json' },
    body: body === undefined ? (path.endsWith('state') ? undefined : '{}') : JSON.stringify(body),
  });
  return res.json() as Promise<any>;
}

/**
 * The demo weather workflow's operations without weather_alerts, for a test that publishes a copy of
 * it on the shared stack: health checks run every workflow's examples, and the weather site allows 5
 * alert calls per client in 10 s (test/health.test.ts expects @weather's alerts healthy).
 */
export const weatherOperationsWithoutAlerts = () => weatherApi.operations.filter((o) => o.name !== 'weather_alerts');

export const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

export async function until<T>(fn: () => Promise<T | undefined | null | false>, timeoutMs = 30_000, everyMs = 200): Promise<T> {
  const end = Date.now() + timeoutMs;
  for (;;) {
    const v = await fn();
    if (v) return v;
    if (Date.now() > end) throw new Error('condition not met in time');
    await sleep(everyMs);
  }
}
