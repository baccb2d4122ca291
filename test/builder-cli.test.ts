// `npm run admin -- workflow template|build` against the test stack: the printed template builds
// as is, the build prints the version and its charge, and a refusal exits non-zero with JSON.
import { spawn } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import fs from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, describe, expect, it } from 'vitest';
import { definitionIssues } from '../shared/builder/index.ts';
import { balanceOf, closeDb, db, newOrg, query, stack } from './helpers/stack.ts';

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
const dirs: string[] = [];
afterAll(async () => {
  await closeDb();
  for (const d of dirs) await fs.rm(d, { recursive: true, force: true });
});

async function admin(args: string[]): Promise<{ code: number | null; json: any; stdout: string }> {
  const s = stack();
  const proc = spawn(process.execPath, ['--import', 'tsx', 'apps/admin/main.ts', ...args], {
    cwd: ROOT,
    env: { ...process.env, DATABASE_URL: s.databaseUrl, TEMPORAL_ADDRESS: s.temporalAddress, TEMPORAL_TASK_QUEUE: s.taskQueue, LOG_LEVEL: 'warn' },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let stdout = '';
  proc.stdout.on('data', (c: Buffer) => (stdout += c.toString()));
  proc.stderr.resume();
  const code = await new Promise<number | null>((r) => proc.once('exit', r));
  return { code, json: stdout.trim() ? JSON.parse(stdout.trim().split('\n').pop()!) : undefined, stdout };
}

async function writeDefinition(def: unknown): Promise<string> {
  const dir = await fs.mkdtemp(path.join(os.tmpdir(), 'wqs-builder-'));
  dirs.push(dir);
  const file = path.join(dir, 'definition.json');
  await fs.writeFile(file, JSON.stringify(def, null, 2));
  return file;
}

describe('admin workflow commands', () => {
  it('template prints a valid definition; build tests and publishes it privately, then shared', async () => {
    const t = await admin(['workflow', 'template']);
    expect(t.code).toBe(0);
    expect(definitionIssues(t.json)).toEqual([]);
    const handle = `@cli-${randomBytes(4).toString('hex')}`;
    const file = await writeDefinition({ ...t.json, handle });
    const org = await newOrg(300);

    const built = await admin(['workflow', 'build', '--org', org.org_id, '--file', file]);
    expect(built.code).toBe(0);
    expect(built.json).toMatchObject({ api: handle, version: 1, visibility: 'private', charged_credits: 100 });
    expect(built.json.results).toEqual([expect.objectContaining({ operation: 'book_price', equal: true, schema_ok: true, passed: true })]);
    expect(await balanceOf(org.org_id)).toEqual({ granted: 300, available: 200, reserved: 0, charged: 100 });
    const res = await query(org.api_key, { api: handle, operation: 'book_price', input: t.json.operations[0].examples[0].input });
    expect(res.status).toBe(200);
    expect(res.body.data.output).toEqual(t.json.operations[0].examples[0].output);

    const shared = await admin(['workflow', 'build', '--org', org.org_id, '--file', file, '--share']);
    expect(shared.code).toBe(0);
    expect(shared.json).toMatchObject({ api: handle, version: 2, visibility: 'public', charged_credits: 0 });
    expect((await balanceOf(org.org_id)).charged).toBe(101);
  });

  it('a failing example: exit 1, a JSON error with the results, nothing charged or published', async () => {
    const t = await admin(['workflow', 'template']);
    const def = { ...t.json, handle: `@cli-bad-${randomBytes(4).toString('hex')}` };
    def.operations[0].examples[0].output.title = 'Not the title';
    const org = await newOrg(300);
    const r = await admin(['workflow', 'build', '--org', org.org_id, '--file', await writeDefinition(def)]);
    expect(r.code).toBe(1);
    expect(r.json).toMatchObject({ success: false, error: { code: 'publish_refused', status: 409, details: { reason: 'examples_failed' } } });
    expect(r.json.results[0]).toMatchObject({ equal: false, passed: false, expected: { title: 'Not the title' }, output: { title: 'Murder on the Night Ferry' } });
    expect(await balanceOf(org.org_id)).toEqual({ granted: 300, available: 300, reserved: 0, charged: 0 });
    expect((await db().query('SELECT count(*)::int AS n FROM apis WHERE handle = $1', [def.handle])).rows[0].n).toBe(0);

    const missing = await admin(['workflow', 'build', '--org', org.org_id, '--file', '/nonexistent/definition.json']);
    expect(missing.code).toBe(1);
    expect(missing.json.error).toMatchObject({ code: 'invalid_input', param: 'file' });
  });
});
