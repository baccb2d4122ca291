// What must hold after the chaos, for every organization and key (issue 13): one terminal outcome
// per key that a retry returns again; granted = available + reserved + charged with nothing
// reserved and charged = successes × price; no action twice on the demo site; nothing unresolved.
import { createPool } from '../../shared/db/pool.ts';
import { priceOf, type Job, type Outcome } from './load.ts';

const UNRESOLVED = ['reserving', 'processing', 'refund_pending'];

/** Waits (bounded) until no request of these organizations is unresolved; returns the seconds waited. */
export async function waitForResolved(databaseUrl: string, orgIds: string[], deadline: number): Promise<number> {
  const db = createPool(databaseUrl, 1);
  const t0 = Date.now();
  try {
    while (Date.now() < deadline) {
      const r = await db.query('SELECT count(*)::int AS n FROM requests WHERE org_id = ANY($1) AND status = ANY($2)', [orgIds, UNRESOLVED]);
      if (r.rows[0].n === 0) break;
      await new Promise((res) => setTimeout(res, 2_000));
    }
  } finally {
    await db.end();
  }
  return (Date.now() - t0) / 1000;
}

export async function checkInvariants(input: {
  databaseUrl: string;
  orgs: Array<{ org_id: string }>;
  jobs: Job[];
  outcomes: Map<string, { job: Job; outcome: Outcome }>;
  replays: Map<string, Outcome>;
  siteBookings: number;
}): Promise<string[]> {
  const violations: string[] = [];
  const fail = (msg: string) => violations.push(msg);
  for (const job of input.jobs) if (!input.outcomes.has(job.key)) fail(`${job.key}: no terminal outcome`);

  for (const [key, { outcome }] of input.outcomes) {
    const replay = input.replays.get(key);
    if (!replay) fail(`${key}: not replayed`);
    else if (replay.status !== outcome.status || replay.code !== outcome.code || (outcome.requestId && replay.requestId !== outcome.requestId)) {
      fail(`${key}: first ${outcome.status} ${outcome.code} ${outcome.requestId ?? ''}, retry ${replay.status} ${replay.code} ${replay.requestId ?? ''}`);
    } else if (!replay.replayed && outcome.code !== 'request_interrupted') {
      // request_interrupted is the key's state, not a retained envelope: it carries no replay header.
      fail(`${key}: a retry with the key was not answered from its retained result (no Idempotency-Replayed: true)`);
    }
  }

  const db = createPool(input.databaseUrl, 1);
  try {
    for (const [i, org] of input.orgs.entries()) {
      const mine = [...input.outcomes.values()].filter(({ job }) => job.orgIndex === i);
      const expected = mine.filter(({ outcome }) => outcome.code === 'ok').reduce((sum, { job }) => sum + priceOf(job.body.api, job.body.operation), 0);
      const b = (await db.query('SELECT granted, available, reserved, charged FROM credit_balances WHERE org_id = $1', [org.org_id])).rows[0] as Record<string, string>;
      const [granted, available, reserved, charged] = ['granted', 'available', 'reserved', 'charged'].map((k) => Number(b[k]));
      if (granted !== available! + reserved! + charged!) fail(`${org.org_id}: granted ${granted} != available ${available} + reserved ${reserved} + charged ${charged}`);
      if (reserved !== 0) fail(`${org.org_id}: ${reserved} credits still reserved`);
      if (charged !== expected) fail(`${org.org_id}: charged ${charged}, successes × price = ${expected}`);
      // One request row per key: the unique index allows no more; fewer would mean a key lost.
      const rows = (await db.query('SELECT count(*)::int AS n FROM requests WHERE org_id = $1 AND idempotency_key_hash IS NOT NULL', [org.org_id])).rows[0].n as number;
      const withRow = mine.filter(({ outcome }) => outcome.requestId !== undefined).length;
      if (rows < withRow) fail(`${org.org_id}: ${rows} keyed request rows for ${withRow} outcomes with a request id`);
      const open = (await db.query('SELECT id, status FROM requests WHERE org_id = $1 AND status = ANY($2)', [org.org_id, UNRESOLVED])).rows;
      for (const row of open) fail(`${org.org_id}: request ${row.id} still ${row.status} after the reconciler`);
    }
  } finally {
    await db.end();
  }

  // Bookings: the site counts each one it made; each success names one, no booking is named twice.
  const booked = [...input.outcomes.values()].filter(({ job, outcome }) => job.kind === 'http_action' && outcome.code === 'ok');
  const ids = new Set(booked.map(({ outcome }) => outcome.bookingId));
  if (ids.size !== booked.length) fail(`${booked.length} successful bookings name only ${ids.size} distinct booking ids`);
  // Every success made its booking; beyond those, only a query reported action_unconfirmed may have
  // booked (the service could not confirm it, and said so). More means an action ran twice.
  const unconfirmed = [...input.outcomes.values()].filter(({ job, outcome }) => job.kind === 'http_action' && outcome.code === 'action_unconfirmed').length;
  if (input.siteBookings < booked.length || input.siteBookings > booked.length + unconfirmed) {
    fail(`the clinic made ${input.siteBookings} bookings for ${booked.length} successful and ${unconfirmed} unconfirmed booking queries`);
  }
  return violations;
}
