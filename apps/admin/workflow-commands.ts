// `npm run admin -- workflow template|build`: the console's build, scriptable. `template` prints a
// complete, working definition; `build` test-runs a definition file through Temporal and publishes
// it for an organization. Both print one JSON object; a refusal exits non-zero with a JSON error.
import fs from 'node:fs/promises';
import path from 'node:path';
import { Client, Connection } from '@temporalio/client';
import { browserTaskQueue, type Config } from '../../shared/config.ts';
import type { Db } from '../../shared/db/pool.ts';
import { ServiceError, errorEnvelope } from '../../shared/errors.ts';
import { createDataConverter } from '../../shared/temporal/data-converter.ts';
import { publish, testRun, workflowTemplate } from '../../shared/builder/index.ts';

export const WORKFLOW_USAGE = `  npm run admin -- workflow template                       (a working definition, JSON, to edit)
  npm run admin -- workflow build --org <org_id> --file <definition.json> [--share]
      (test-runs every example, then publishes: private costs 100 credits, --share is free and public)`;

/** The running `npm start`'s Temporal when TEMPORAL_ADDRESS is not set. */
async function temporalAddress(config: Config): Promise<string> {
  if (config.TEMPORAL_ADDRESS) return config.TEMPORAL_ADDRESS;
  try {
    const runtime = JSON.parse(await fs.readFile(path.join(config.dataDir, 'runtime.json'), 'utf8')) as { temporal_address?: string };
    if (runtime.temporal_address) return runtime.temporal_address;
  } catch {
    /* not running */
  }
  throw new ServiceError('engine_unavailable', 'No Temporal to run the test on: start the service (npm start) or set TEMPORAL_ADDRESS');
}

async function readDefinition(file: string): Promise<unknown> {
  const text = await fs.readFile(file, 'utf8').catch(() => {
    throw new ServiceError('invalid_input', `Cannot read ${file}`, { param: 'file' });
  });
  try {
    return JSON.parse(text);
  } catch (err) {
    throw new ServiceError('invalid_input', `${file} is not JSON: ${err instanceof Error ? err.message : ''}`, { param: 'file' });
  }
}

async function build(db: Db, config: Config, orgId: string, file: string, share: boolean) {
  const definition = await readDefinition(file);
  const connection = await Connection.connect({ address: await temporalAddress(config), connectTimeout: '5 seconds' });
  try {
    const temporal = new Client({ connection, namespace: config.TEMPORAL_NAMESPACE, dataConverter: await createDataConverter(config) });
    const org = await db.query('SELECT 1 FROM organizations WHERE id = $1', [orgId]);
    if (!org.rowCount) throw new ServiceError('invalid_input', `No organization ${orgId}`, { param: 'org' });
    const run = await testRun({ db, temporal, taskQueue: config.TEMPORAL_TASK_QUEUE, browserTaskQueue: browserTaskQueue(config) }, orgId, definition);
    if (!run.passed) {
      return {
        code: 1,
        out: {
          ...errorEnvelope('publish_refused', { message: 'Not published: some examples did not pass the test run', details: { reason: 'examples_failed', test_run_id: run.test_run_id } }),
          results: run.results,
        },
      };
    }
    const published = await publish(db, orgId, definition, { share });
    return {
      code: 0,
      out: { api: published.api, version: published.version, visibility: published.visibility, charged_credits: published.charged_credits, unchanged: published.unchanged, test_run_id: run.test_run_id, results: run.results },
    };
  } finally {
    await connection.close().catch(() => {});
  }
}

/** Runs `workflow <verb>`; the caller prints `out` as JSON and exits with `code`. */
export async function workflowCommand(
  verb: string | undefined,
  flags: { org?: string; file?: string; share?: boolean },
  deps: { db: Db; config: Config },
): Promise<{ code: number; out: unknown }> {
  try {
    if (verb === 'template') return { code: 0, out: workflowTemplate() };
    if (verb === 'build') {
      if (!flags.org) throw new ServiceError('invalid_input', '--org is required', { param: 'org' });
      if (!flags.file) throw new ServiceError('invalid_input', '--file is required', { param: 'file' });
      return await build(deps.db, deps.config, flags.org, flags.file, flags.share === true);
    }
    throw new ServiceError('invalid_input', `unknown command "workflow ${verb ?? ''}"`);
  } catch (err) {
    if (err instanceof ServiceError) return { code: 1, out: errorEnvelope(err.code, { message: err.message, param: err.param, details: err.details }) };
    throw err;
  }
}
