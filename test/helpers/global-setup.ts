// One real stack for the test run: embedded PostgreSQL, the Temporal dev server, the demo sites,
// and the API and worker as child processes. Tests reach it over HTTP and PostgreSQL.
import fs from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import type { TestProject } from 'vitest/node';
import { startEmbeddedPostgres } from '../../shared/infra/embedded-postgres.ts';
import { startTemporalDevServer } from '../../shared/infra/temporal-dev-server.ts';
import { createPool } from '../../shared/db/pool.ts';
import { prepareDatabase } from '../../shared/db/seed.ts';
import { startDemoSites } from '../../apps/demo-sites/server.ts';
import { startApiProcess, startWorkerProcess } from './processes.ts';
import { writeWorkflowBundle } from '../../scripts/bundle-workflows.ts';
import type { StackInfo } from './stack.ts';

export default async function setup(project: TestProject) {
  const dataDir = await fs.mkdtemp(path.join(os.tmpdir(), 'wqs-test-'));
  const [pg, temporal, sites] = await Promise.all([
    startEmbeddedPostgres({ dataDir }),
    startTemporalDevServer({ dataDir }),
    startDemoSites({ port: 0 }),
  ]);
  const db = createPool(pg.databaseUrl, 2);
  const [workflowBundlePath] = await Promise.all([writeWorkflowBundle(path.join(dataDir, 'workflow-bundle.js')), prepareDatabase(pg.databaseUrl, db)]);
  await db.end();
  const pair = {
    databaseUrl: pg.databaseUrl,
    temporalAddress: temporal.address,
    hostMap: sites.hostMap,
    taskQueue: 'wqs-test',
    workflowBundlePath,
    env: { HEALTH_CHECKS_ENABLED: 'true' },
  };
  const [api, worker] = await Promise.all([startApiProcess(pair), startWorkerProcess(pair)]);
  const info: StackInfo = {
    baseUrl: String(api.started.url),
    databaseUrl: pg.databaseUrl,
    temporalAddress: temporal.address,
    demoOrigin: sites.origin,
    hostMap: sites.hostMap,
    taskQueue: pair.taskQueue,
    workflowBundlePath,
    dataDir,
  };
  project.provide('stack', info);
  return async () => {
    await api.kill('SIGTERM');
    await worker.kill('SIGTERM');
    await sites.close();
    await temporal.stop();
    await pg.stop();
    await fs.rm(dataDir, { recursive: true, force: true }).catch(() => {});
  };
}
