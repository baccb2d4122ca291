// How the API hears that a request got its terminal envelope without long-polling Temporal's
// history: `finalize` (shared/db/requests.ts) runs pg_notify(REQUEST_FINAL_CHANNEL, id) in the
// statement that writes the envelope, so the notification is sent exactly when that write commits.
// One dedicated LISTEN connection per API process serves every waiter. A notification can be
// missed (the connection was down, or began listening after the write), so an answer here is a
// hint to read the row, and every doubt is reported as 'unsure' for the caller's fallback.
// The same connection hears progress: the reserve transaction (shared/db/credits.ts) notifies
// REQUEST_PROGRESS_CHANNEL with "<request id> executing" when it commits, so SSE streams show
// progress without querying the workflow.
import pg from 'pg';
import { REQUEST_FINAL_CHANNEL } from '../../../shared/db/requests.ts';
import { REQUEST_PROGRESS_CHANNEL, type ProgressNotice } from '../../../shared/db/credits.ts';

/** What a progress watcher hears: a stage the run reached, or that notices may have been lost. */
export type ProgressHeard = ProgressNotice | 'unsure';

export type Heard = 'notified' | 'unsure' | 'timeout';

export interface Subscription {
  heard: Promise<Heard>;
  /** Every notification since the claim reaches `heard`; when false, read the row once as well. */
  trusted: boolean;
  cancel(): void;
}

/** Notifications are kept this long, so a waiter registering just after its own arrived still hears it. */
const RECENT_MS = 60_000;
const RECENT_MAX = 20_000;
/** Clocks of the API and PostgreSQL may differ a little: a listener younger than this is not trusted. */
const CLOCK_MARGIN_MS = 1_000;

export class ResultListener {
  private client: pg.Client | undefined;
  private connecting: Promise<void> | undefined;
  /** When the current LISTEN took effect (epoch ms); undefined while not listening. */
  private listeningSince: number | undefined;
  private readonly waiters = new Map<string, Set<(h: Heard) => void>>();
  private readonly recent = new Map<string, number>();
  /** Progress watchers by request id, and the last stage heard (kept like `recent`). */
  private readonly progressWatchers = new Map<string, Set<(h: ProgressHeard) => void>>();
  private readonly recentProgress = new Map<string, { at: number; stage: ProgressNotice }>();
  private retryTimer: NodeJS.Timeout | undefined;
  private retryDelayMs = 100;
  private closed = false;

  constructor(private readonly databaseUrl: string) {}

  /** Listen now (idempotent); a failure leaves a retry scheduled and waiters fall back. */
  start(): Promise<void> {
    if (this.closed) return Promise.resolve();
    if (this.listeningSince !== undefined) return Promise.resolve();
    this.connecting ??= this.connect().finally(() => {
      this.connecting = undefined;
    });
    return this.connecting;
  }

  private async connect(): Promise<void> {
    const client = new pg.Client({ connectionString: this.databaseUrl, keepAlive: true, connectionTimeoutMillis: 5_000 });
    client.on('notification', (msg) => {
      if (msg.channel === REQUEST_FINAL_CHANNEL && msg.payload) this.heard(msg.payload);
      if (msg.channel === REQUEST_PROGRESS_CHANNEL && msg.payload) this.heardProgress(msg.payload);
    });
    const lost = () => this.lost(client);
    client.on('error', lost);
    client.on('end', lost);
    try {
      await client.connect();
      await client.query(`LISTEN ${REQUEST_FINAL_CHANNEL}; LISTEN ${REQUEST_PROGRESS_CHANNEL}`);
    } catch {
      lost();
      await client.end().catch(() => {});
      return;
    }
    if (this.closed) {
      await client.end().catch(() => {});
      return;
    }
    this.client = client;
    this.listeningSince = Date.now();
    this.retryDelayMs = 100;
  }

  /** The connection is gone: every waiter falls back now (notifications may be lost), then reconnect. */
  private lost(client: pg.Client) {
    if (this.client !== undefined && this.client !== client) return; // an earlier connection's late event
    this.client = undefined;
    this.listeningSince = undefined;
    for (const [, set] of this.waiters) for (const resolve of set) resolve('unsure');
    this.waiters.clear();
    for (const [, set] of this.progressWatchers) for (const hear of set) hear('unsure');
    if (this.closed || this.retryTimer) return;
    this.retryTimer = setTimeout(() => {
      this.retryTimer = undefined;
      void this.start();
    }, this.retryDelayMs);
    this.retryTimer.unref();
    this.retryDelayMs = Math.min(this.retryDelayMs * 2, 5_000);
  }

  private heard(requestId: string) {
    const now = Date.now();
    this.recent.set(requestId, now);
    // Insertion order is arrival order: drop the old (and the excess) from the front.
    for (const [id, at] of this.recent) {
      if (at > now - RECENT_MS && this.recent.size <= RECENT_MAX) break;
      this.recent.delete(id);
    }
    const set = this.waiters.get(requestId);
    if (!set) return;
    this.waiters.delete(requestId);
    for (const resolve of set) resolve('notified');
  }

  private heardProgress(payload: string) {
    const [requestId, stage] = payload.split(' ');
    if (!requestId || stage !== 'executing') return;
    const now = Date.now();
    this.recentProgress.set(requestId, { at: now, stage });
    for (const [id, v] of this.recentProgress) {
      if (v.at > now - RECENT_MS && this.recentProgress.size <= RECENT_MAX) break;
      this.recentProgress.delete(id);
    }
    for (const hear of this.progressWatchers.get(requestId) ?? []) hear(stage);
  }

  /**
   * Hear the stages `requestId` reaches (SSE progress without querying the workflow). Returns
   * undefined when not listening (the caller polls instead); a stage heard before this call is
   * replayed at once; 'unsure' when the connection drops (notices may be lost from then on).
   */
  watchProgress(requestId: string, hear: (h: ProgressHeard) => void): (() => void) | undefined {
    if (this.listeningSince === undefined) {
      void this.start();
      return undefined;
    }
    let set = this.progressWatchers.get(requestId);
    if (!set) this.progressWatchers.set(requestId, (set = new Set()));
    set.add(hear);
    const seen = this.recentProgress.get(requestId);
    if (seen) queueMicrotask(() => hear(seen.stage));
    return () => {
      const s = this.progressWatchers.get(requestId);
      s?.delete(hear);
      if (s?.size === 0) this.progressWatchers.delete(requestId);
    };
  }

  /**
   * Wait up to `timeoutMs` for `requestId`'s envelope to be written. `since` is when the request
   * was claimed: a notification sent before this connection listened would have been missed, so
   * `trusted` is false when the listener is younger than that (the caller reads the row once, after
   * subscribing, so nothing falls between). Not listening: 'unsure' at once. `stop` aborting ends
   * the wait like its timeout ('timeout').
   */
  subscribe(requestId: string, since: Date | undefined, timeoutMs: number, stop?: AbortSignal): Subscription {
    const listening = this.listeningSince;
    if (listening === undefined) {
      // Reconnecting (or PostgreSQL down): never hold a waiter on it; the caller falls back now.
      void this.start();
      return { heard: Promise.resolve('unsure'), trusted: false, cancel() {} };
    }
    if (this.recent.has(requestId)) return { heard: Promise.resolve('notified'), trusted: true, cancel() {} };
    const trusted = since !== undefined && listening + CLOCK_MARGIN_MS <= since.getTime();
    let done: (h: Heard) => void = () => {};
    const heard = new Promise<Heard>((resolve) => {
      let set = this.waiters.get(requestId);
      if (!set) this.waiters.set(requestId, (set = new Set()));
      const timer = setTimeout(() => done('timeout'), Math.max(0, timeoutMs));
      const onStop = () => done('timeout');
      done = (h: Heard) => {
        clearTimeout(timer);
        stop?.removeEventListener('abort', onStop);
        const s = this.waiters.get(requestId);
        s?.delete(done);
        if (s?.size === 0) this.waiters.delete(requestId);
        resolve(h);
      };
      set.add(done);
      if (stop?.aborted) done('timeout');
      else stop?.addEventListener('abort', onStop, { once: true });
    });
    return { heard, trusted, cancel: () => done('timeout') };
  }

  /** Waiting now (for tests and metrics). */
  get waiting(): number {
    let n = 0;
    for (const [, s] of this.waiters) n += s.size;
    return n;
  }

  async close(): Promise<void> {
    this.closed = true;
    clearTimeout(this.retryTimer);
    await this.connecting?.catch(() => {});
    const client = this.client;
    this.client = undefined;
    this.listeningSince = undefined;
    for (const [, set] of this.waiters) for (const resolve of set) resolve('unsure');
    this.waiters.clear();
    for (const [, set] of this.progressWatchers) for (const hear of set) hear('unsure');
    this.progressWatchers.clear();
    await client?.end().catch(() => {});
  }
}
