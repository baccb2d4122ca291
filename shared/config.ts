// One commented configuration object, read from the environment once.
// Every process (api, worker, dev launcher, admin) reads the same names.
import fs from 'node:fs';
import path from 'node:path';
import { z } from 'zod';

/**
 * Debian's Chromium binaries, best first. The headless shell (package chromium-headless-shell, the
 * old headless mode that Playwright itself runs for `headless: true`) opens a context and page for
 * about a quarter of the full browser's CPU: 53 against 215 ms measured here. The full browser
 * (package chromium) runs every recipe too.
 */
export const CHROMIUM_CANDIDATES = ['/usr/bin/chromium-headless-shell', '/usr/bin/chromium'] as const;

/** The first installed of CHROMIUM_CANDIDATES; the first when none is (launching then names it). */
export function defaultChromiumPath(): string {
  const executable = (p: string) => {
    try {
      fs.accessSync(p, fs.constants.X_OK);
      return true;
    } catch {
      return false;
    }
  };
  return CHROMIUM_CANDIDATES.find(executable) ?? CHROMIUM_CANDIDATES[0];
}

/** PostgreSQL connections of one API process (apps/api/server.ts). */
export const API_DB_POOL_SIZE = 20;

const int = (def: number) => z.coerce.number().int().positive().default(def);

const ConfigSchema = z.object({
  /** HTTP port of the API. */
  PORT: z.coerce.number().int().min(0).max(65535).default(8080),
  /** Interface the API binds to. */
  HOST: z.string().default('127.0.0.1'),
  /**
   * The reverse proxies whose X-Forwarded-For the API believes, for the client address that
   * per-address limits key on (OAuth registration and token attempts, console sign-in throttling):
   * their addresses or CIDRs, comma-separated (`10.0.0.0/8,127.0.0.1`). Unset: none, the TCP peer
   * is the client, and the header is only a caller's claim. Behind a proxy, set it: otherwise every
   * caller shares the proxy's address, and one caller's attempts use up everybody's limit. Neither
   * "trust everything" nor a hop count is offered: both let a caller who reaches the API directly
   * choose its own address.
   */
  TRUST_PROXY: z
    .string()
    .trim()
    .optional()
    .transform((v, ctx) => {
      if (v === undefined || v === '') return false as const;
      const parts = v.split(',').map((p) => p.trim());
      if (parts.every((p) => /^[0-9a-fA-F.:]+(\/\d{1,3})?$/.test(p) && /[.:]/.test(p))) return parts;
      ctx.addIssue({ code: 'custom', message: 'TRUST_PROXY lists proxy addresses or CIDRs, comma-separated' });
      return z.NEVER;
    }),
  /** Public base URL used in links (doc_url, Location, logo_url). Defaults to http://HOST:PORT. */
  PUBLIC_BASE_URL: z.string().url().optional(),
  /**
   * With an https PUBLIC_BASE_URL, every answer carries `Strict-Transport-Security: max-age=<this>`
   * (plus `; includeSubDomains` with HSTS_INCLUDE_SUBDOMAINS): browsers then use https only for this
   * host for that long, so no plain-http request (whose cookies and pages anyone on the way could
   * read or change) leaves them. One year by default; `0` tells browsers to forget an earlier policy
   * (the way back to http); `off` sends no header (a proxy in front sends its own). An empty value
   * is refused at start (it is not 0). Never sent on a plain-http base URL (the embedded default,
   * http://127.0.0.1:PORT).
   */
  HSTS_MAX_AGE_SECONDS: z
    .union([z.literal('off'), z.string().regex(/^\d+$/).transform(Number).pipe(z.number().int().min(0).max(63_072_000))], {
      error: 'whole seconds (an empty value is not 0), or off',
    })
    .default(31_536_000),
  HSTS_INCLUDE_SUBDOMAINS: z
    .enum(['true', 'false', '1', '0'])
    .default('true')
    .transform((v) => v === 'true' || v === '1'),
  /**
   * Browser origins, besides the service's own (PUBLIC_BASE_URL's), whose pages may call /mcp
   * (comma-separated, e.g. `https://agent.example.com`). A request with any other Origin header is
   * 403 (the MCP transport's rule against DNS rebinding); one without Origin (not from a browser) is
   * not affected.
   */
  MCP_ALLOWED_ORIGINS: z
    .string()
    .trim()
    .optional()
    .transform((v, ctx) => {
      if (v === undefined || v === '') return [] as string[];
      const origins: string[] = [];
      for (const part of v.split(',').map((p) => p.trim())) {
        let url: URL | undefined;
        try {
          url = new URL(part);
        } catch {
          /* refused below */
        }
        if (!url || !/^https?:$/.test(url.protocol) || url.origin !== part.replace(/\/$/, '')) {
          ctx.addIssue({ code: 'custom', message: `MCP_ALLOWED_ORIGINS lists origins such as https://agent.example.com (scheme, host and port only), got "${part}"` });
          return z.NEVER;
        }
        origins.push(url.origin);
      }
      return origins;
    }),
  /** Where embedded parts keep their data: PostgreSQL, Temporal's SQLite file, the dev key. */
  DATA_DIR: z.string().default('.data'),
  /** External PostgreSQL; when set (with TEMPORAL_ADDRESS) nothing embedded is started. */
  DATABASE_URL: z.string().optional(),
  /** External Temporal frontend, host:port. */
  TEMPORAL_ADDRESS: z.string().optional(),
  TEMPORAL_NAMESPACE: z.string().default('default'),
  TEMPORAL_TASK_QUEUE: z.string().default('wqs-queries'),
  /** Task queue of browser execute activities, so browser workers scale apart; default `<TEMPORAL_TASK_QUEUE>-browser`. */
  TEMPORAL_BROWSER_TASK_QUEUE: z.string().min(1).optional(),
  /** What a worker process polls: `all` (both queues: workflows and every activity), `http` (the main
   *  queue: workflows and HTTP activities; never launches Chromium for browser-queue work), `browser`
   *  (the browser queue only: activities, no workflows). */
  WORKER_ROLE: z.enum(['all', 'http', 'browser']).default('all'),
  /**
   * How long the API waits for a whole request (headers and body) once its first byte arrived; a
   * caller sending more slowly is answered 408 request_timeout and the connection closed, so slow
   * senders cannot hold connections open for ever. The headers alone get at most 60 s.
   */
  REQUEST_TIMEOUT_MS: z.coerce.number().int().min(1_000).max(600_000).default(120_000),
  /**
   * A connection whose client has not taken one byte of an answer for this long, with bytes still
   * waiting to be written, is closed (apps/api/plugins/stalled-connections.ts): what it waits for
   * is held in the API's memory until then.
   */
  RESPONSE_STALL_TIMEOUT_MS: z.coerce.number().int().min(1_000).max(3_600_000).default(30_000),
  /** Overall deadline of one query (the spec fixes 170 s; tests may lower it). */
  QUERY_DEADLINE_MS: int(170_000),
  /** A keyed claim with no Temporal workflow after this long is stale (request_interrupted). */
  STALE_CLAIM_MS: int(30_000),
  /** Retention of terminal envelopes of keyed requests. */
  RESULT_RETENTION_HOURS: int(24),
  /** Default plan limits (until plans are sold): requests per minute, running slots, unresolved keyed requests. */
  PLAN_REQUESTS_PER_MINUTE: int(600),
  PLAN_CONCURRENCY: int(64),
  PLAN_UNRESOLVED_KEYED: int(200),
  /**
   * Uploads (POST /v1/files) kept at once per organization: the stored bytes and the number of
   * unexpired files. Files live in the PostgreSQL every organization shares, so without a bound one
   * organization could fill its disk; beyond either, an upload is 429 file_storage_limit (files free
   * their room when they expire, 30 days after upload).
   */
  FILES_MAX_BYTES_PER_ORG: int(1024 * 1024 * 1024),
  FILES_MAX_PER_ORG: int(1_000),
  /**
   * Uploads of one organization being received at once by one API process (each is held in memory,
   * up to 10 MB, until it is stored); beyond, 429 organization_concurrency_limit before the body is read.
   */
  FILES_UPLOADS_PER_ORG: int(4),
  /**
   * Bytes of uploads being received and stored at once by one API process, all organizations
   * together: FILES_UPLOADS_PER_ORG bounds one organization, not how many upload at once (100
   * organizations could hold 4 GB). An upload counts its Content-Length, or 10 MB when it has none
   * (chunked), from before its body is read until it is answered or its connection goes; one that
   * would pass the bound is 503 admission_unavailable with Retry-After, its body unread. 64 MiB: an
   * upload briefly takes about twice its size (its bytes, and the copy sent to PostgreSQL), so at
   * most ~128 MiB of the API's 512 MiB (deploy/helm) goes to uploads. At least 10 MiB, the largest
   * upload, so that every upload can be taken when the process has none in flight.
   */
  FILES_UPLOADS_IN_FLIGHT_MAX_BYTES: z.coerce
    .number()
    .int()
    .min(10 * 1024 * 1024)
    .default(64 * 1024 * 1024),
  /**
   * One organization's share of FILES_UPLOADS_IN_FLIGHT_MAX_BYTES, counted the same way (an
   * upload without Content-Length counts 10 MB): past it, 429 organization_concurrency_limit before
   * the body is read. Without a share, two organizations (sign-up is open) holding four slow
   * uploads each took the whole process's bound, and every other organization's upload was 503.
   * Unset: a quarter of FILES_UPLOADS_IN_FLIGHT_MAX_BYTES, at least 10 MiB (16 MiB by default).
   * At least 10 MiB, the largest upload; at most FILES_UPLOADS_IN_FLIGHT_MAX_BYTES.
   */
  FILES_UPLOADS_IN_FLIGHT_MAX_BYTES_PER_ORG: z.coerce
    .number()
    .int()
    .min(10 * 1024 * 1024)
    .optional(),
  /**
   * An upload none of whose body bytes arrived for this long (from when its body is awaited, or
   * since its last bytes) is answered 408 request_timeout and its connection closed, so that what
   * it holds of the in-flight bounds is freed: a sender that declared 10 MB and sent nothing held
   * it for REQUEST_TIMEOUT_MS (120 s).
   */
  FILES_UPLOAD_IDLE_TIMEOUT_MS: z.coerce.number().int().min(1_000).max(600_000).default(10_000),
  /**
   * MCP `svc_get_run` calls of one organization waiting on runs at once in one API process. Each
   * waits up to 170 s holding a connection, a result subscription and (after RESULT_NOTIFY_FALLBACK_MS)
   * a Temporal history long-poll, and the same run can be waited on any number of times; beyond,
   * the call fails at once with organization_concurrency_limit (retry after 1 s).
   */
  MCP_GET_RUN_WAITS_PER_ORG: int(64),
  /**
   * Server-sent event streams (POST /v1/query with `stream: true`) of one organization open at once
   * in one API process, each counted from its admission until its last byte left the process or
   * its connection closed. Beyond, 429 organization_concurrency_limit (Retry-After 1) before the
   * query runs or is charged. Every stream a client does not read holds its events in the API's
   * memory (a result up to EXECUTE_MAX_OUTPUT_BYTES): this bounds one organization's share.
   */
  SSE_STREAMS_PER_ORG: int(64),
  /**
   * Bytes one stream may hold unsent (events not yet handed to the socket plus the socket's own
   * buffer) while its client takes none of them: a stream over this that gets no 'drain' for
   * SSE_DRAIN_TIMEOUT_MS is closed (apps/api/plugins/sse-writer.ts). Below it, only the slower
   * RESPONSE_STALL_TIMEOUT_MS applies. A client that keeps reading, however slowly, is never cut.
   */
  SSE_MAX_BUFFERED_BYTES: z.coerce.number().int().min(16 * 1024).default(256 * 1024),
  SSE_DRAIN_TIMEOUT_MS: z.coerce.number().int().min(100).max(600_000).default(5_000),
  /**
   * Feedback calls (POST /v1/query/requests/{id}/feedback) of one organization reading or writing
   * PostgreSQL at once in one API process. One past it waits its turn up to FEEDBACK_WRITE_WAIT_MS,
   * in memory and holding no pooled connection, then gets 429 organization_concurrency_limit with
   * Retry-After 1. An organization's rating changes take its lock one at a time anyway: without a
   * bound, a burst of them (its request bucket allows 300) each held one of the API's 20 pooled
   * connections waiting for that lock, and every organization's requests waited for the pool.
   */
  FEEDBACK_WRITES_PER_ORG: z.coerce
    .number()
    .int()
    .positive()
    .max(API_DB_POOL_SIZE - 1, `must leave the API's ${API_DB_POOL_SIZE} pooled connections room for other organizations: at most ${API_DB_POOL_SIZE - 1}`)
    .default(2),
  FEEDBACK_WRITE_WAIT_MS: z.coerce.number().int().min(0).max(60_000).default(2_000),
  /**
   * Prompts of one organization being routed at once in one API process (the router's retrieval,
   * embedding and input filling, with the attachments' text read: up to MAX_WORKFLOW_INPUT_BYTES
   * each). One more waits its turn in memory up to PROMPT_ROUTING_WAIT_MS, then gets 429
   * organization_concurrency_limit with Retry-After, before it is counted in the plan's minute.
   * Routing holds no running slot, so without a bound a burst of prompts (the request bucket allows
   * 300, the plan 600 a minute) held that many attachments in the API's memory at once.
   */
  PROMPT_ROUTINGS_PER_ORG: int(8),
  PROMPT_ROUTING_WAIT_MS: z.coerce.number().int().min(0).max(60_000).default(2_000),
  /**
   * Each organization's request rate in one API process (a token bucket per organization, in
   * memory; N API processes take N times as much). Every request with an organization's credential
   * takes a token: request status, feedback, /v1/auth, uploads, tool listings, each JSON-RPC
   * message of an MCP exchange, and POST /v1/query (a query the plan's per-minute quota counts gets
   * its token back: it is limited there). An empty bucket answers 429 organization_rate_limit with
   * Retry-After, before any other work. The defaults are far above any client that behaves (an
   * agent polling a run every 150 ms takes 6.7 a second; the test suite's biggest burst from one
   * organization is 30) and keep one organization to a small share of a process. Fractions allowed.
   */
  ORG_REQUESTS_PER_SECOND: z.coerce.number().positive().max(1_000_000).default(100),
  /** The bucket's size: requests one organization may send at once after a quiet while. */
  ORG_REQUEST_BURST: int(300),
  /**
   * Lookups in PostgreSQL, at once in one API process, of credentials (API keys, MCP access tokens)
   * the process has not yet seen pass; one past it waits up to AUTH_LOOKUP_WAIT_MS for a slot, then
   * gets 503 api_key_verification_unavailable with Retry-After. So a flood of invented keys against
   * a slow database holds at most this many of the API's 20 pooled connections. A credential that
   * passed in this process (the last 10,000 are remembered, by hash) takes no slot of these; it is
   * still looked up on every request, so a revocation holds at once, and one organization's such
   * lookups are bounded alike (at most this many at once, per organization). A healthy database keeps 1 or 2 in flight.
   */
  AUTH_LOOKUPS_IN_FLIGHT: z.coerce
    .number()
    .int()
    .positive()
    .max(API_DB_POOL_SIZE - 1, `must leave the API's ${API_DB_POOL_SIZE} pooled connections room for keys in use: at most ${API_DB_POOL_SIZE - 1}`)
    .default(8),
  AUTH_LOOKUP_WAIT_MS: z.coerce.number().int().min(0).max(60_000).default(1_000),
  /**
   * Failed credential checks (unknown, malformed, revoked, expired) per client address (request.ip,
   * see TRUST_PROXY; an IPv6 address counts by its /64, a proxy's `address:port` as the address) in one API process: a token bucket of
   * AUTH_FAILURES_PER_ADDRESS_BURST, refilled at AUTH_FAILURES_PER_ADDRESS_PER_SECOND. An empty
   * bucket refuses, before PostgreSQL, any check from the address that needs a lookup: 429
   * authentication_rate_limited with Retry-After. A credential that passed in this process is not
   * refused (one bad client behind a shared address does not lock out keys in use there). Defaults:
   * 30 at once, then 30 a minute, as the OAuth endpoints' per-address limit. Fractions allowed.
   */
  AUTH_FAILURES_PER_ADDRESS_BURST: int(30),
  AUTH_FAILURES_PER_ADDRESS_PER_SECOND: z.coerce.number().positive().max(1_000_000).default(0.5),
  /** Addresses whose failure bucket is kept at most (a bucket that refilled is dropped anyway); past it, the oldest is forgotten, so addresses an attacker rotates through cannot grow memory. */
  AUTH_FAILURE_ADDRESSES_MAX: int(50_000),
  /**
   * Keyless reads of PostgreSQL (catalog search, detail, suggest and sitemap; icons), at once in one
   * API process, and at once from one client address (IPv6 by /64; see TRUST_PROXY). A read past
   * either waits its turn up to KEYLESS_READ_WAIT_MS, then gets 503 catalog_unavailable with
   * Retry-After. So anonymous traffic, from one address or many, holds at most
   * KEYLESS_READS_IN_FLIGHT of the API's 20 pooled connections, and one address at most
   * KEYLESS_READS_PER_ADDRESS of those. Together with AUTH_LOOKUPS_IN_FLIGHT at most 19.
   */
  KEYLESS_READS_IN_FLIGHT: int(4),
  KEYLESS_READS_PER_ADDRESS: int(2),
  KEYLESS_READ_WAIT_MS: z.coerce.number().int().min(0).max(60_000).default(2_000),
  /** JSON object host -> "127.0.0.1:port": routes real-looking recipe hosts to local sites (dev, tests). */
  SITE_HOST_MAP: z.string().optional(),
  /** Debian's Chromium: the headless shell when installed, else the full browser (defaultChromiumPath). */
  CHROMIUM_PATH: z.string().default(defaultChromiumPath),
  /**
   * Chromium's own sandbox around the pages it renders (hostile sites' scripts run there): `auto`
   * uses it unless the worker runs as root (Chromium refuses it then) and goes on without it, with a
   * warning, where the platform forbids it (user namespaces blocked); `on` requires it (a browser
   * that cannot have it does not start); `off` never uses it.
   */
  CHROMIUM_SANDBOX: z.enum(['auto', 'on', 'off']).default('auto'),
  /** Browser runs at once per worker; one more context is kept made ahead for the next run. A
   *  browser worker takes a browser task only when one of these pages is there for it (its health
   *  examples aside): the rest wait in Temporal's queue, where the organization is the fairness key. */
  BROWSER_CONCURRENCY: int(2),
  /**
   * HTTP runs at once per worker process (read-only queries, actions, HTTP health and builder
   * examples). Read-only runs are local activities, whose slots the SDK hands out first come first
   * served: this bound, fair between organizations, is where they are shared out. It also bounds the
   * memory of the bodies being read (up to 5 MB each): 100, as the SDK's local-activity slots did.
   */
  HTTP_CONCURRENCY: z.coerce.number().int().min(1).max(10_000).default(100),
  /** Of HTTP_CONCURRENCY, the most one organization's runs (or the health checks') hold at once; the
   *  rest wait, and a freed slot goes to the waiting organization holding the fewest. Default a quarter. */
  HTTP_CONCURRENCY_PER_ORG: z.coerce.number().int().min(1).max(10_000).optional(),
  /** A prebuilt workflow bundle (`npm run build:workflows`); unset = bundle at worker start. */
  WORKFLOW_BUNDLE_PATH: z.string().optional(),
  /** Heartbeat timeout of the execute activity: how fast a dead worker's task moves to another. */
  EXECUTE_HEARTBEAT_TIMEOUT_MS: int(10_000),
  /**
   * Key that encrypts connected accounts and access keys at rest (AES-256-GCM): base64 of 32 random
   * bytes (`openssl rand -base64 32`). Required in production. When unset (dev, tests) a key is
   * generated into `$DATA_DIR/connections-key` (mode 0600) on first use and reused after that.
   */
  CONNECTIONS_ENCRYPTION_KEY: z.string().optional(),
  /** Earlier encryption keys (comma-separated base64), still accepted for decryption after a rotation,
   *  until `npm run admin -- connection rekey` reports no row left on them (docs/connections.md). */
  CONNECTIONS_PREVIOUS_KEYS: z.string().optional(),
  /**
   * Key that encrypts Temporal payloads (workflow and activity inputs and outputs, results, memos) in
   * Temporal's history (AES-256-GCM, shared/temporal/payload-codec.ts): base64 of 32 random bytes.
   * Required in production, the same in every API and worker process. When unset (dev, tests) a key
   * is generated into `$DATA_DIR/payload-key` (mode 0600) on first use and reused after that.
   */
  PAYLOAD_ENCRYPTION_KEY: z.string().optional(),
  /** Earlier payload keys (comma-separated base64), still accepted for decoding after a rotation. */
  PAYLOAD_PREVIOUS_KEYS: z.string().optional(),
  /** Operator credential of the Temporal codec endpoint (`POST /codec/decode`, `/codec/encode`), sent
   *  as `Authorization: Bearer …`; at least 32 characters. Unset = the endpoint does not exist (404).
   *  Never an organization's API key: those are refused there. */
  CODEC_ENDPOINT_TOKEN: z.string().min(32, 'must be at least 32 characters (openssl rand -hex 32)').optional(),
  /** Origins (comma-separated, e.g. the Temporal Web UI's `http://127.0.0.1:8233`) whose browsers may
   *  call the codec endpoint (CORS). Unset = no cross-origin access. */
  CODEC_CORS_ORIGINS: z.string().optional(),
  /** Health checks: a Temporal Schedule (created by the worker) runs every read-only operation's
   *  verified examples and records operations.health_status / verified_at. `false` leaves the
   *  Schedule alone (an existing one keeps running; pause or delete it with the Temporal CLI). */
  HEALTH_CHECKS_ENABLED: z
    .enum(['true', 'false', '1', '0'])
    .default('true')
    .transform((v) => v === 'true' || v === '1'),
  /** Seconds between health-check runs (the Schedule's interval). */
  HEALTH_CHECK_INTERVAL_SECONDS: int(900),
  /** Time limit of one example run during a health check, from when it reaches the website (a wait for a browser page has its own bound). */
  HEALTH_CHECK_EXAMPLE_TIMEOUT_MS: int(60_000),
  /** Operations checked at once during a health check; low, as checks share browsers with queries. A browser worker gives each health example it takes a task slot of its own (apps/worker/browser-task-slots.ts). */
  HEALTH_CHECK_CONCURRENCY: int(2),
  /** Retention of terminal envelopes in milliseconds; when set it overrides RESULT_RETENTION_HOURS (tests). */
  RESULT_RETENTION_MS: z.coerce.number().int().positive().optional(),
  /** Largest serialized workflow input (bytes) a query may dispatch; below Temporal's 2 MiB payload limit. */
  MAX_WORKFLOW_INPUT_BYTES: int(1_800_000),
  /** gRPC deadline of one workflow start; a start cut off by it is ambiguous (it may have been accepted). */
  TEMPORAL_START_TIMEOUT_MS: int(10_000),
  /** How the API learns a run's terminal envelope: `notify` (PostgreSQL LISTEN/NOTIFY on the request
   *  row, one LISTEN connection per API process) or `history` (Temporal's history long-poll).
   *  `notify` falls back to `history` when a notification cannot be trusted or is late. */
  RESULT_WAIT: z.enum(['notify', 'history']).default('notify'),
  /** With RESULT_WAIT=notify: after this long without a notification, also long-poll the history
   *  (a run that closed without an envelope, e.g. terminated, writes none). */
  RESULT_NOTIFY_FALLBACK_MS: int(3_000),
  /** Worker tuning of the query task queue (apps/worker/worker.ts workerTuning; measure with `npm run
   *  bench`). Unset, the workflow-task slots are as many as the local-activity slots (at most the
   *  cache, when that is set) and the cache is the SDK's own size, at least as large: a read-only
   *  query holds its workflow task's slot for its whole run. The two polls: the SDK's defaults. */
  WORKER_MAX_CACHED_WORKFLOWS: z.coerce.number().int().min(0).optional(),
  WORKER_MAX_CONCURRENT_WORKFLOW_TASKS: z.coerce.number().int().positive().optional(),
  WORKER_MAX_CONCURRENT_WORKFLOW_TASK_POLLS: z.coerce.number().int().positive().optional(),
  WORKER_MAX_CONCURRENT_ACTIVITY_TASK_POLLS: z.coerce.number().int().positive().optional(),
  /** Local activities at once per worker. Read-only HTTP runs are local activities that mostly wait on
   *  a website (or for an HTTP_CONCURRENCY slot): plentiful, so the SDK's first-come hand-out never
   *  decides whose run waits (the SDK's own default is 100). */
  WORKER_MAX_CONCURRENT_LOCAL_ACTIVITIES: z.coerce.number().int().min(1).max(100_000).default(1_000),
  /** `on` keeps the Temporal SDK's stack-trace query (`__stack_trace`, the Web UI's "Stack Trace"
   *  tab) for the workflows this worker runs. It costs every workflow task: the SDK captures and
   *  source-maps a stack trace for each promise a workflow makes, whether anyone asks or not (about
   *  2.3 ms of Node CPU per query in the bench, a tenth of what the API and worker spend). `off`
   *  (the default) leaves that hook out (patches/@temporalio+worker+*.patch); the query then
   *  answers "not enabled", and the progress query, histories and every failure's stack trace are
   *  as before. One setting per process: the SDK installs the hook once per workflow thread. */
  WORKER_WORKFLOW_STACK_TRACES: z.enum(['on', 'off']).default('off'),
  /** PostgreSQL connections of one worker process: a quarter (at least one) for reservations, whose
   *  statements end within 2 s (shared/db/credits.ts createLedgerPool), the rest for the other
   *  billing local activities and execute steps. */
  WORKER_DB_POOL_SIZE: int(8),
  /** PostgreSQL statement_timeout of every pooled connection: a stuck statement fails instead of holding a slot. */
  DB_STATEMENT_TIMEOUT_MS: int(30_000),
  /** PostgreSQL idle_in_transaction_session_timeout: a transaction left open by a stuck process is ended. */
  DB_IDLE_IN_TRANSACTION_TIMEOUT_MS: int(60_000),
  LOG_LEVEL: z.enum(['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent']).default('info'),
  /** `npm start` only: serve the embedded Temporal dev server's Web UI on a free port (its address
   *  is in the banner and runtime.json). `false` saves a port and a little start-up time. */
  TEMPORAL_UI_ENABLED: z
    .enum(['true', 'false', '1', '0'])
    .default('true')
    .transform((v) => v === 'true' || v === '1'),
  /** Largest site output (bytes of its JSON) a run may return. Temporal refuses payloads over its
   *  blob limit (2 MiB by default; gRPC messages 4 MiB) and would retry the run, and the output is
   *  carried again in the terminal envelope: so a safe share of that limit, failing at once beyond it. */
  EXECUTE_MAX_OUTPUT_BYTES: int(1_572_864),
  /** Maintenance: a Temporal Schedule (created by the worker, like the health checks) settles
   *  unresolved requests from their workflow's real state and deletes expired retained results.
   *  `false` leaves the Schedule alone (an existing one keeps running; pause it with the Temporal CLI). */
  RECONCILE_ENABLED: z
    .enum(['true', 'false', '1', '0'])
    .default('true')
    .transform((v) => v === 'true' || v === '1'),
  /** Seconds between maintenance runs (the Schedule's interval). */
  RECONCILE_INTERVAL_SECONDS: int(60),
  /**
   * Milliseconds between folds of completed runs into the catalog's counts (`completed_runs`, the
   * `popular` order) by each API process: a run shows there within about this long
   * (shared/db/catalog.ts, foldRunCounts).
   */
  CATALOG_RUN_FOLD_MS: z.coerce.number().int().min(100).max(600_000).default(2_000),
  /** An unresolved request is reconciled once it is older than QUERY_DEADLINE_MS plus this margin. */
  RECONCILE_MARGIN_MS: int(60_000),
  /** Unresolved requests examined per run, oldest first; and at most this many of one organization. */
  RECONCILE_BATCH_SIZE: int(200),
  RECONCILE_PER_ORG: int(50),
  /** Expired retained results deleted per run (a backlog drains over several runs). */
  RETENTION_BATCH_SIZE: int(5_000),
  /**
   * MCP OAuth clients idle this long are removed by maintenance (shared/oauth/clients.ts,
   * deleteIdleClients): a registration never completed this long after it was made, a client whose
   * grants have all ended this long after it last got tokens, a cached metadata document this long
   * after it was fetched. A client with a live grant is never removed. An expired client_id is
   * unknown: `invalid_client` at the token endpoint, "not registered" on the consent page.
   */
  OAUTH_CLIENT_IDLE_HOURS: int(24),
  /**
   * Registration (POST /oauth/register) answers 503 `temporarily_unavailable` with Retry-After while
   * this many registered clients younger than OAUTH_CLIENT_IDLE_HOURS were never used (no grant):
   * the per-address limit (30/min) does not bound a caller with many addresses. Clients already
   * registered and metadata-document clients keep working. Also the number of cached metadata
   * documents of clients never used that are kept (the most recently fetched; older ones are
   * forgotten and fetched again when named: shared/oauth/client-documents.ts).
   */
  OAUTH_UNUSED_CLIENTS_MAX: int(10_000),
  /** Per client address (services/client-address.ts) and minute: client registrations (429 slow_down past it). */
  OAUTH_REGISTRATIONS_PER_MINUTE: int(30),
  /** Per client address and minute: token requests, and revocation requests apart (429 slow_down past it). */
  OAUTH_TOKEN_REQUESTS_PER_MINUTE: int(120),
  /** `GET /metrics` (Prometheus text, key-free, no organization's data in it). `false` answers 404
   *  there: for deployments whose API port is reachable by people who should not see traffic figures. */
  METRICS_ENABLED: z
    .enum(['true', 'false', '1', '0'])
    .default('true')
    .transform((v) => v === 'true' || v === '1'),
  /** Workers: host:port where the Temporal SDK's Prometheus exporter serves `/metrics` (e.g.
   *  `127.0.0.1:9464`). Unset = no exporter (the default): the port is the operator's to choose. */
  WORKER_METRICS_ADDRESS: z
    .string()
    .regex(/^[^\s:]+:\d{1,5}$/, 'must be host:port, e.g. 127.0.0.1:9464')
    .optional(),
  /** On SIGTERM the API first answers /readyz 503 (`checks.draining`) for this long while still
   *  serving, so balancers polling it move traffic away, then stops accepting and drains. 0 = stop at
   *  once (then Fastify itself answers 503 to anything new). Set it above the readiness probe period. */
  DRAIN_DELAY_MS: z.coerce.number().int().min(0).default(0),
  /** `npm run api` applies pending migrations at start (advisory-locked, so concurrent starts are
   *  safe). `false` leaves them to a separate step (`npm run migrate`, the Helm chart's pre-install/
   *  pre-upgrade Job), so a rolling API never changes the schema under running workers. */
  MIGRATE_ON_START: z
    .enum(['true', 'false', '1', '0'])
    .default('true')
    .transform((v) => v === 'true' || v === '1'),
  /** Console sign-up (a new user and a new organization, apps/api/console): `open` or `closed`.
   *  Unset = open on the embedded default, closed when DATABASE_URL is set (production). */
  CONSOLE_SIGNUP: z.enum(['open', 'closed']).optional(),
  /** Credits granted to an organization created by console sign-up. */
  CONSOLE_SIGNUP_CREDITS: z.coerce.number().int().min(0).default(0),
  /** A console session unused this long ends (minutes). */
  CONSOLE_SESSION_IDLE_MINUTES: int(120),
  /** A console session ends this long after sign-in, used or not (hours). */
  CONSOLE_SESSION_MAX_HOURS: int(12),
  /** Sign-in throttling: failed attempts per client IP and per email within the window; beyond, 429. */
  CONSOLE_SIGNIN_WINDOW_SECONDS: int(900),
  CONSOLE_SIGNIN_MAX_PER_IP: int(50),
  CONSOLE_SIGNIN_MAX_PER_EMAIL: int(10),
  /** Accounts made by console sign-up (each a new organization granted CONSOLE_SIGNUP_CREDITS) per
   *  client address within CONSOLE_SIGNUP_WINDOW_SECONDS; beyond, sign-up answers 429 with
   *  Retry-After. Refused sign-ups are not counted here (they count against CONSOLE_SIGNIN_MAX_PER_IP). */
  CONSOLE_SIGNUP_MAX_PER_IP: int(5),
  CONSOLE_SIGNUP_WINDOW_SECONDS: int(86_400),
  /** The router's optional LLM path (issue 10, shared/router/llm.ts): an OpenAI-compatible endpoint's
   *  base URL, e.g. `https://api.openai.com/v1` (POST `<base>/chat/completions`). Unset = offline only. */
  OPENAI_BASE_URL: z.string().url().optional(),
  /** Bearer key for that endpoint; never logged, never in an answer or a request's status. */
  OPENAI_API_KEY: z.string().min(1).optional(),
  /** The model to ask; required when OPENAI_BASE_URL is set. */
  OPENAI_MODEL: z.string().min(1).optional(),
  /** Time limit of one call to the endpoint (a prompt makes at most two: choose, then fill); past it the offline router answers. */
  OPENAI_TIMEOUT_MS: int(4_000),
  /** Largest answer (bytes) read from the endpoint; a larger one is cut off and the offline router answers. */
  OPENAI_MAX_RESPONSE_BYTES: int(65_536),
});

export type Config = z.infer<typeof ConfigSchema> & { dataDir: string; siteHostMap: Record<string, string>; consoleSignup: boolean };

/** How long terminal envelopes are retained, in milliseconds. */
export const resultRetentionMs = (c: Pick<Config, 'RESULT_RETENTION_MS' | 'RESULT_RETENTION_HOURS'>) =>
  c.RESULT_RETENTION_MS ?? c.RESULT_RETENTION_HOURS * 3_600_000;

/** One organization's share of the uploads one API process receives at once, in bytes. */
export const filesUploadBytesPerOrg = (c: Pick<Config, 'FILES_UPLOADS_IN_FLIGHT_MAX_BYTES' | 'FILES_UPLOADS_IN_FLIGHT_MAX_BYTES_PER_ORG'>): number =>
  c.FILES_UPLOADS_IN_FLIGHT_MAX_BYTES_PER_ORG ?? Math.max(10 * 1024 * 1024, Math.floor(c.FILES_UPLOADS_IN_FLIGHT_MAX_BYTES / 4));

/** One organization's share of a worker's HTTP runs at once. */
export const httpConcurrencyPerOrg = (c: Pick<Config, 'HTTP_CONCURRENCY' | 'HTTP_CONCURRENCY_PER_ORG'>): number =>
  c.HTTP_CONCURRENCY_PER_ORG ?? Math.max(1, Math.floor(c.HTTP_CONCURRENCY / 4));

/** The browser task queue this configuration names. */
export function browserTaskQueue(c: Pick<Config, 'TEMPORAL_TASK_QUEUE' | 'TEMPORAL_BROWSER_TASK_QUEUE'>): string {
  return c.TEMPORAL_BROWSER_TASK_QUEUE ?? `${c.TEMPORAL_TASK_QUEUE}-browser`;
}

/**
 * Whether the service is reached over https (its PUBLIC_BASE_URL): the console's cookies are then
 * Secure and `__Host-` prefixed, and every answer carries Strict-Transport-Security.
 */
export const servesHttps = (c: Pick<Config, 'PUBLIC_BASE_URL'>): boolean => (c.PUBLIC_BASE_URL ?? '').toLowerCase().startsWith('https:');

export function loadConfig(env: NodeJS.ProcessEnv = process.env): Config {
  const parsed = ConfigSchema.safeParse(env);
  if (!parsed.success) {
    const lines = parsed.error.issues.map((i) => `  ${i.path.join('.')}: ${i.message}`);
    throw new Error(`Invalid configuration:\n${lines.join('\n')}`);
  }
  const c = parsed.data;
  let siteHostMap: Record<string, string> = {};
  if (c.SITE_HOST_MAP) {
    try {
      siteHostMap = z.record(z.string(), z.string()).parse(JSON.parse(c.SITE_HOST_MAP));
    } catch {
      throw new Error('Invalid configuration:\n  SITE_HOST_MAP: must be a JSON object of host -> "ip:port"');
    }
  }
  if (c.OPENAI_BASE_URL && !c.OPENAI_MODEL) throw new Error('Invalid configuration:\n  OPENAI_MODEL: required when OPENAI_BASE_URL is set');
  if (c.KEYLESS_READS_IN_FLIGHT + c.AUTH_LOOKUPS_IN_FLIGHT > API_DB_POOL_SIZE - 1) {
    throw new Error(
      `Invalid configuration:\n  KEYLESS_READS_IN_FLIGHT: with AUTH_LOOKUPS_IN_FLIGHT (${c.AUTH_LOOKUPS_IN_FLIGHT}) must leave the API's ${API_DB_POOL_SIZE} pooled connections room for keyed requests: at most ${API_DB_POOL_SIZE - 1 - c.AUTH_LOOKUPS_IN_FLIGHT}`,
    );
  }
  if (c.FILES_UPLOADS_IN_FLIGHT_MAX_BYTES_PER_ORG !== undefined && c.FILES_UPLOADS_IN_FLIGHT_MAX_BYTES_PER_ORG > c.FILES_UPLOADS_IN_FLIGHT_MAX_BYTES) {
    throw new Error(
      `Invalid configuration:\n  FILES_UPLOADS_IN_FLIGHT_MAX_BYTES_PER_ORG: one organization's share must be at most FILES_UPLOADS_IN_FLIGHT_MAX_BYTES (${c.FILES_UPLOADS_IN_FLIGHT_MAX_BYTES})`,
    );
  }
  if (c.HTTP_CONCURRENCY_PER_ORG !== undefined && c.HTTP_CONCURRENCY_PER_ORG > c.HTTP_CONCURRENCY) {
    throw new Error(`Invalid configuration:\n  HTTP_CONCURRENCY_PER_ORG: one organization's share must be at most HTTP_CONCURRENCY (${c.HTTP_CONCURRENCY})`);
  }
  return { ...c, dataDir: path.resolve(c.DATA_DIR), siteHostMap, consoleSignup: (c.CONSOLE_SIGNUP ?? (c.DATABASE_URL ? 'closed' : 'open')) === 'open' };
}
