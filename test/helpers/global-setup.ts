// One real stack for the test run: embedded PostgreSQL, the Temporal dev server, the demo sites,
// and the API and worker as child processes. Tests reach it over HTTP and PostgreSQL.
import { randomBytes } from 'node:crypto';
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
import { STACK_HEALTH_INTERVAL_SECONDS, type StackInfo } from './stack.ts';

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
    // The shared worker owns the health Schedule; its interval is long so the only runs are the
    // first one (awaited below) and those the health tests trigger.
    // The codec endpoint is on (with a token no test needs) so test/routes.test.ts checks its routes too.
    env: { HEALTH_CHECKS_ENABLED: 'true', HEALTH_CHECK_INTERVAL_SECONDS: String(STACK_HEALTH_INTERVAL_SECONDS), CODEC_ENDPOINT_TOKEN: randomBytes(32).toString('hex') },
  };
  const [api, worker] = await Promise.all([startApiProcess(pair), startWorkerProcess(pair)]);
  // Let the first health run finish before tests start, so it cannot consume a fault a test sets.
  const check = createPool(pg.databaseUrl, 1);
  for (const end = Date.now() + 120_000; Date.now() < end; await new Promise((r) => setTimeout(r, 500))) {
    const r = await check.query(`SELECT count(*)::int AS n FROM operations WHERE health_status = 'unknown'`);
    if (r.rows[0].n === 0) break;
  }
  await check.end();
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
