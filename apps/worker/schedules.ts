// What the worker's Temporal Schedules (health checks, maintenance) share: create-or-update by a
// fixed id, a state (paused, note) that survives worker restarts so an operator's
// `temporal schedule toggle --pause` holds, and a start-up step that never stops the worker.
import {
  Client,
  Connection,
  ScheduleAlreadyRunning,
  ScheduleOverlapPolicy,
  type ScheduleOptionsAction,
  type ScheduleSpec,
} from '@temporalio/client';
import { createDataConverter } from '../../shared/temporal/data-converter.ts';
import type { PayloadKeyConfig } from '../../shared/temporal/payload-keys.ts';

// SKIP: a run still going when the next is due is not doubled up; the next interval picks up.
// A short catch-up window: after an outage one run is enough, not one per missed interval.
export const SCHEDULE_POLICIES = { overlap: ScheduleOverlapPolicy.SKIP, catchupWindow: '1 minute', pauseOnFailure: false } as const;

export interface ScheduleDefinition {
  scheduleId: string;
  spec: ScheduleSpec;
  action: ScheduleOptionsAction;
  /** Shown in `temporal schedule describe`; kept once set. */
  note: string;
}

/**
 * Create the Schedule, or bring an existing one's spec, action and policies in line with this
 * worker's configuration. A newly created Schedule runs once at once (`triggerImmediately`); an
 * existing one is only updated, never triggered.
 */
export async function ensureSchedule(client: Client, d: ScheduleDefinition): Promise<'created' | 'updated'> {
  try {
    await client.schedule.create({
      scheduleId: d.scheduleId,
      spec: d.spec,
      action: d.action,
      policies: SCHEDULE_POLICIES,
      state: { triggerImmediately: true, note: d.note },
    });
    return 'created';
  } catch (err) {
    if (!(err instanceof ScheduleAlreadyRunning)) throw err;
  }
  await client.schedule.getHandle(d.scheduleId).update((prev) => ({
    spec: d.spec,
    action: d.action,
    policies: SCHEDULE_POLICIES,
    state: { paused: prev.state.paused, note: prev.state.note, remainingActions: prev.state.remainingActions },
  }));
  return 'updated';
}

/** Worker start-up step: its own short-lived client connection; a failure only warns. */
export async function ensureScheduleAtStart(
  config: { TEMPORAL_ADDRESS: string; TEMPORAL_NAMESPACE: string } & PayloadKeyConfig,
  what: string,
  ensure: (client: Client) => Promise<unknown>,
): Promise<void> {
  let connection: Connection | undefined;
  try {
    connection = await Connection.connect({ address: config.TEMPORAL_ADDRESS });
    // The Schedule's action holds the workflow's arguments: encrypted like every other payload.
    await ensure(new Client({ connection, namespace: config.TEMPORAL_NAMESPACE, dataConverter: await createDataConverter(config) }));
  } catch (err) {
    console.warn(`${what} schedule: could not create or update it; it will not run until a worker does`, String(err));
  } finally {
    await connection?.close().catch(() => {});
  }
}
