// `npm run build:workflows [-- <out file>]`: bundle the workflow code once, for workers started
// with WORKFLOW_BUNDLE_PATH (production images, test runs that start many workers).
import fs from 'node:fs/promises';
import path from 'node:path';
import { workflowBundle } from '../apps/worker/worker.ts';
import { workflowTracingModules } from '../shared/telemetry/tracing.ts';

/** With OTEL_TRACES_EXPORTER set the bundle holds the tracing interceptors, as workers with it set need. */
export async function writeWorkflowBundle(out: string, env: NodeJS.ProcessEnv = process.env): Promise<string> {
  const bundle = await workflowBundle(workflowTracingModules(env));
  await fs.mkdir(path.dirname(out), { recursive: true });
  await fs.writeFile(out, bundle.code);
  return out;
}

if (import.meta.url === `file://${process.argv[1]}`) {
  const out = path.resolve(process.argv[2] ?? 'dist/workflow-bundle.js');
  await writeWorkflowBundle(out);
  console.log(JSON.stringify({ event: 'workflow_bundle_written', path: out }));
}
