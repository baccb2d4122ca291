// OpenTelemetry traces on the real stack (shared/telemetry, docs/tracing.md). A pair of this
// file's own exports to an OTLP/HTTP receiver on loopback (JSON bodies, as the exporter sends them):
// one query is ONE trace from the API's server span through the workflow start, the workflow and
// each activity to the site request, and no span carries the API key, the input or a query string.
// A second pair with tracing off (an endpoint set, no exporter named) sends nothing and never
// loads the SDK: each process writes the modules it loaded when it exits.
import fs from 'node:fs/promises';
import http from 'node:http';
import os from 'node:os';
import path from 'node:path';
import type { AddressInfo } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { tracingSettings } from '../shared/telemetry/settings.ts';
import { isUntracedPath, originOnly, pathOnly } from '../shared/telemetry/redact.ts';
import { processPool, type ServiceProcess } from './helpers/processes.ts';
import { call, closeDb, demo, newOrg, ownPair, query, until } from './helpers/stack.ts';

const CITY = 'London';
const weather = { api: '@weather', operation: 'current_weather', input: { city: CITY } };

interface Span {
  traceId: string;
  spanId: string;
  parentSpanId?: string;
  name: string;
  kind: number; // OTLP: 1 internal, 2 server, 3 client
  attributes: Record<string, unknown>;
  service: string;
  /** OTLP as sent: 2 is an error. */
  status?: { code?: number; message?: string };
  events?: Array<{ name: string; attributes: Array<{ key: string; value: Record<string, unknown> }> }>;
}

/** A minimal OTLP/HTTP trace receiver: keeps every body it was sent, answers as a collector does. */
async function receiver() {
  const bodies: string[] = [];
  const server = http.createServer((req, res) => {
    let body = '';
    req.setEncoding('utf8');
    req.on('data', (c: string) => (body += c));
    req.on('end', () => {
      bodies.push(`${req.method} ${req.url} ${req.headers['content-type']}\n${body}`);
      res.writeHead(200, { 'content-type': 'application/json' }).end('{}');
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const spans = (): Span[] =>
    bodies.flatMap((b) => {
      const json = JSON.parse(b.slice(b.indexOf('\n') + 1));
      return (json.resourceSpans ?? []).flatMap((rs: any) => {
        const service = rs.resource.attributes.find((a: any) => a.key === 'service.name')?.value.stringValue;
        return rs.scopeSpans.flatMap((ss: any) =>
          ss.spans.map((s: any) => ({
            ...s,
            parentSpanId: s.parentSpanId || undefined,
            attributes: Object.fromEntries(s.attributes.map((a: any) => [a.key, Object.values(a.value)[0]])),
            service,
          })),
        );
      });
    });
  return {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
    bodies,
    spans,
    close: () => new Promise<void>((resolve) => server.close(() => resolve())),
  };
}

let traced: Awaited<ReturnType<typeof receiver>>;
let untraced: Awaited<ReturnType<typeof receiver>>;
let tmp: string;
let preload: string;
let pair: ReturnType<typeof ownPair>;
const pool = processPool(() => pair);

beforeAll(async () => {
  [traced, untraced] = await Promise.all([receiver(), receiver()]);
  tmp = await fs.mkdtemp(path.join(os.tmpdir(), 'wqs-tracing-'));
  // Loaded into each process with --import: on exit it writes every CommonJS module the process
  // loaded (the OpenTelemetry packages are CommonJS, so import() of them lands here too).
  preload = path.join(tmp, 'loaded-modules.mjs');
  await fs.writeFile(
    preload,
    `import fs from 'node:fs'; import { createRequire } from 'node:module';
const cache = createRequire(import.meta.url).cache;
process.on('exit', () => fs.writeFileSync(process.env.WQS_LOADED_MODULES_FILE, JSON.stringify(Object.keys(cache))));\n`,
  );
  await demo('/__demo/reset');
});
afterAll(async () => {
  await pool.killAll();
  await traced?.close();
  await untraced?.close();
  await closeDb();
  if (tmp) await fs.rm(tmp, { recursive: true, force: true });
});

/** An API and a worker of this test's own; each records its loaded modules under `name`. */
async function startPair(name: string, env: Record<string, string>) {
  pair = ownPair(`tracing-${name}`, env);
  const withPreload = (kind: string) => ({
    ...pair,
    env: { ...pair.env, NODE_OPTIONS: `${process.env.NODE_OPTIONS ?? ''} --import=${preload}`.trim(), WQS_LOADED_MODULES_FILE: path.join(tmp, `${name}-${kind}.json`) },
  });
  const [api, worker] = await Promise.all([pool.spawn('api', withPreload('api')), pool.spawn('worker', withPreload('worker'))]);
  return { api, worker, base: String(api.started.url) };
}

/** Stops a process the way an orchestrator does (SIGTERM: it drains and flushes) and reads its module list. */
async function stopAndListModules(p: ServiceProcess, file: string): Promise<string[]> {
  expect(await p.kill('SIGTERM')).toBe(0);
  return JSON.parse(await fs.readFile(path.join(tmp, file), 'utf8'));
}

const SDK_MODULES = /node_modules\/@opentelemetry\/(sdk-trace-|exporter-|instrumentation|resources)|interceptors-opentelemetry/;

describe('tracing on (OTEL_TRACES_EXPORTER=otlp)', () => {
  it('one query is one trace: server span → workflow start → workflow → each activity → site request, with nothing secret in it', async () => {
    const { api, worker, base } = await startPair('on', {
      OTEL_TRACES_EXPORTER: 'otlp',
      OTEL_EXPORTER_OTLP_ENDPOINT: traced.url,
      OTEL_EXPORTER_OTLP_TRACES_PROTOCOL: 'http/json',
      OTEL_BSP_SCHEDULE_DELAY: '200',
      OTEL_RESOURCE_ATTRIBUTES: 'deployment.environment=tracing-test',
    });
    // The shared prebuilt bundle has no tracing interceptors (unless this run itself traces): the
    // worker said so and bundled its own.
    if (!tracingSettings().enabled) expect(worker.output()).toContain('bundling the workflows now');

    const org = await newOrg(50);
    const secret = `s3cret-${Math.random().toString(36).slice(2)}`;
    const catalog = await call('GET', `/v1/catalog?token=${secret}`, { key: org.api_key, baseUrl: base });
    // (unknown query parameters get a 400; the span is what matters here)
    const res = await query(org.api_key, weather, { 'idempotency-key': `tracing-${secret}` }, base);
    expect(res.status, res.text).toBe(200);

    const isQueryServer = (s: Span) => s.kind === 2 && s.attributes['http.target'] === '/v1/query';
    const trace = await until(
      async () => {
        const all = traced.spans();
        const root = all.find(isQueryServer);
        const spans = root ? all.filter((s) => s.traceId === root.traceId) : [];
        // Complete once the workflow's span (it ends last, after every activity) and the site request arrived.
        const done = spans.some((s) => s.kind === 3 && s.attributes['server.address']) && spans.some((s) => s.name.startsWith('RunWorkflow:'));
        return done && { root: root!, spans };
      },
      90_000,
      300,
    );
    const { root, spans } = trace;
    if (process.env.TRACE_DUMP) await fs.writeFile(process.env.TRACE_DUMP, traced.bodies.join('\n'));
    const byId = new Map(spans.map((s) => [s.spanId, s]));
    const parentOf = (s: Span) => (s.parentSpanId ? byId.get(s.parentSpanId) : undefined);
    const ancestors = (s: Span) => {
      const out: Span[] = [];
      for (let p = parentOf(s); p; p = parentOf(p)) out.push(p);
      return out;
    };
    const names = spans.map((s) => s.name);

    // The HTTP server span is the root; every other span hangs under it, in this one trace.
    expect(root.parentSpanId).toBeUndefined();
    expect(root.service).toBe('wqs-api');
    expect(root.attributes['http.status_code']).toBe(200);
    for (const s of spans) if (s !== root) expect(ancestors(s).at(-1), `${s.name} reaches the server span`).toBe(root);

    const start = spans.find((s) => s.name.startsWith('StartWorkflow:'));
    expect(start, names.join(', ')).toBeDefined();
    expect(parentOf(start!)).toBe(root);
    const run = spans.find((s) => s.name.startsWith('RunWorkflow:'));
    expect(run, names.join(', ')).toBeDefined();
    expect(run!.service).toBe('wqs-worker');
    expect(ancestors(run!)).toContain(start);
    // Workflow spans name the run, nothing of its state (Temporal's sink would copy memo, results...).
    for (const s of spans.filter((x) => x.name.startsWith('RunWorkflow:') || x.name.startsWith('StartActivity:'))) {
      expect(Object.keys(s.attributes).sort()).toEqual(['attempt', 'namespace', 'runId', 'taskQueue', 'workflowId', 'workflowType']);
    }

    // A read-only HTTP query is one local activity (reserve, site request, settle): it has its span.
    const activities = spans.filter((s) => s.name.startsWith('RunActivity:'));
    expect(activities.map((a) => a.name), names.join(', ')).toEqual(['RunActivity:runReadQuery']);
    for (const a of activities) {
      expect(a.service).toBe('wqs-worker');
      expect(ancestors(a), `${a.name} under the workflow`).toContain(run);
      expect(parentOf(a)!.name).toBe(a.name.replace('RunActivity:', 'StartActivity:'));
    }
    const site = spans.filter((s) => s.kind === 3 && s.attributes['server.address']);
    expect(site.length).toBeGreaterThan(0);
    for (const s of site) {
      expect(parentOf(s)!.name, 'the site request is made inside an activity').toMatch(/^RunActivity:/);
      expect(s.attributes['http.response.status_code']).toBe(200);
      expect(s.attributes['url.full']).toMatch(/^http:\/\/[^/]+$/); // origin only
      expect(s.attributes['url.path']).toBeUndefined();
      expect(s.attributes['url.query']).toBeUndefined();
    }

    // Resource attributes from OTEL_RESOURCE_ATTRIBUTES reach both processes' spans.
    const sent = traced.bodies.join('\n');
    expect(sent).toContain('tracing-test');
    // The catalog call's server span kept its path and lost its query string.
    const catalogSpan = traced.spans().find((s) => s.kind === 2 && s.attributes['http.target'] === '/v1/catalog');
    expect(catalogSpan?.attributes['http.status_code']).toBe(catalog.status);
    // Nothing a caller sent as a secret or an input, and no result value, is in anything exported.
    const outputStrings = Object.values(res.body.data.output as Record<string, unknown>).filter((v): v is string => typeof v === 'string' && v.length >= 5);
    for (const forbidden of [org.api_key, secret, CITY, 'Bearer', ...outputStrings]) {
      expect(sent.includes(forbidden), `exported spans contain ${forbidden}`).toBe(false);
    }

    // A failing step: its failure's message names the page it asked for, with the input in its path
    // ("The website returned 500 for jobs.example.test/jobs/<id>"), and its stack trace the worker's
    // files. The span says that the step failed and with what kind of error, not the message.
    // The fused browser step meets the first 500 and answers where it stopped (not a failure); the
    // ordinary execute step meets the second.
    const jobId = `J${100000 + Math.floor(Math.random() * 900000)}`;
    await demo('/__demo/faults', { host: 'jobs.example.test', path_prefix: '/jobs/', status: 500, times: 2 });
    try {
      const failing = await query(org.api_key, { api: '@jobs', operation: 'get_job', input: { job_id: jobId } }, { 'idempotency-key': `tracing-fail-${jobId}` }, base);
      expect(failing.status, failing.text).toBe(404);
    } finally {
      await demo('/__demo/reset');
    }
    const failedSpans = await until(
      async () => {
        const failed = traced.spans().filter((s) => s.name.startsWith('RunActivity:') && s.status?.code === 2);
        // Both attempts: the 500 (a retryable failure) and the site's 404 (not_found).
        return failed.length >= 2 && failed;
      },
      90_000,
      300,
    );
    for (const s of failedSpans) {
      const events = s.events ?? [];
      const exception = events.find((e) => e.name === 'exception');
      expect(exception, `${s.name} records its failure`).toBeDefined();
      expect(exception!.attributes.map((a) => a.key)).toContain('exception.type');
    }
    const sentAfter = traced.bodies.join('\n');
    expect(sentAfter.includes(jobId), 'exported spans contain the input of a failed step').toBe(false);
    expect(sentAfter.includes('The website returned'), 'exported spans contain a failure message').toBe(false);
    expect(/activities\/\S+\.ts/.test(sentAfter), 'exported spans contain a stack trace').toBe(false);

    // Positive control for the "off" test below: tracing on loads the SDK in both processes.
    expect((await stopAndListModules(api, 'on-api.json')).some((m) => SDK_MODULES.test(m))).toBe(true);
    expect((await stopAndListModules(worker, 'on-worker.json')).some((m) => SDK_MODULES.test(m))).toBe(true);
  });
});

describe('tracing off (the default)', () => {
  it('sends nothing and loads no OpenTelemetry SDK, even with an OTLP endpoint configured', async () => {
    // OTEL_TRACES_EXPORTER empty is unset (the children inherit this process's environment).
    const { api, worker, base } = await startPair('off', { OTEL_TRACES_EXPORTER: '', OTEL_EXPORTER_OTLP_ENDPOINT: untraced.url, OTEL_BSP_SCHEDULE_DELAY: '200' });
    if (!tracingSettings().enabled) expect(worker.output()).not.toContain('bundling the workflows now'); // the prebuilt, untraced bundle fits
    const org = await newOrg(50);
    const res = await query(org.api_key, weather, {}, base);
    expect(res.status, res.text).toBe(200);
    // After SIGTERM each process has flushed whatever it held and exited: nothing can come later.
    const apiModules = await stopAndListModules(api, 'off-api.json');
    const workerModules = await stopAndListModules(worker, 'off-worker.json');
    expect(untraced.bodies).toEqual([]);
    expect(apiModules.filter((m) => SDK_MODULES.test(m))).toEqual([]);
    expect(workerModules.filter((m) => SDK_MODULES.test(m))).toEqual([]);
    expect(apiModules.some((m) => m.includes('node_modules/fastify/'))).toBe(true); // the list is real
  });
});

describe('settings (pure)', () => {
  it('is on only when OTEL_TRACES_EXPORTER names an exporter and the SDK is not disabled', () => {
    expect(tracingSettings({})).toEqual({ enabled: false, exporters: [] });
    expect(tracingSettings({ OTEL_EXPORTER_OTLP_ENDPOINT: 'http://x' })).toEqual({ enabled: false, exporters: [] });
    expect(tracingSettings({ OTEL_TRACES_EXPORTER: 'none' })).toEqual({ enabled: false, exporters: [] });
    expect(tracingSettings({ OTEL_TRACES_EXPORTER: 'otlp' })).toEqual({ enabled: true, exporters: ['otlp'] });
    expect(tracingSettings({ OTEL_TRACES_EXPORTER: ' OTLP , console,otlp' })).toEqual({ enabled: true, exporters: ['otlp', 'console'] });
    expect(tracingSettings({ OTEL_TRACES_EXPORTER: 'otlp', OTEL_SDK_DISABLED: 'true' })).toEqual({ enabled: false, exporters: [] });
    expect(tracingSettings({ OTEL_TRACES_EXPORTER: 'otlp', OTEL_SDK_DISABLED: 'false' })).toEqual({ enabled: true, exporters: ['otlp'] });
  });

  it('refuses exporters and protocols it cannot honour instead of tracing nothing', () => {
    expect(() => tracingSettings({ OTEL_TRACES_EXPORTER: 'zipkin' })).toThrow(/zipkin is not supported/);
    expect(() => tracingSettings({ OTEL_TRACES_EXPORTER: 'otlp', OTEL_EXPORTER_OTLP_TRACES_PROTOCOL: 'grpc' })).toThrow(/http\/json/);
    expect(() => tracingSettings({ OTEL_TRACES_EXPORTER: 'otlp', OTEL_EXPORTER_OTLP_PROTOCOL: 'http/protobuf' })).toThrow(/http\/json/);
    // The traces-specific variable wins over the general one.
    expect(tracingSettings({ OTEL_TRACES_EXPORTER: 'otlp', OTEL_EXPORTER_OTLP_TRACES_PROTOCOL: 'http/json', OTEL_EXPORTER_OTLP_PROTOCOL: 'grpc' }).enabled).toBe(true);
    expect(tracingSettings({ OTEL_TRACES_EXPORTER: 'console', OTEL_EXPORTER_OTLP_PROTOCOL: 'grpc' }).enabled).toBe(true);
  });

  it('keeps paths without query strings and only the origin of outgoing URLs', () => {
    expect(pathOnly('/v1/catalog?token=x')).toBe('/v1/catalog');
    expect(pathOnly('/a#b')).toBe('/a');
    expect(pathOnly('?x')).toBe('/');
    expect(pathOnly(undefined)).toBe('/');
    expect(originOnly('https://site.example:8443/p/London?key=1')).toBe('https://site.example:8443');
    expect(originOnly('not a url')).toBeUndefined();
    expect(isUntracedPath('/readyz?x=1')).toBe(true);
    expect(isUntracedPath('http://site.example/page')).toBe(true); // a proxy request
    expect(isUntracedPath('/v1/query')).toBe(false);
  });
});
