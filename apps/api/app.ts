// The API as a Fastify plugin tree; the listener lives in server.ts.
import Fastify, { type FastifyInstance } from 'fastify';
import swagger from '@fastify/swagger';
import { serializerCompiler, validatorCompiler } from 'fastify-type-provider-zod';
import type { Client } from '@temporalio/client';
import type { Config } from '../../shared/config.ts';
import type { LocalResults } from '../../shared/local-results.ts';
import { startRunCountFold } from '../../shared/db/catalog.ts';
import type { Db } from '../../shared/db/pool.ts';
import { openApiSwaggerOptions } from '../../shared/openapi/document.ts';
import { logRequest } from '../../shared/telemetry/redact.ts';
import errorsPlugin, { clientErrorResponder, frameworkErrorResponder, rawMissResponse } from './plugins/errors.ts';
import jsonBodyPlugin from './plugins/json-body.ts';
import authPlugin from './plugins/auth.ts';
import ssePlugin from './plugins/sse.ts';
import metricsPlugin from './plugins/metrics.ts';
import { StalledConnections } from './plugins/stalled-connections.ts';
import { hstsHeader, registerTransportSecurity } from './plugins/transport-security.ts';
import rootRoutes from './routes/root.ts';
import { dependencyCheck } from './routes/probes.ts';
import queryRoutes from './routes/query.ts';
import requestRoutes from './routes/requests.ts';
import catalogRoutes from './routes/catalog.ts';
import { FeedbackGate } from './routes/feedback.ts';
import { KeylessGate } from './services/keyless-gate.ts';
import { QueryService } from './services/query-service.ts';
import { createLlmRouter, createRouter } from '../../shared/router/index.ts';

export const SERVICE_VERSION = '1.2.0';

export interface AppDeps {
  config: Config;
  db: Db;
  /** Lazily connected Temporal client (the API starts even while Temporal is still coming up). */
  temporal: () => Promise<Client>;
  temporalHealthy: () => Promise<boolean>;
  /** Public base URL; known once the listener is bound. */
  baseUrl: () => string;
  /** Start workflows with eager start (the client shares a worker's connection in this process). */
  eagerStart?: boolean;
  /** Terminal envelopes handed over by a worker in this process (shared/local-results.ts). */
  localResults?: LocalResults;
}

export async function buildApp(deps: AppDeps): Promise<FastifyInstance> {
  let built: FastifyInstance | undefined;
  // Answers written before any hook (a malformed request, an unknown method, a bad path) carry
  // Strict-Transport-Security too; the rest get it from registerTransportSecurity below.
  const hsts = hstsHeader(deps.config);
  const always: Record<string, string> = hsts ? { 'strict-transport-security': hsts } : {};
  const app = Fastify({
    // Logged request URLs lose their query string (logRequest), as spans do: it can hold a secret.
    logger:
      deps.config.LOG_LEVEL === 'silent'
        ? false
        : { level: deps.config.LOG_LEVEL, redact: ['req.headers.authorization', 'req.headers["idempotency-key"]'], serializers: { req: logRequest } },
    // Large enough for 1000 include paths of 1000 characters; larger bodies are 413.
    bodyLimit: 2 * 1024 * 1024,
    return503OnClosing: true,
    // A request must arrive whole in time (408 request_timeout, apps/api/plugins/errors.ts): with
    // Fastify's default of none, a caller sending a body byte by byte held its connection for ever.
    // Node checks open requests every connectionsCheckingInterval.
    requestTimeout: deps.config.REQUEST_TIMEOUT_MS,
    http: {
      headersTimeout: Math.min(60_000, deps.config.REQUEST_TIMEOUT_MS),
      connectionsCheckingInterval: Math.min(30_000, Math.max(250, Math.floor(deps.config.REQUEST_TIMEOUT_MS / 4))),
    },
    // request.ip is the TCP peer unless the operator names the proxies in front (TRUST_PROXY).
    trustProxy: deps.config.TRUST_PROXY,
    // A method Node's parser does not know (FOO) still gets the envelope: 405 with Allow, or 404.
    clientErrorHandler: clientErrorResponder(() => built, deps.baseUrl, always),
    frameworkErrors: frameworkErrorResponder(deps.baseUrl, always),
  });
  built = app;
  // A client that stops reading its answers has its connection closed (stalled-connections.ts).
  const stalled = new StalledConnections(app.server, deps.config.RESPONSE_STALL_TIMEOUT_MS);
  app.addHook('onClose', async () => stalled.stop());
  // CONNECT never reaches Fastify (Node emits 'connect'); no route takes it.
  app.server.on('connect', (req: { method?: string; url?: string }, socket: import('node:net').Socket) => {
    socket.end(rawMissResponse(app, deps.baseUrl(), req.method ?? 'CONNECT', req.url ?? '/', always));
  });
  // Routes declare params/querystring/headers/body/responses as zod schemas (withTypeProvider<ZodTypeProvider>()):
  // they validate requests, encode responses and are the OpenAPI document (apps/api/README.md).
  // Every method + path registered, for test/routes.test.ts: each one is documented or allow-listed.
  const routeTable: Array<{ method: string; url: string }> = [];
  app.addHook('onRoute', (r) => {
    for (const method of [r.method].flat()) routeTable.push({ method, url: r.url });
  });
  app.decorate('routeTable', routeTable);
  app.setValidatorCompiler(validatorCompiler);
  app.setSerializerCompiler(serializerCompiler);
  // JSON only: a text/plain body is 415, not a string handed to the routes.
  app.removeContentTypeParser('text/plain');
  app.decorate('db', deps.db);
  app.decorate('baseUrl', deps.baseUrl);
  // The router holds no connection of its own; its first date parse compiles chrono-node's grammar
  // (hundreds of ms), so that happens just after start-up rather than in a caller's first prompt.
  const router = createRouter({ db: deps.db });
  const queries = new QueryService({
    db: deps.db,
    temporal: deps.temporal,
    config: deps.config,
    baseUrl: deps.baseUrl,
    eagerStart: deps.eagerStart === true,
    localResults: deps.localResults,
    router: async () => router,
    // The optional LLM path: only when OPENAI_BASE_URL and OPENAI_MODEL are set.
    llm: createLlmRouter(deps.config),
  });
  app.decorate('queries', queries);
  // Not awaited: PostgreSQL down at start-up must not hold the API; waiters fall back meanwhile.
  app.addHook('onReady', async () => void queries.startListening());
  app.addHook('onReady', async () => void setTimeout(() => router.warmUp(), 0).unref());
  app.addHook('onClose', () => queries.close());
  // Completed runs reach the catalog's counts here, not in each query's transaction (foldRunCounts).
  let stopFold: (() => void) | undefined;
  app.addHook('onReady', async () => void (stopFold = startRunCountFold(deps.db, deps.config.CATALOG_RUN_FOLD_MS, app.log)));
  app.addHook('onClose', async () => stopFold?.());
  // The embedding model's thread ends before the process may exit (exiting mid-embedding aborts it).
  app.addHook('onClose', () => router.close());

  // Strict-Transport-Security on every answer when the public base URL is https (HSTS_*).
  registerTransportSecurity(app, deps.config);
  await app.register(errorsPlugin);
  // Before every route: its onResponse hook observes all of them.
  await app.register(metricsPlugin);
  app.metrics.watchStalledConnections(stalled);
  await app.register(swagger, openApiSwaggerOptions());
  await app.register(jsonBodyPlugin);
  const c = deps.config;
  await app.register(authPlugin, {
    orgRate: { perSecond: c.ORG_REQUESTS_PER_SECOND, burst: c.ORG_REQUEST_BURST },
    credentials: {
      lookupsInFlight: c.AUTH_LOOKUPS_IN_FLIGHT,
      lookupWaitMs: c.AUTH_LOOKUP_WAIT_MS,
      failures: { perSecond: c.AUTH_FAILURES_PER_ADDRESS_PER_SECOND, burst: c.AUTH_FAILURES_PER_ADDRESS_BURST },
      addressesMax: c.AUTH_FAILURE_ADDRESSES_MAX,
      knownMax: 10_000,
    },
  });
  const startedAt = Date.now();
  // One dependency check in flight at a time, shared by GET /health and GET /readyz (routes/probes.ts).
  const dependencies = dependencyCheck(deps.db, deps.temporalHealthy);
  await app.register(rootRoutes, { version: SERVICE_VERSION, startedAt, dependencies });
  // Draining: set by server.ts before close, so /readyz turns 503 while requests are still served.
  const lifecycle = { draining: false };
  app.decorate('markDraining', () => {
    lifecycle.draining = true;
  });
  await app.register(import('./routes/probes.ts'), { startedAt, dependencies, lifecycle });
  if (deps.config.METRICS_ENABLED) await app.register(import('./routes/metrics.ts'));
  await app.register(ssePlugin, { streamsPerOrg: c.SSE_STREAMS_PER_ORG, maxBufferedBytes: c.SSE_MAX_BUFFERED_BYTES, drainTimeoutMs: c.SSE_DRAIN_TIMEOUT_MS });
  await app.register(queryRoutes, { queries });
  await app.register(requestRoutes);
  await app.register(import('./routes/files.ts'), { config: deps.config });
  // One bound on each organization's feedback writes in this process: the API's route and the console's form share it.
  const feedbackGate = new FeedbackGate(deps.config);
  await app.register(import('./routes/feedback.ts'), { gate: feedbackGate });
  // Keyless reads of PostgreSQL (catalog, icons): bounded in flight, per process and per address.
  const keyless = new KeylessGate({ inFlight: c.KEYLESS_READS_IN_FLIGHT, perAddress: c.KEYLESS_READS_PER_ADDRESS, waitMs: c.KEYLESS_READ_WAIT_MS });
  app.decorate('keylessReads', keyless);
  app.metrics.watchKeylessReads(keyless);
  await app.register(catalogRoutes);
  await app.register(import('./routes/oauth-metadata.ts'));
  // MCP sign-in with OAuth: registration, token and revocation endpoints (form bodies in their own scope).
  await app.register(import('./routes/oauth.ts'), {
    unusedClientsMax: deps.config.OAUTH_UNUSED_CLIENTS_MAX,
    clientIdleHours: deps.config.OAUTH_CLIENT_IDLE_HOURS,
    registrationsPerMinute: deps.config.OAUTH_REGISTRATIONS_PER_MINUTE,
    tokenRequestsPerMinute: deps.config.OAUTH_TOKEN_REQUESTS_PER_MINUTE,
  });
  await app.register(import('./routes/mcp.ts'), { allowedOrigins: deps.config.MCP_ALLOWED_ORIGINS, getRunWaitsPerOrg: deps.config.MCP_GET_RUN_WAITS_PER_ORG });
  await app.register(import('./routes/icons.ts'));
  await app.register(import('./routes/openapi.ts'));
  await app.register(import('./routes/well-known.ts'));
  await app.register(import('./routes/codec.ts'), { config: deps.config }); // only with CODEC_ENDPOINT_TOKEN
  // The web console: HTML pages with cookies, forms and CSRF in a scope of their own (console/README.md).
  await app.register(import('./console/index.ts'), { config: deps.config, temporal: deps.temporal, feedbackGate });
  return app;
}

declare module 'fastify' {
  interface FastifyInstance {
    queries: QueryService;
    /** Keyless reads of PostgreSQL run through this (services/keyless-gate.ts). */
    keylessReads: KeylessGate;
    /** Every method + path registered (HEAD included), in registration order. */
    routeTable: ReadonlyArray<{ method: string; url: string }>;
    /** /readyz answers 503 from now on; the process keeps serving until it is closed. */
    markDraining(): void;
  }
}
