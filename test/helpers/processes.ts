// Start the API and the worker as real child processes, the way production runs them.
import { spawn, type ChildProcess } from 'node:child_process';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

export const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../..');

export interface ServiceProcess {
  proc: ChildProcess;
  /** First JSON line the process printed (api_started / worker_started). */
  started: Record<string, unknown>;
  output(): string;
  kill(signal?: NodeJS.Signals): Promise<number | null>;
}

export async function spawnService(
  entry: 'apps/api/main.ts' | 'apps/worker/main.ts' | 'apps/dev/main.ts',
  env: Record<string, string>,
  readyEvent: string,
  timeoutMs = 90_000,
): Promise<ServiceProcess> {
  const proc = spawn(process.execPath, ['--import', 'tsx', entry], {
    cwd: ROOT,
    env: { ...process.env, LOG_LEVEL: 'warn', ...env },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let out = '';
  const exited = new Promise<number | null>((resolve) => proc.once('exit', (code) => resolve(code)));
  const started = await new Promise<Record<string, unknown>>((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`${entry} did not start in ${timeoutMs} ms:\n${out}`)), timeoutMs);
    const onData = (chunk: Buffer) => {
      out += chunk.toString();
      for (const line of out.split('\n')) {
        if (!line.startsWith('{')) continue;
        try {
          const j = JSON.parse(line);
          if (j.event === readyEvent) {
            clearTimeout(timer);
            resolve(j);
            return;
          }
        } catch {
          /* partial line */
        }
      }
    };
    proc.stdout!.on('data', onData);
    proc.stderr!.on('data', (c: Buffer) => {
      out += c.toString();
      onData(Buffer.alloc(0));
    });
    void exited.then((code) => {
      clearTimeout(timer);
      reject(new Error(`${entry} exited with ${code} before starting:\n${out}`));
    });
  });
  return {
    proc,
    started,
    output: () => out,
    async kill(signal: NodeJS.Signals = 'SIGTERM') {
      if (proc.exitCode !== null || proc.signalCode !== null) return proc.exitCode;
      proc.kill(signal);
      return exited;
    },
  };
}

export interface ServicePairOptions {
  databaseUrl: string;
  temporalAddress: string;
  hostMap: Record<string, string>;
  taskQueue: string;
  /** Prebuilt workflow bundle, so each worker starts in about a second. */
  workflowBundlePath?: string;
  env?: Record<string, string>;
}

export function serviceEnv(o: ServicePairOptions): Record<string, string> {
  return {
    DATABASE_URL: o.databaseUrl,
    TEMPORAL_ADDRESS: o.temporalAddress,
    TEMPORAL_TASK_QUEUE: o.taskQueue,
    SITE_HOST_MAP: JSON.stringify(o.hostMap),
    HOST: '127.0.0.1',
    PORT: '0',
    // Pairs started by tests leave health checks to the shared stack (each would run every example).
    HEALTH_CHECKS_ENABLED: 'false',
    RECONCILE_ENABLED: 'false', // the reconciler settles every organization's rows: only tests that ask for it run one
    // Every test sends from 127.0.0.1, and many send wrong keys on purpose: the per-address bucket of
    // failed checks (30, then 30 a minute by default) is tested by files that set it themselves.
    AUTH_FAILURES_PER_ADDRESS_BURST: '1000000',
    // Keyless catalog and icon reads, 2 at once per address by default: every file reads the catalog
    // from 127.0.0.1 at once. test/keyless-reads.test.ts sets the bounds it tests.
    KEYLESS_READS_PER_ADDRESS: '1000000',
    KEYLESS_READ_WAIT_MS: '30000',
    // Prompts of one organization routed at once (8 by default, a 2 s wait): some files send bursts
    // of prompts on a loaded machine; test/org-limits.test.ts sets the bound it tests.
    PROMPT_ROUTING_WAIT_MS: '30000',
    // Likewise failed console sign-ins: 50 per address in 15 minutes by default, and the suite, run in
    // one window, makes 30 to 40 on purpose (31 counted once console-accounts ended), so one more
    // throttle test would make a later file's sign-in a 429. The per-address throttle is tested by a
    // file that sets it itself; the per-email one keeps its default (each test has its own).
    CONSOLE_SIGNIN_MAX_PER_IP: '1000000',
    // Successful console sign-ups per address and day (5 by default): tests sign up from 127.0.0.1
    // in several files; test/console-signup.test.ts sets the limit it tests.
    CONSOLE_SIGNUP_MAX_PER_IP: '1000000',
    // And OAuth registrations and token requests per address and minute (30 and 120 by default): the
    // OAuth files register and sign in many clients from 127.0.0.1, and two of them within one minute
    // went past 30. The limit itself is tested by a file that sets it.
    OAUTH_REGISTRATIONS_PER_MINUTE: '1000000',
    OAUTH_TOKEN_REQUESTS_PER_MINUTE: '1000000',
    ...(o.workflowBundlePath ? { WORKFLOW_BUNDLE_PATH: o.workflowBundlePath } : {}),
    ...o.env,
  };
}

export const startApiProcess = (o: ServicePairOptions) => spawnService('apps/api/main.ts', serviceEnv(o), 'api_started');
export const startWorkerProcess = (o: ServicePairOptions) => spawnService('apps/worker/main.ts', serviceEnv(o), 'worker_started');

/** API and worker processes of one test file; killed after each test with SIGKILL. */
export function processPool(pair: () => ServicePairOptions) {
  const live: ServiceProcess[] = [];
  return {
    async spawn(kind: 'api' | 'worker', o: ServicePairOptions = pair()) {
      const p = kind === 'api' ? await startApiProcess(o) : await startWorkerProcess(o);
      live.push(p);
      return p;
    },
    async killAll() {
      await Promise.all(live.splice(0).map((p) => p.kill('SIGKILL')));
    },
  };
}
