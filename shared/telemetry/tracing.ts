// OpenTelemetry traces of one process (docs/tracing.md): one trace per query, from the API's server
// span through the workflow start, the workflow and its activities, to the site request.
// Off unless OTEL_TRACES_EXPORTER names an exporter (settings.ts). Off, this module imports no
// OpenTelemetry package at all (only types, erased), so tracing costs nothing when unused.
import { createRequire } from 'node:module';
import type { IncomingMessage } from 'node:http';
import type { Resource } from '@opentelemetry/resources';
import type { SpanExporter, SpanProcessor } from '@opentelemetry/sdk-trace-base';
import type { WorkflowClientInterceptor } from '@temporalio/client';
import type { WorkerOptions } from '@temporalio/worker';
import type { WorkflowInfo } from '@temporalio/workflow';
import { isUntracedPath, originOnly, pathOnly, withoutErrorText } from './redact.ts';
import { tracingSettings, type TraceExporterName } from './settings.ts';

export interface Tracing {
  exporters: TraceExporterName[];
  resource: Resource;
  spanProcessor: SpanProcessor;
  /** For the API's Temporal client: a span per workflow start, its context in the workflow's headers. */
  workflowClientInterceptors: WorkflowClientInterceptor[];
  /** For the worker: activity spans (parented by the workflow's headers) and the sink that exports
   *  the spans the workflow sandbox makes. */
  workerOptions: Required<Pick<WorkerOptions, 'interceptors' | 'sinks'>>;
  /** Modules the workflow bundle must contain for workflow spans (bundleWorkflowCode). */
  workflowInterceptorModules: string[];
  /** Server spans for incoming HTTP requests (the API). Idempotent. */
  traceIncomingHttp(): void;
  /** Sends what is buffered; called when a process stops. */
  flush(): Promise<void>;
}

const require = createRequire(import.meta.url);

/** The workflow interceptor module for the bundle when tracing is on, else none (resolved, not loaded). */
export function workflowTracingModules(env: NodeJS.ProcessEnv = process.env): string[] {
  return tracingSettings(env).enabled ? [require.resolve('@temporalio/interceptors-opentelemetry/lib/workflow-interceptors')] : [];
}

let started: Promise<Tracing | undefined> | undefined;

/** The exporter, sent each span without its error's message and stack trace. */
function errorTextless(exporter: SpanExporter): SpanExporter {
  const out: SpanExporter = {
    export: (spans, done) => exporter.export(spans.map(withoutErrorText), done),
    shutdown: () => exporter.shutdown(),
  };
  if (exporter.forceFlush) out.forceFlush = () => exporter.forceFlush!();
  return out;
}

/**
 * Sets up tracing once per process (the API and the worker share it under `npm start`); undefined
 * when tracing is off. `serviceName` is the default for OTEL_SERVICE_NAME. Throws on settings it
 * cannot honour, so a misconfigured process stops at start instead of tracing nothing.
 */
export function startTracing(serviceName: string, env: NodeJS.ProcessEnv = process.env): Promise<Tracing | undefined> {
  const settings = tracingSettings(env); // synchronous: a bad value fails every caller, not just the first
  started ??= settings.enabled ? setUp(serviceName, settings.exporters) : Promise.resolve(undefined);
  return started;
}

async function setUp(serviceName: string, exporters: TraceExporterName[]): Promise<Tracing> {
  const [node, otlp, resources, instrumentation, httpInstrumentation, undiciInstrumentation, temporal] = await Promise.all([
    import('@opentelemetry/sdk-trace-node'),
    import('@opentelemetry/exporter-trace-otlp-http'),
    import('@opentelemetry/resources'),
    import('@opentelemetry/instrumentation'),
    import('@opentelemetry/instrumentation-http'),
    import('@opentelemetry/instrumentation-undici'),
    import('@temporalio/interceptors-opentelemetry'),
  ]);

  // Defaults, then our name, then OTEL_SERVICE_NAME / OTEL_RESOURCE_ATTRIBUTES (later wins).
  const resource = resources.Resource.default()
    .merge(new resources.Resource({ 'service.name': serviceName }))
    .merge(resources.detectResourcesSync({ detectors: [resources.envDetectorSync] }));
  // The exporter reads OTEL_EXPORTER_OTLP_[TRACES_]ENDPOINT, _HEADERS and _TIMEOUT itself; the batch
  // processor OTEL_BSP_*; the provider OTEL_TRACES_SAMPLER[_ARG] and the propagators OTEL_PROPAGATORS.
  // Every span leaves without its errors' text (redact.ts, withoutErrorText).
  const spanProcessors = exporters.map((name) =>
    name === 'otlp'
      ? new node.BatchSpanProcessor(errorTextless(new otlp.OTLPTraceExporter()))
      : new node.SimpleSpanProcessor(errorTextless(new node.ConsoleSpanExporter())),
  );
  const provider = new node.NodeTracerProvider({ resource, spanProcessors });
  provider.register(); // global provider, AsyncLocalStorage context manager, W3C propagators
  const spanProcessor = provider.getActiveSpanProcessor();

  // Site requests: the engines use undici, which reports through diagnostics_channel, so this
  // needs no patching and sees requests whichever module loaded undici first. The span keeps the
  // site's origin only: a path or query string may carry the query's input or a secret.
  instrumentation.registerInstrumentations({
    tracerProvider: provider,
    instrumentations: [
      new undiciInstrumentation.UndiciInstrumentation({
        startSpanHook: (request) => ({ 'url.full': originOnly(`${request.origin}${request.path}`) ?? request.origin, 'url.path': undefined, 'url.query': undefined }),
      }),
    ],
  });

  let httpTraced = false;
  const traceIncomingHttp = () => {
    if (httpTraced) return;
    httpTraced = true;
    instrumentation.registerInstrumentations({
      tracerProvider: provider,
      instrumentations: [
        new httpInstrumentation.HttpInstrumentation({
          // Outgoing calls are undici's (above); node:http clients here are only the browser's
          // guarded proxy, whose hops would each start a trace of their own.
          disableOutgoingRequestInstrumentation: true,
          ignoreIncomingRequestHook: (req: IncomingMessage) => isUntracedPath(req.url),
          // Keep the path, drop the query string (may hold a secret); no headers are recorded.
          startIncomingSpanHook: (req: IncomingMessage) => ({ 'http.target': pathOnly(req.url), 'http.url': undefined }),
        }),
      ],
    });
    // The hook patches `http` when it is next required; the built-in is one object, so patching it
    // now covers servers Fastify creates later (it already required it).
    require('node:http');
  };

  // Temporal's sink copies the whole WorkflowInfo onto every workflow span (memo, search
  // attributes, last result and failure...); it gets only the fields that identify the run.
  const exporter = temporal.makeWorkflowExporter(spanProcessor, resource);
  const identifying = (info: WorkflowInfo) => ({ workflowId: info.workflowId, runId: info.runId, workflowType: info.workflowType, taskQueue: info.taskQueue, namespace: info.namespace, attempt: info.attempt }) as WorkflowInfo;
  const workflowClientInterceptors = [new temporal.OpenTelemetryWorkflowClientInterceptor()];
  const workerOptions: Tracing['workerOptions'] = {
    interceptors: {
      activity: [(ctx) => ({ inbound: new temporal.OpenTelemetryActivityInboundInterceptor(ctx), outbound: new temporal.OpenTelemetryActivityOutboundInterceptor(ctx) })],
    },
    sinks: { exporter: { export: { ...exporter.export, fn: (info, spans: Parameters<typeof exporter.export.fn>[1]) => exporter.export.fn(identifying(info), spans) } } },
  };
  return {
    exporters,
    resource,
    spanProcessor,
    workflowClientInterceptors,
    workerOptions,
    workflowInterceptorModules: workflowTracingModules({ OTEL_TRACES_EXPORTER: exporters.join(',') }),
    traceIncomingHttp,
    flush: () => provider.forceFlush(),
  };
}
