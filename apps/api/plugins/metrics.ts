// Prometheus metrics of one API process, on a Registry of its own (never prom-client's global one:
// two apps in one process, as in tests, must not share or double-register collectors).
// Labels are bounded sets only — route patterns, methods, status codes, catalog error codes —
// never a raw URL, an organization, a key or a request id.
import type { FastifyInstance, FastifyRequest } from 'fastify';
import fp from 'fastify-plugin';
import { Counter, Gauge, Histogram, Registry, collectDefaultMetrics } from 'prom-client';
import { ERRORS } from '../../../shared/errors.ts';
import type { Db } from '../../../shared/db/pool.ts';
import { singleFlight } from '../../../shared/single-flight.ts';
import type { CredentialGuard } from '../services/credential-guard.ts';
import type { KeylessGate } from '../services/keyless-gate.ts';
import type { StalledConnections } from './stalled-connections.ts';

/** 1 ms to the 170 s query deadline (and a little beyond it, for settlement). */
export const LATENCY_BUCKETS_SECONDS = [0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 180];

const METHODS = new Set(['GET', 'HEAD', 'POST', 'PUT', 'PATCH', 'DELETE', 'OPTIONS']);

/** How a query's answer reached its caller: a JSON body, or the terminal event of a stream. */
export type QueryTransport = 'json' | 'sse' | 'mcp';

type Envelope = { status: number; body: unknown };
type Billing = { status?: string; reserved_credits?: number; charged_credits?: number | null };

export class ApiMetrics {
  readonly registry = new Registry();
  private readonly http: Histogram<'route' | 'method' | 'status'>;
  private readonly queries: Counter<'transport' | 'outcome' | 'code' | 'replayed'>;
  private readonly queryCredits: Counter<'event'>;
  readonly openStreams: Gauge;
  readonly openMcpExchanges: Gauge;
  readonly sseCoalesced: Counter;
  readonly sseCut: Counter;

  constructor(db: Db) {
    const registers = [this.registry];
    collectDefaultMetrics({ register: this.registry, prefix: 'wqs_' });
    this.http = new Histogram({
      name: 'wqs_http_request_duration_seconds',
      help: 'HTTP requests by route pattern, method and status, with their duration (streams: until the stream ends)',
      labelNames: ['route', 'method', 'status'],
      buckets: LATENCY_BUCKETS_SECONDS,
      registers,
    });
    this.queries = new Counter({
      name: 'wqs_queries_total',
      help: 'POST /v1/query answers by outcome (success, error, or closed: the caller left before the answer, a stream before its terminal event) and error code; replayed="true" for retained results given again',
      labelNames: ['transport', 'outcome', 'code', 'replayed'],
      registers,
    });
    this.queryCredits = new Counter({
      name: 'wqs_query_credits_total',
      help: 'Credits in the receipts of first deliveries (not replays) by this process: reserved, settled (charged) and released',
      labelNames: ['event'],
      registers,
    });
    this.openStreams = new Gauge({ name: 'wqs_sse_streams_open', help: 'Server-sent event streams of POST /v1/query open now', registers });
    this.openMcpExchanges = new Gauge({ name: 'wqs_mcp_exchanges_open', help: 'MCP (Streamable HTTP) exchanges open now', registers });
    this.sseCoalesced = new Counter({
      name: 'wqs_sse_events_coalesced_total',
      help: 'Progress events of streams never written because a newer one replaced them while the client was not taking bytes (plugins/sse-writer.ts)',
      registers,
    });
    this.sseCut = new Counter({
      name: 'wqs_sse_streams_cut_total',
      help: 'Streams closed because they held more than SSE_MAX_BUFFERED_BYTES for the client and got no drain for SSE_DRAIN_TIMEOUT_MS',
      registers,
    });
    // The ledger as PostgreSQL holds it, summed over every organization, read at each scrape: one
    // aggregate over credit_balances (a row per organization, never the growing ledger). Every API
    // process reports the same fleet-wide figures: aggregate with max(), not sum().
    // /metrics needs no key, and the aggregate scans a row per organization: a scrape that arrives
    // while a read is in flight shares it (figures at most one read old; one after another, each
    // scrape reads afresh), so anonymous callers cannot stack up whole-table scans and take the pool
    // every organization's requests use (40 scrapes of a slow read held all 20 connections). One read serves both gauges of a scrape, so the success flag is this scrape's:
    // read apart, it was collected before the figures and showed the previous scrape's outcome.
    type Totals = Record<'granted' | 'available' | 'reserved' | 'charged', string>;
    const totals = singleFlight(() =>
      db
        .query<Totals>(
          `SELECT coalesce(sum(granted), 0)::text AS granted, coalesce(sum(available), 0)::text AS available,
                  coalesce(sum(reserved), 0)::text AS reserved, coalesce(sum(charged), 0)::text AS charged
             FROM credit_balances`,
        )
        .then(
          (r): Totals | null => r.rows[0]!,
          () => null,
        ),
    );
    new Gauge({
      name: 'wqs_credits_scrape_success',
      help: '1 when the credit figures below were read at this scrape, 0 when PostgreSQL did not answer',
      registers,
      async collect() {
        this.set((await totals()) ? 1 : 0);
      },
    });
    new Gauge({
      name: 'wqs_credits',
      help: 'Credits of all organizations by state, from credit_balances: granted = available + reserved (held by running queries) + charged (settled)',
      labelNames: ['state'],
      registers,
      async collect() {
        const row = await totals();
        if (!row) return void this.reset();
        for (const state of ['granted', 'available', 'reserved', 'charged'] as const) this.set({ state }, Number(row[state]));
      },
    });
  }

  /** Bytes the open streams hold for their clients (plugins/sse.ts), read at each scrape. */
  watchStreamBuffers(bytes: () => number) {
    new Gauge({
      name: 'wqs_sse_buffered_bytes',
      help: 'Bytes held in this process for open server-sent event streams: events not yet handed to their sockets and what the sockets still buffer',
      registers: [this.registry],
      collect() {
        this.set(bytes());
      },
    });
  }

  /** Connections closed because their client stopped reading (plugins/stalled-connections.ts). */
  watchStalledConnections(stalled: StalledConnections) {
    new Counter({
      name: 'wqs_stalled_connections_closed_total',
      help: 'Connections closed because their client took no byte of an answer for RESPONSE_STALL_TIMEOUT_MS while bytes waited to be written',
      registers: [this.registry],
      collect() {
        this.reset();
        this.inc(stalled.closed);
      },
    });
  }

  /** The credential guard's bounds (plugins/auth.ts): what they refused, and what they hold now. */
  watchCredentials(guard: CredentialGuard) {
    const registers = [this.registry];
    new Counter({
      name: 'wqs_credential_refusals_total',
      help: 'Credential checks refused before PostgreSQL answered them: authentication_rate_limited (too many failed checks from one address) or api_key_verification_unavailable (no lookup slot in time)',
      labelNames: ['code'],
      registers,
      collect() {
        // The guard counts; each scrape copies its totals (reset, then the totals: never decreasing).
        this.reset();
        for (const [code, n] of Object.entries(guard.refusals)) this.inc({ code }, n);
      },
    });
    new Gauge({
      name: 'wqs_credential_lookups',
      help: 'Lookups of credentials this process has not yet seen pass: in_flight (holding one of AUTH_LOOKUPS_IN_FLIGHT) and waiting (for one)',
      labelNames: ['state'],
      registers,
      collect() {
        const { inFlight, waiting } = guard.lookups;
        this.set({ state: 'in_flight' }, inFlight);
        this.set({ state: 'waiting' }, waiting);
      },
    });
    new Gauge({
      name: 'wqs_credential_failure_addresses',
      help: 'Client addresses (IPv6: /64s) whose failed-check bucket is not full, kept in memory (at most AUTH_FAILURE_ADDRESSES_MAX)',
      registers,
      collect() {
        this.set(guard.addresses);
      },
    });
  }

  /** The keyless reads' bounds (services/keyless-gate.ts): what they refused, and what they hold now. */
  watchKeylessReads(gate: KeylessGate) {
    const registers = [this.registry];
    new Counter({
      name: 'wqs_keyless_read_refusals_total',
      help: 'Keyless catalog and icon reads refused with 503 catalog_unavailable after waiting KEYLESS_READ_WAIT_MS for their turn',
      registers,
      collect() {
        this.reset();
        this.inc(gate.refused);
      },
    });
    new Gauge({
      name: 'wqs_keyless_reads',
      help: "Keyless catalog and icon reads: in_flight (holding one of KEYLESS_READS_IN_FLIGHT) and waiting (for their address's turn or the process's)",
      labelNames: ['state'],
      registers,
      collect() {
        const { inFlight, waiting } = gate.reads;
        this.set({ state: 'in_flight' }, inFlight);
        this.set({ state: 'waiting' }, waiting);
      },
    });
  }

  observeHttp(request: FastifyRequest, status: number, seconds: number) {
    const route = request.routeOptions.url ?? 'unmatched';
    const method = METHODS.has(request.method) ? request.method : 'OTHER';
    this.http.observe({ route, method, status: String(status) }, seconds);
  }

  /** One query answer, counted once, from the envelope the caller was given. */
  recordQuery(transport: QueryTransport, env: Envelope, replayed: boolean) {
    const body = env.body as { success?: boolean; data?: { receipt?: { billing?: Billing } }; error?: { code?: string; receipt?: { billing?: Billing } } };
    const success = env.status < 400 && body?.success === true;
    const raw = body?.error?.code;
    const code = success ? 'none' : raw && Object.hasOwn(ERRORS, raw) ? raw : 'unknown';
    this.queries.inc({ transport, outcome: success ? 'success' : 'error', code, replayed: String(replayed) });
    if (replayed) return; // its credits were counted when it was first delivered
    const billing = body?.data?.receipt?.billing ?? body?.error?.receipt?.billing;
    const reserved = billing?.reserved_credits ?? 0;
    if (!billing || reserved <= 0) return;
    this.queryCredits.inc({ event: 'reserved' }, reserved);
    if (billing.status === 'settled') {
      const charged = billing.charged_credits ?? 0;
      if (charged > 0) this.queryCredits.inc({ event: 'settled' }, charged);
      if (reserved > charged) this.queryCredits.inc({ event: 'released' }, reserved - charged);
    } else if (billing.status === 'released') {
      this.queryCredits.inc({ event: 'released' }, reserved);
    }
  }

  /** A query whose caller left before its answer (a stream: before its terminal event, or the API drained). */
  recordClosed(transport: QueryTransport) {
    this.queries.inc({ transport, outcome: 'closed', code: 'none', replayed: 'false' });
  }
}

declare module 'fastify' {
  interface FastifyInstance {
    metrics: ApiMetrics;
  }
}

export default fp(
  async function metricsPlugin(app: FastifyInstance) {
    const metrics = new ApiMetrics(app.db);
    app.decorate('metrics', metrics);
    // Hijacked replies (streams, MCP) are observed too: Fastify runs onResponse when the raw response finishes.
    app.addHook('onResponse', async (request, reply) => {
      metrics.observeHttp(request, reply.statusCode, reply.elapsedTime / 1000);
    });
  },
  { name: 'metrics' },
);
