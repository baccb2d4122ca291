// Server-sent events for `stream: true` on POST /v1/query. Progress comes from PostgreSQL notices
// (the reserve transaction announces `executing` when it commits; RESULT_WAIT=notify), or, when the
// API does not listen or its connection dropped, from the query workflow's `progress` query
// (polled); the terminal event from the workflow's result. A client that leaves stops the
// watching, never the run.
import type { FastifyInstance, FastifyReply } from 'fastify';
import fp from 'fastify-plugin';
import { ERRORS, errorEnvelope } from '../../../shared/errors.ts';
import type { ApiReference, Progress, Stage, TerminalEnvelope } from '../../../shared/workflow-contract.ts';
import { deadlineEnvelope, envelopeHeaders } from '../routes/query.ts';
import type { QueryService, Submission } from '../services/query-service.ts';

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
}

declare module 'fastify' {
  interface FastifyInstance {
    streamQuery(reply: FastifyReply, sub: Submission): Promise<void>;
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

    app.decorate('streamQuery', async function streamQuery(reply: FastifyReply, sub: Submission) {
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
        connection: 'keep-alive',
        'x-accel-buffering': 'no',
      });
      res.flushHeaders();

      let seq = 0;
      let closed = false;
      const send = (event: 'progress' | 'result' | 'error', data: unknown) => {
        if (closed) return;
        seq += 1;
        res.write(`id: ${seq}\nevent: ${event}\ndata: ${JSON.stringify(data)}\n\n`);
      };
      // Counted once, when the caller is given its terminal event (a stream left before it counts as closed).
      let delivered = false;
      const sendTerminal = (env: TerminalEnvelope) => {
        if (!closed && !delivered) {
          delivered = true;
          app.metrics.recordQuery('sse', env, sub.kind === 'replay');
        }
        send(env.status < 400 && env.body.success === true ? 'result' : 'error', env.body);
      };

      if (sub.kind === 'replay') {
        // A finished keyed request: its retained terminal event, nothing invented before it.
        sendTerminal(sub.envelope);
        res.end();
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
          send('progress', event);
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

      let wake: (() => void) | undefined;
      let unwatch: (() => void) | undefined;
      // The wait for the terminal envelope ends with the stream (its long-poll and subscription too).
      const gone = new AbortController();
      const stop = () => {
        if (closed) return;
        closed = true;
        gone.abort();
        wake?.();
      };
      const endNow = () => {
        stop();
        res.end();
      };
      open.add(endNow);
      app.metrics.openStreams.inc();
      res.on('close', stop);
      res.on('error', stop);
      // A caller who left while the query was submitted closed the socket before these listeners
      // existed: without this the stream would hold its long-poll and subscription to the run's end.
      if (res.destroyed || res.socket?.destroyed !== false) stop();
      const keepAlive = setInterval(() => {
        if (!closed) res.write(': keep-alive\n\n');
      }, keepAliveMs);

      // Temporal has accepted the workflow's start, and every query workflow begins at `accepted`:
      // say so now rather than after the first query answers (which waits for its first task).
      showUpTo(0);
      try {
        // The terminal envelope, raced with polling; the client may leave meanwhile.
        let terminal: TerminalEnvelope | null | undefined;
        const result = svc
          .awaitResult(sub.workflowId, requestId, svc.remainingMs(sub.request.created_at) + 5_000, sub.request.created_at, gone.signal)
          .then((env) => env ?? deadlineEnvelope(requestId, app.baseUrl(), svc.deadlineSeconds))
          // Temporal unreachable while waiting: the run may still finish; its request status will say.
          .catch(() => engineUnavailable(requestId, app.baseUrl()))
          .then((env) => {
            terminal = env;
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
        while (!closed && terminal === undefined && unwatch && !unsure) {
          await new Promise<void>((resolve) => {
            wake = resolve;
          });
          wake = undefined;
        }
        while (!closed && terminal === undefined) {
          // A query can be slow (it waits for the workflow's current task, or replays a closed
          // workflow): the terminal envelope never waits for it.
          const p = await Promise.race([svc.progress(sub.workflowId), result.then(() => null)]);
          if (p) {
            onProgress(p);
            // The run's own answer, checked against the request row like the awaited one.
            if (p.terminal && terminal === undefined) {
              const checked = await svc.confirmed(requestId, p.terminal).catch(() => engineUnavailable(requestId, app.baseUrl()));
              if (terminal === undefined) terminal = checked;
            }
          }
          if (terminal !== undefined || closed) break;
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
        const env = terminal ?? (await result);
        showUpTo(lastStageReached(env, shown));
        sendTerminal(env);
      } finally {
        // Answered from a progress query, or left: the wait still running is not wanted.
        gone.abort();
        unwatch?.();
        clearInterval(keepAlive);
        open.delete(endNow);
        app.metrics.openStreams.dec();
        if (closed && !delivered) app.metrics.recordClosed('sse');
        if (!closed) {
          closed = true;
          res.end();
        }
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

/** Headers of a stream whose outcome is not known yet: identity and rate, no billing figures. */
function streamHeaders(sub: Submission): Record<string, string> {
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
