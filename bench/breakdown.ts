// Where one c=1 query's time goes: the caller's own clock (request sent, answer read), the request
// row's times written by the API (claim) and the workflow (finalize), and the workflow history's
// event times (fetchHistory). All three clocks are this machine's. Each segment is the median over
// `samples` sequential queries, so one slow sample under a loaded machine does not define it.
import { Client, Connection } from '@temporalio/client';
import type { temporal } from '@temporalio/proto';
import pg from 'pg';
import { percentile } from './stats.ts';

type HistoryEvent = temporal.api.history.v1.IHistoryEvent;

export interface BreakdownInput {
  baseUrl: string;
  apiKey: string;
  databaseUrl: string;
  temporalAddress: string;
  samples?: number;
  /** The query to break down; `@weather current_weather` (read-only HTTP) unless given. */
  query?: { api: string; operation: string; input: Record<string, unknown> };
  /** Pause between samples, so work a query leaves behind (a browser context closing) is done before the next. */
  pauseMs?: number;
}

const now = () => performance.timeOrigin + performance.now();
const ms = (e: HistoryEvent | undefined) => {
  const t = e?.eventTime;
  if (!t) return NaN;
  const s = t.seconds as unknown;
  const secs = typeof s === 'number' ? s : Number(String(s));
  return secs * 1000 + (t.nanos ?? 0) / 1e6;
};
/** The event's kind, from its one set `...EventAttributes` field. */
const kind = (e: HistoryEvent) =>
  Object.keys(e).find((k) => k.endsWith('EventAttributes') && (e as Record<string, unknown>)[k] != null)?.replace('EventAttributes', '') ?? '?';

/** Segments of one query, in order; each is [label, milliseconds]. */
function segments(t: { sent: number; answered: number; createdAt: number; completedAt: number }, events: HistoryEvent[]): Array<[string, number]> {
  const all = (k: string) => events.filter((e) => kind(e) === k);
  const [wftSched1, wftSched2] = all('workflowTaskScheduled');
  const [wftStart1, wftStart2] = all('workflowTaskStarted');
  const [wftDone1, wftDone2] = all('workflowTaskCompleted');
  const started = all('workflowExecutionStarted')[0];
  const actSched = all('activityTaskScheduled')[0];
  const actStart = all('activityTaskStarted')[0];
  const actDone = all('activityTaskCompleted')[0];
  const closed = all('workflowExecutionCompleted')[0];
  // Every path begins with the API's claim and the workflow's start and ends with the caller's read.
  const head: Array<[string, number]> = [
    ['api: request sent → claim transaction (auth, validation, catalog, admission)', t.createdAt - t.sent],
    ['start: claim → WorkflowExecutionStarted', ms(started) - t.createdAt],
  ];
  const learn: [string, number] = ['learn: finalize transaction → answer read by the caller', t.answered - t.completedAt];
  const total: [string, number] = ['total', t.answered - t.sent];
  if (!actSched) {
    // Read-only HTTP operations since issue 11: one local activity (runReadQuery), one workflow task.
    return [
      ...head,
      ['wft1: scheduled → started (eager start: in the start response; else the task queue)', ms(wftStart1) - ms(wftSched1)],
      ['wft1: started → finalize transaction (runReadQuery: reserve, site request, settle + envelope)', t.completedAt - ms(wftStart1)],
      ['wft1: finalize transaction → completed', ms(wftDone1) - t.completedAt],
      ['close: wft1 completed → WorkflowExecutionCompleted', ms(closed) - ms(wftDone1)],
      learn,
      ['learn: workflow completed → answer read by the caller', t.answered - ms(closed)],
      ['workflow tasks in the run', all('workflowTaskStarted').length],
      total,
    ];
  }
  if (actSched.activityTaskScheduledEventAttributes?.activityType?.name === 'runReadQuery') {
    // Read-only browser operations: the same fused step as one normal activity on the browser queue;
    // the caller learns from its finalize, before the activity's completion reaches the workflow.
    return [
      ...head,
      ['wft1: scheduled → started (task queue, poller)', ms(wftStart1) - ms(wftSched1)],
      ['wft1: started → completed (replay, the fused activity scheduled)', ms(wftDone1) - ms(wftStart1)],
      ['execute: scheduled → started (browser task queue)', ms(actStart) - ms(actSched)],
      ['execute: started → finalize transaction (runReadQuery: reserve, browser run, settle + envelope)', t.completedAt - ms(actStart)],
      learn,
      ['after the answer: finalize transaction → activity completed', ms(actDone) - t.completedAt],
      ['after the answer: activity completed → WorkflowExecutionCompleted', ms(closed) - ms(actDone)],
      total,
    ];
  }
  return [
    ...head,
    ['wft1: scheduled → started (task queue, poller)', ms(wftStart1) - ms(wftSched1)],
    ['wft1: started → completed (replay + reserve local activity)', ms(wftDone1) - ms(wftStart1)],
    ['execute: scheduled → started (activity task queue)', ms(actStart) - ms(actSched)],
    ['execute: started → completed (site request)', ms(actDone) - ms(actStart)],
    ['wft2: activity completed → started', ms(wftStart2) - ms(wftSched2 ?? actDone)],
    ['wft2: started → finalize transaction (settle + envelope)', t.completedAt - ms(wftStart2)],
    ['wft2: finalize transaction → completed', ms(wftDone2) - t.completedAt],
    ['close: wft2 completed → WorkflowExecutionCompleted', ms(closed) - ms(wftDone2)],
    learn,
    ['learn: workflow completed → answer read by the caller', t.answered - ms(closed)],
    total,
  ];
}

export async function benchBreakdown({ baseUrl, apiKey, databaseUrl, temporalAddress, samples = 25, query, pauseMs = 0 }: BreakdownInput) {
  const connection = await Connection.connect({ address: temporalAddress });
  const client = new Client({ connection });
  const db = new pg.Client({ connectionString: databaseUrl });
  await db.connect();
  const q = query ?? { api: '@weather', operation: 'current_weather', input: { city: 'London' } };
  const body = JSON.stringify(q);
  const rows: Array<Array<[string, number]>> = [];
  try {
    // Warm first (workflow bundle, caches, connections): the breakdown is of a steady query.
    for (let i = 0; i < 10; i++) {
      const res = await fetch(`${baseUrl}/v1/query`, { method: 'POST', headers: { authorization: `Bearer ${apiKey}`, 'content-type': 'application/json' }, body });
      await res.arrayBuffer();
    }
    for (let i = 0; i < samples; i++) {
      if (pauseMs) await new Promise((r) => setTimeout(r, pauseMs));
      const sent = now();
      const res = await fetch(`${baseUrl}/v1/query`, {
        method: 'POST',
        headers: { authorization: `Bearer ${apiKey}`, 'content-type': 'application/json' },
        body,
      });
      const json = (await res.json()) as { data?: { receipt?: { request_id?: string } } };
      const answered = now();
      const id = json.data?.receipt?.request_id;
      if (!id) continue;
      const r = await db.query('SELECT workflow_id, created_at, completed_at FROM requests WHERE id = $1', [id]);
      const row = r.rows[0] as { workflow_id: string; created_at: Date; completed_at: Date };
      // The answer can come before the workflow closes (it is read from the finalize): wait for the close.
      const handle = client.workflow.getHandle(row.workflow_id);
      await handle.result().catch(() => undefined);
      const history = await handle.fetchHistory();
      rows.push(segments({ sent, answered, createdAt: row.created_at.getTime(), completedAt: row.completed_at.getTime() }, history.events ?? []));
    }
  } finally {
    await db.end();
    await connection.close();
  }
  const table: Record<string, { p50_ms: number; min_ms: number }> = {};
  for (const [i, [label]] of (rows[0] ?? []).entries()) {
    const xs = rows.map((r) => r[i]![1]).filter(Number.isFinite).sort((a, b) => a - b);
    table[label] = { p50_ms: Math.round(percentile(xs, 50) * 100) / 100, min_ms: Math.round((xs[0] ?? NaN) * 100) / 100 };
  }
  console.log(`\n## One c=1 query of ${q.api} ${q.operation}, step by step (median of ${rows.length} sequential queries; sum of medians need not equal the median total)`);
  console.table(table);
  return { samples: rows.length, segments: table };
}
