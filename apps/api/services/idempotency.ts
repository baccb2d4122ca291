// What a keyed request meets when its organization already holds the key. Each branch names the
// row of the spec's "Idempotent request lifecycle" table it implements.
import { ServiceError } from '../../../shared/errors.ts';
import { findById, releaseKey, transition, type KeyedRow, type RequestRow } from '../../../shared/db/requests.ts';
import type { Db } from '../../../shared/db/pool.ts';
import type { TerminalEnvelope } from '../../../shared/workflow-contract.ts';
import type { RunWatch } from './run-watch.ts';

export type Existing =
  /** "identical retry after completion": the retained envelope. */
  | { kind: 'replay'; request: RequestRow; envelope: TerminalEnvelope }
  /** The key is free (its retained result outlived its retention, or a billing_unavailable envelope freed it): claim it afresh ("first request with a key"). */
  | { kind: 'expired' };

const envelopeOf = (r: RequestRow & { result: NonNullable<RequestRow['result']> }): TerminalEnvelope => ({ status: r.response_status ?? 200, body: r.result });
const hasResult = (r: RequestRow): r is RequestRow & { result: NonNullable<RequestRow['result']> } => r.result !== null;

export class Idempotency {
  constructor(private readonly deps: { db: Db; watch: RunWatch; staleClaimMs: number }) {}

  /** Throws request_in_progress, idempotency_key_conflict or request_interrupted; otherwise says what to do. */
  async existing(row: KeyedRow, fingerprint: string): Promise<Existing> {
    const { db, watch } = this.deps;
    // findByKey read the result only for a replay: `has_result` says whether one is retained.
    if (row.has_result && row.result_expires_at && row.result_expires_at.getTime() <= Date.now()) {
      // Past retention the key starts over as a new request (new request id, so a new workflow id).
      await releaseKey(db, row.id);
      return { kind: 'expired' };
    }
    // "same key, different body"
    if (row.fingerprint !== fingerprint) {
      throw new ServiceError('idempotency_key_conflict', 'This Idempotency-Key was already used with a different request body', {
        param: 'Idempotency-Key',
      });
    }
    // "identical retry after completion"
    if (hasResult(row)) return { kind: 'replay', request: row, envelope: envelopeOf(row) };
    // "original stopped unfinished (stale claim)", already recorded
    if (row.status === 'interrupted') throw interrupted(row);

    // "retry while original is running": ask about exactly this claim's run.
    const state = await watch.state(row.workflow_id);
    if (state === 'running') throw inProgress(row);
    // Closed or missing: the envelope may have landed between our reads.
    const fresh = await findById(db, row.id);
    if (fresh && hasResult(fresh)) return landed(fresh);
    // Missing and young: another API is still starting it.
    if (state === 'missing' && Date.now() - row.created_at.getTime() < this.deps.staleClaimMs) throw inProgress(row);

    // "original stopped unfinished (stale claim)": never dispatched again.
    if (state === 'closed') {
      await watch.interruptClosed(row);
    } else {
      // Never started (as far as Temporal knows): interrupted only while still `reserving`, so a
      // start arriving late refuses to reserve.
      const m = await transition(db, row.id, 'interrupted', { error_code: 'request_interrupted' }, ['reserving']);
      if (!m.moved && m.current && m.current.status !== 'interrupted' && !hasResult(m.current)) {
        // It reserved after all: a run exists (or existed and is gone).
        if ((await watch.state(row.workflow_id)) === 'running') throw inProgress(row);
        await watch.interruptClosed(m.current);
      }
    }
    const last = await findById(db, row.id);
    if (last && hasResult(last)) return landed(last);
    // Told only when the row says so (the conditional UPDATE above, or another caller's, moved it):
    // an interrupted row is never finalized, so its key is never freed and never runs again.
    if (last?.status === 'interrupted') throw interrupted(row);
    throw inProgress(row);
  }
}

/**
 * An envelope that landed while we looked. An envelope that freed its key with it
 * (billing_unavailable) is not the key's retained answer: the key is free, so claim it afresh, as
 * a retry arriving a moment later would.
 */
function landed(r: RequestRow & { result: NonNullable<RequestRow['result']> }): Existing {
  if (r.idempotency_key_hash === null) return { kind: 'expired' };
  return { kind: 'replay', request: r, envelope: envelopeOf(r) };
}

export function inProgress(r: Pick<RequestRow, 'id'>): ServiceError {
  return new ServiceError('request_in_progress', 'The original request is still running; retry with the same key after Retry-After', {
    headers: { 'retry-after': '2', location: `/v1/query/requests/${r.id}` },
    requestId: r.id,
  });
}

export function interrupted(r: Pick<RequestRow, 'id'>): ServiceError {
  return new ServiceError('request_interrupted', 'The original request stopped unfinished and will not run again under this key; use a new key', {
    requestId: r.id,
    headers: { location: `/v1/query/requests/${r.id}` },
  });
}
