// `npm run cluster`: the production topology on this machine (apps/cluster/README.md). Data stays in
// CLUSTER_DATA_DIR (default .data-cluster) across restarts; SIGTERM or Ctrl-C stops every part.
import { startCluster } from './cluster.ts';

const log = (event: string, fields: Record<string, unknown> = {}) => console.error(JSON.stringify({ event, ...fields }));
const started = Date.now();
let stop: (() => Promise<void>) | undefined;
let stopping = false;
async function shutdown(code: number) {
  if (stopping) return;
  stopping = true;
  log('stopping');
  await stop?.().catch((err) => log('stop_failed', { error: String(err) }));
  log('stopped');
  process.exit(code);
}
// `on`, not `once`: process-guard stays out of the way only while another listener exists.
for (const sig of ['SIGTERM', 'SIGINT', 'SIGHUP'] as const) process.on(sig, () => void shutdown(0));

try {
  const cluster = await startCluster({ dataDir: process.env.CLUSTER_DATA_DIR || '.data-cluster', log });
  stop = cluster.stop;
  if (stopping) await cluster.stop();
  const pids = cluster.supervisor.names().map((n) => `${n}=${cluster.supervisor.pidOf(n)}`).join(' ');
  console.log(`Workflow Query Service cluster is running.

  API:          ${cluster.apiUrls.join('   ')}
  API key:      ${cluster.devApiKey}   (dev organization)
  Temporal:     ${cluster.temporalAddress}   (Temporal server on PostgreSQL; metrics ${cluster.temporalMetricsUrl})
  PostgreSQL:   ${cluster.databaseUrl}
  Demo sites:   ${cluster.sites.origin}
  Logs:         ${cluster.logDir}
  Processes:    ${pids}

  Try:
    curl -s ${cluster.apiUrls[0]}/v1/query -H "Authorization: Bearer ${cluster.devApiKey}" -H 'Content-Type: application/json' \\
      -d '{"api":"@weather","operation":"current_weather","input":{"city":"London"}}'
`);
  log('ready', { seconds: (Date.now() - started) / 1000 });
} catch (err) {
  log('start_failed', { error: err instanceof Error ? err.message : String(err) });
  await shutdown(1);
}
