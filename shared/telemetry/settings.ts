// Whether this process traces, read from the standard OpenTelemetry variables. Pure: it imports no
// OpenTelemetry package, so a process with tracing off loads none of them (tracing.ts imports the
// SDK only after this says "on").
//
// "On" means OTEL_TRACES_EXPORTER names an exporter (otlp, console, or both comma-separated) and
// OTEL_SDK_DISABLED is not "true". Unlike the OpenTelemetry default (otlp), unset means off: a
// service that nobody configured sends nothing anywhere.

export type TraceExporterName = 'otlp' | 'console';

export interface TracingSettings {
  enabled: boolean;
  exporters: TraceExporterName[];
}

export class TracingSettingsError extends Error {}

const EXPORTERS = new Set(['otlp', 'console', 'none']);
// The installed exporter (@opentelemetry/exporter-trace-otlp-http 0.57) speaks OTLP/HTTP with JSON
// bodies only; a collector told to expect protobuf or gRPC would reject every batch, so say so at start.
const PROTOCOLS = new Set(['http/json']);

export function tracingSettings(env: NodeJS.ProcessEnv = process.env): TracingSettings {
  const raw = (env.OTEL_TRACES_EXPORTER ?? '').trim().toLowerCase();
  const names = raw === '' ? [] : raw.split(',').map((s) => s.trim());
  const unknown = names.filter((n) => !EXPORTERS.has(n));
  if (unknown.length) {
    throw new TracingSettingsError(`OTEL_TRACES_EXPORTER=${env.OTEL_TRACES_EXPORTER}: ${unknown.join(', ')} is not supported here (otlp, console or none).`);
  }
  const exporters = [...new Set(names.filter((n): n is TraceExporterName => n !== 'none'))];
  const disabled = (env.OTEL_SDK_DISABLED ?? '').trim().toLowerCase() === 'true';
  const enabled = exporters.length > 0 && !disabled;
  if (enabled && exporters.includes('otlp')) {
    for (const name of ['OTEL_EXPORTER_OTLP_TRACES_PROTOCOL', 'OTEL_EXPORTER_OTLP_PROTOCOL'] as const) {
      const value = env[name]?.trim();
      if (value && !PROTOCOLS.has(value)) {
        throw new TracingSettingsError(`${name}=${value} is not supported: this service exports traces as OTLP/HTTP with JSON bodies (http/json).`);
      }
      if (value) break; // the traces-specific variable wins over the general one
    }
  }
  return { enabled, exporters: enabled ? exporters : [] };
}
