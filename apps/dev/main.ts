// `npm start`: the whole service on its embedded defaults — PostgreSQL, Temporal dev server,
// demo sites, worker and API in one command. With DATABASE_URL / TEMPORAL_ADDRESS set, those
// are used and nothing embedded is started.
import fs from 'node:fs/promises';
import { loadConfig } from '../../shared/config.ts';
import { startDevStack } from './stack.ts';

const config = loadConfig();
const started = Date.now();
const log = (event: string, fields: Record<string, unknown> = {}) => console.error(JSON.stringify({ event, ...fields }));
const runtimeFile = `${config.dataDir}/runtime.json`;
// Registered before anything starts, so a signal during start-up still stops what is running.
const stops: Array<() => Promise<void>> = [];
let stopping = false;

async function shutdown(code: number) {
  if (stopping) return;
  stopping = true;
  log('stopping');
  await fs.rm(runtimeFile, { force: true });
  for (const stop of stops.splice(0).reverse()) await stop().catch((err) => log('stop_failed', { error: String(err) }));
  log('stopped');
  process.exit(code);
}
// `on`, not `once`: a `once` listener is gone by the time shared/infra/process-guard.ts's own
// listener runs, which then believes nobody handles the signal, stops PostgreSQL and Temporal under
// the draining API and re-raises the signal (the process died by SIGTERM, not exit 0: a race Node 24
// loses). Repeated signals are ignored: npm forwards a terminal's Ctrl-C that the child also got.
for (const sig of ['SIGTERM', 'SIGINT', 'SIGHUP'] as const) process.on(sig, () => void shutdown(0));

try {
  const stack = await startDevStack(config, stops, { temporalUi: config.TEMPORAL_UI_ENABLED });
  const runtime = {
    base_url: stack.url,
    database_url: stack.databaseUrl,
    temporal_address: stack.temporalAddress,
    temporal_ui: stack.temporalUiUrl ?? null,
    demo_sites: stack.sites.origin,
    org_id: stack.orgId,
    pid: process.pid,
  };
  // Every query is a workflow: the UI shows each one's history (external Temporal: its own UI).
  const ui = stack.temporalUiUrl === undefined ? '' : `\n  Temporal:  ${stack.temporalUiUrl}   (Web UI: every query is a workflow)`;
  const metrics = `\n  Metrics:   ${stack.url}/metrics${config.WORKER_METRICS_ADDRESS ? `   (worker: http://${config.WORKER_METRICS_ADDRESS}/metrics)` : ''}`;
  await fs.writeFile(runtimeFile, JSON.stringify(runtime, null, 2));
  // The banner first: whoever waits for the ready event may read the key from stdout at once.
  console.log(`Workflow Query Service is running.

  Base URL:  ${stack.url}${ui}${config.METRICS_ENABLED ? metrics : ''}
  API key:   ${stack.apiKey}   (also in ${config.dataDir}/dev-api-key)
  Console:   ${stack.url}/console   sign in as ${stack.consoleUser.email} / ${stack.consoleUser.password}   (password also in ${stack.consoleUser.passwordFile})

  Try:
    curl -s ${stack.url}/v1/query -H "Authorization: Bearer ${stack.apiKey}" -H 'Content-Type: application/json' \\
      -d '{"api":"@weather","operation":"current_weather","input":{"city":"London"}}'
`);
  log('ready', { seconds: (Date.now() - started) / 1000 });
  void stack.workerDone.catch((err) => {
    log('worker_failed', { error: String(err) });
    void shutdown(1);
  });
} catch (err) {
  log('start_failed', { error: err instanceof Error ? err.message : String(err) });
  await shutdown(1);
}
