// Standalone demo sites: PORT env (default 0 = free port), HOST env (default 127.0.0.1).
import { startDemoSites } from './server.ts';

const sites = await startDemoSites({ port: Number(process.env.PORT ?? 0), host: process.env.HOST || undefined });
console.log(`demo sites listening on ${sites.origin}`);
for (const h of sites.hosts) console.log(`  http://${h}/  ->  ${sites.hostMap[h]}`);
console.log(`use as HTTP proxy: ${sites.origin}  |  control: ${sites.origin}/__demo/state`);

let stopping = false;
const stop = (sig: string) => {
  if (stopping) return;
  stopping = true;
  console.log(`received ${sig}, stopping demo sites`);
  sites.close().then(
    () => process.exit(0),
    () => process.exit(1),
  );
};
process.on('SIGTERM', () => stop('SIGTERM'));
process.on('SIGINT', () => stop('SIGINT'));
