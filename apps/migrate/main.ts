// `npm run migrate`: apply pending migrations to DATABASE_URL and exit. The deploy step that runs
// before API and workers roll (the Helm chart's pre-install/pre-upgrade Job), so schema changes
// never race a running process; safe to repeat, and safe beside an API that migrates (advisory lock).
import { loadConfig } from '../../shared/config.ts';
import { migrate } from '../../shared/db/migrate.ts';

const config = loadConfig();
if (!config.DATABASE_URL) {
  console.error('npm run migrate needs DATABASE_URL.');
  process.exit(1);
}
try {
  await migrate(config.DATABASE_URL);
  console.log(JSON.stringify({ event: 'migrations_applied', pid: process.pid }));
} catch (err) {
  // The message only: a driver error may carry the connection string's parts in its stack.
  console.error(JSON.stringify({ event: 'migrations_failed', error: err instanceof Error ? err.message : String(err) }));
  process.exit(1);
}
