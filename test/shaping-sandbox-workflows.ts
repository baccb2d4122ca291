// Workflows for test/shaping-sandbox.test.ts only: shapeOutput run inside Temporal's real workflow
// sandbox with specs that never passed validation, and probes of the sandbox's Object.prototype.
import { shapeOutput } from '../shared/format/shape.ts';
import type { ResponseSpec } from '../shared/schemas/query.ts';

const protoKeys = () => Object.getOwnPropertyNames(Object.prototype).sort();

export async function shapeUnvalidated(output: unknown, specs: unknown[]): Promise<{ results: unknown[]; protoKeys: string[] }> {
  const results = specs.map((s) => shapeOutput(output, s as ResponseSpec));
  return { results, protoKeys: protoKeys() };
}

/** What a later workflow on the same worker sees on a fresh object. */
export async function probePrototype(): Promise<{ protoKeys: string[]; seen: Record<string, unknown> }> {
  const probe: Record<string, unknown> = {};
  return { protoKeys: protoKeys(), seen: { polluted: probe.polluted, response: probe.response, x: probe.x, canary: probe.shapingCanary } };
}

/** The control: a write through __proto__ (what the old shaping did) is seen by later workflows. */
export async function polluteOnPurpose(set: boolean): Promise<void> {
  const target = Object.getPrototypeOf({}) as Record<string, unknown>;
  if (set) target.shapingCanary = 'visible to every later workflow';
  else delete target.shapingCanary;
}
