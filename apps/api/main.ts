// `npm run api`: the API alone, against configured PostgreSQL and Temporal.
import { loadConfig } from '../../shared/config.ts';
import { migrate } from '../../shared/db/migrate.ts';
import { startApi } from './server.ts';

const config = loadConfig();
if (!config.DATABASE_URL || !config.TEMPORAL_ADDRESS) {
  console.error('npm run api needs DATABASE_URL and TEMPORAL_ADDRESS (use `npm start` for the embedded defaults).');
  process.exit(1);
}
// Migrations run at start (advisory-locked, so several API processes may start at once) unless
// MIGRATE_ON_START=false hands them to a separate step. WQS_SKIP_MIGRATIONS is the tests' older switch.
if (config.MIGRATE_ON_START && !process.env.WQS_SKIP_MIGRATIONS) await migrate(config.DATABASE_URL);
const api = await startApi({ ...config, DATABASE_URL: config.DATABASE_URL, TEMPORAL_ADDRESS: config.TEMPORAL_ADDRESS });
console.log(JSON.stringify({ event: 'api_started', url: api.url, pid: process.pid }));
for (const sig of ['SIGTERM', 'SIGINT'] as const) {
  process.once(sig, () => {
    void api.close().then(() => process.exit(0));
  });
}
