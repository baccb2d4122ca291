// Server-sent events for `stream: true` on POST /v1/query. Progress comes from PostgreSQL notices
// (the reserve transaction announces `executing` when it commits; RESULT_WAIT=notify), or, when the
// API does not listen or its connection dropped, from the query workflow's `progress` query
// (polled); the terminal event from the workflow's result. A client that leaves stops the
// watching, never the run. Frames go out as fast as the client takes them (sse-writer.ts), and one
// organization holds at most streamsPerOrg streams in this process.
import type { FastifyInstance, FastifyReply } from 'fastify';
import fp from 'fastify-plugin';
import { ERRORS, ServiceError, errorEnvelope, serviceErrorEnvelope } from '../../../shared/errors.ts';
import type { ApiReference, Progress, Stage, TerminalEnvelope } from '../../../shared/workflow-contract.ts';
import { deadlineEnvelope, envelopeHeaders } from '../routes/query.ts';
import type { Claim, QueryService } from '../services/query-service.ts';
import { OrgSlots } from '../services/org-slots.ts';
import { SseWriter } from './sse-writer.ts';

/** The stages a stream shows, in order. `settling` and `done` are internal: the terminal event follows them. */
export const STREAM_STAGES = ['accepted', 'preparing', 'executing', 'formatting'] as const satisfies readonly Stage[];
type StreamStage = (typeof STREAM_STAGES)[number];

const STAGE_MESSAGES: Record<StreamStage, string> = {
  accepted: 'Query accepted',
  preparing: 'Reserving credits',
  executing: 'Running the operation',
  formatting: 'Formatting the output',
};

export interface SseOptions {
  /** `: keep-alive` comment interval; the spec fixes 10 s, tests lower it (SSE_KEEPALIVE_MS). */
  keepAliveMs?: number;
  /** How often the workflow's progress query is read (only when progress notices are not heard). */
  pollMs?: number;
  /** SSE_STREAMS_PER_ORG, SSE_MAX_BUFFERED_BYTES, SSE_DRAIN_TIMEOUT_MS (shared/config.ts). */
  streamsPerOrg: number;
  maxBufferedBytes: number;
  drainTimeoutMs: number;
}

declare module 'fastify' {
  interface FastifyInstance {
    /**
     * One of the organization's stream slots, taken before its query is submitted (so a refusal
     * runs and charges nothing): 429 organization_concurrency_limit when it holds them all. The
     * release is idempotent; a stream releases it when its last byte left or its connection closed.
     */
    takeStreamSlot(orgId: string): () => void;
    streamQuery(reply: FastifyReply, sub: Claim, release: () => void): Promise<void>;
  }
}

const envMs = (name: string) => {
  const v = Number(process.env[name]);
  return Number.isFinite(v) && v > 0 ? v : undefined;
};

export default fp(
  async function ssePlugin(app: FastifyInstance, opts: SseOptions) {
    const keepAliveMs = opts.keepAliveMs ?? envMs('SSE_KEEPALIVE_MS') ?? 10_000;
    const pollMs = opts.pollMs ?? envMs('SSE_POLL_MS') ?? 150;
    const open = new Set<() => void>();
    // Open streams end when the API drains; their runs go on in Temporal.
    app.addHook('preClose', async () => {
      for (const end of open) end();
    });
    const slots = new OrgSlots(opts.streamsPerOrg);
    const writers = new Set<SseWriter>();
    app.metrics.watchStreamBuffers(() => {
      let bytes = 0;
      for (const w of writers) bytes += w.buffered;
      return bytes;
    });

    app.decorate('takeStreamSlot', function takeStreamSlot(orgId: string) {
      const release = slots.take(orgId);
      if (!release) {
        throw new ServiceError('organization_concurrency_limit', `The organization has ${opts.streamsPerOrg} streams open on this server; open this one when one of them has ended`, {
          headers: { 'retry-after': '1' },
          details: { streams_open: opts.streamsPerOrg },
        });
      }
      return release;
    });

    app.decorate('streamQuery', async function streamQuery(reply: FastifyReply, sub: Claim, release: () => void) {
      const svc: QueryService = app.queries;
      const res = reply.raw;
      reply.hijack();
      const headers: Record<string, string> =
        sub.kind === 'replay' ? envelopeHeaders(sub, sub.envelope, true) : streamHeaders(sub);
      res.writeHead(200, {
        ...headers,
        'content-type': 'text/event-stream; charset=utf-8',
        // no-store like the JSON answer (docs/contract-decisions.md): the result is the caller's
        // alone (a connected account's too), and no-cache would still let a cache keep it.
        'cache-control': 'no-store, no-transform',
        // No `Connection: keep-alive` of our own: Node then keeps a set one even when the client
        // sent `Connection: close`, holding its ended connection idle for keepAliveTimeout (72 s).
        'x-accel-buffering': 'no',
      });
      res.flushHeaders();

      const writer = new SseWriter(res, {
        maxBufferedBytes: opts.maxBufferedBytes,
        drainTimeoutMs: opts.drainTimeoutMs,
        onCoalesced: () => app.metrics.sseCoalesced.inc(),
        onCut: () => app.metrics.sseCut.inc(),
      });
      let closed = false;
      const stop = () => {
        if (closed) return;
        closed = true;
        gone.abort();
        wake?.();
      };
      const endNow = () => {
        stop();
        writer.close();
      };
      // The stream is open (gauge, slot, shutdown) until its last byte left or its connection closed.
      writers.add(writer);
      open.add(endNow);
      app.metrics.openStreams.inc();
      // Counted once: delivered when the terminal event's last byte left for the caller; a stream
      // that closed before (the caller left, or took nothing while it held too much) counts as closed.
      let terminal: TerminalEnvelope | undefined;
      void writer.done.then((delivery) => {
        writers.delete(writer);
        open.delete(endNow);
        app.metrics.openStreams.dec();
        release();
        stop();
        if (delivery === 'delivered' && terminal) app.metrics.recordQuery('sse', terminal, sub.kind === 'replay');
        else app.metrics.recordClosed('sse');
      });
      const sendTerminal = (env: TerminalEnvelope) => {
        if (terminal) return;
        terminal = env;
        void writer.sendTerminal(env.status < 400 && env.body.success === true ? 'result' : 'error', env.body);
      };

      let wake: (() => void) | undefined;
      // The wait for the terminal envelope ends with the stream (its long-poll and subscription too).
      const gone = new AbortController();

      if (sub.kind === 'replay') {
        // A finished keyed request: its retained terminal event, nothing invented before it.
        sendTerminal(sub.envelope);
        return;
      }

      const requestId = sub.request.id;
      const fallbackRef: ApiReference = {
        api: sub.op.handle,
        name: sub.op.apiName,
        logo_url: sub.op.logoSha256 ? `${app.baseUrl()}/v1/icons/${sub.op.logoSha256}` : null,
        category: sub.op.category,
      };
      let shown = -1; // index into STREAM_STAGES of the last stage sent
      let lastSeq = -1;
      let lastRef: ApiReference | undefined;
      const showUpTo = (index: number, current?: Progress) => {
        // Stages the workflow passed between two polls are still shown, in order.
        for (let i = shown + 1; i <= index; i++) {
          const stage = STREAM_STAGES[i]!;
          const live = current && current.stage === stage ? current : undefined;
          const event: Record<string, unknown> = { request_id: requestId, stage, message: live?.message ?? STAGE_MESSAGES[stage] };
          if (stage === 'executing' || stage === 'formatting') event.api_reference = live?.api_reference ?? lastRef ?? fallbackRef;
          writer.sendProgress(event);
        }
        if (index > shown) shown = index;
      };
      const onProgress = (p: Progress) => {
        if (p.api_reference) lastRef = p.api_reference;
        if (p.seq === lastSeq) return;
        lastSeq = p.seq;
        const index = (STREAM_STAGES as readonly string[]).indexOf(p.stage);
        if (index >= 0) showUpTo(index, p);
      };

      let unwatch: (() => void) | undefined;
      res.on('error', stop);
      // (A caller who left while the query was submitted closed the socket before the writer
      // listened: its `done` says so at once, which stops the wait, its long-poll and subscription.)
      const keepAlive = setInterval(() => writer.keepAlive(), keepAliveMs);

      // The request is claimed (admitted, counted, its key held), and every query workflow begins
      // at `accepted`: say so now, then start the workflow. A start that fails ends the stream
      // with the error a JSON answer would have been (engine_unavailable, the claim interrupted).
      showUpTo(0);
      try {
        await sub.start();
      } catch (err) {
        if (!(err instanceof ServiceError)) reply.log.error({ err, request_id: requestId }, 'workflow start failed');
        clearInterval(keepAlive);
        sendTerminal(startFailure(err, requestId, app.baseUrl()));
        return;
      }
      try {
        // The terminal envelope, raced with polling; the client may leave meanwhile.
        let outcome: TerminalEnvelope | undefined;
        const result = svc
          .awaitResult(sub.workflowId, requestId, svc.remainingMs(sub.request.created_at) + 5_000, sub.request.created_at, gone.signal)
          .then((env) => env ?? deadlineEnvelope(requestId, app.baseUrl(), svc.deadlineSeconds))
          // Temporal unreachable while waiting: the run may still finish; its request status will say.
          .catch(() => engineUnavailable(requestId, app.baseUrl()))
          .then((env) => {
            outcome = env;
            wake?.();
            return env;
          });
        // Notices first: each progress query is a workflow task on the worker, every pollMs per stream.
        let unsure = false;
        unwatch = svc.watchProgress(requestId, (h) => {
          if (h === 'unsure') {
            unsure = true;
            wake?.();
            return;
          }
          const index = (STREAM_STAGES as readonly string[]).indexOf(h);
          showUpTo(index, { seq: 0, stage: h, message: `Running ${sub.op.handle} ${sub.op.operation}`, api_reference: fallbackRef });
        });
        while (!closed && outcome === undefined && unwatch && !unsure) {
          await new Promise<void>((resolve) => {
            wake = resolve;
          });
          wake = undefined;
        }
        while (!closed && outcome === undefined) {
          // A query can be slow (it waits for the workflow's current task, or replays a closed
          // workflow): the terminal envelope never waits for it.
          const p = await Promise.race([svc.progress(sub.workflowId), result.then(() => null)]);
          if (p) {
            onProgress(p);
            // The run's own answer, checked against the request row like the awaited one.
            if (p.terminal && outcome === undefined) {
              const checked = await svc.confirmed(requestId, p.terminal).catch(() => engineUnavailable(requestId, app.baseUrl()));
              if (outcome === undefined) outcome = checked;
            }
          }
          if (outcome !== undefined || closed) break;
          await new Promise<void>((resolve) => {
            const t = setTimeout(resolve, pollMs);
            wake = () => {
              clearTimeout(t);
              resolve();
            };
          });
          wake = undefined;
        }
        if (closed) return;
        const env = outcome ?? (await result);
        showUpTo(lastStageReached(env, shown));
        sendTerminal(env);
      } finally {
        // Answered from a progress query, or left: the wait still running is not wanted.
        gone.abort();
        unwatch?.();
        clearInterval(keepAlive);
        // Ended without a terminal event (an unexpected failure): the caller is not left waiting.
        if (!terminal) writer.close();
      }
    });
  },
  { name: 'sse', dependencies: ['errors', 'metrics'] },
);

function engineUnavailable(requestId: string, baseUrl: string): TerminalEnvelope {
  const body = errorEnvelope('engine_unavailable', {
    requestId,
    baseUrl,
    message: 'The run cannot be followed right now; it may still finish. Check GET /v1/query/requests/{request_id} before retrying',
  });
  return { status: ERRORS.engine_unavailable.status, body };
}

/** A failed start as the terminal event: the ServiceError's envelope, or internal_error. */
function startFailure(err: unknown, requestId: string, baseUrl: string): TerminalEnvelope {
  if (err instanceof ServiceError) return { status: ERRORS[err.code].status, body: serviceErrorEnvelope(err, { requestId, baseUrl }) };
  return { status: ERRORS.internal_error.status, body: errorEnvelope('internal_error', { requestId, baseUrl }) };
}

/** Headers of a stream whose outcome is not known yet: identity and rate, no billing figures. */
function streamHeaders(sub: Exclude<Claim, { kind: 'replay' }>): Record<string, string> {
  const h = envelopeHeaders(sub, { status: 200, body: {} }, false);
  delete h['x-svc-billing-status'];
  delete h['x-svc-cost-credits'];
  return h;
}

/**
 * The last stage a finished run must have passed, read from its envelope: a success passed all of
 * them; a failure after the reservation was given back passed `executing`; one that never reserved
 * stopped at `preparing` (too few credits) or before it (deadline). Never earlier than what was shown.
 */
function lastStageReached(env: TerminalEnvelope, shown: number): number {
  const at = (s: StreamStage) => STREAM_STAGES.indexOf(s);
  if (env.status < 400 && env.body.success === true) return at('formatting');
  const error = (env.body as { error?: { code?: string; receipt?: { billing?: { status?: string } } } }).error;
  const billing = error?.receipt?.billing?.status;
  let reached = at('accepted');
  if (billing === 'released' || billing === 'settled' || billing === 'pending') reached = at('executing');
  else if (error?.code === 'insufficient_credits') reached = at('preparing');
  return Math.max(reached, shown);
}
