// `npm run admin -- <noun> <verb> [--flags]`: operator commands against the service's database
// (embedded via DATA_DIR, or DATABASE_URL). Each prints one JSON object on stdout.
import fs from 'node:fs/promises';
import path from 'node:path';
import { parseArgs } from 'node:util';
import { loadConfig } from '../../shared/config.ts';
import { createPool } from '../../shared/db/pool.ts';
import { migrate } from '../../shared/db/migrate.ts';
import { createKey, createOrg, grant, revokeKey } from '../../shared/db/orgs.ts';
import { startEmbeddedPostgres } from '../../shared/infra/embedded-postgres.ts';

const USAGE = `usage:
  npm run admin -- org create --name <name> --credits <n>
  npm run admin -- key create --org <org_id> [--expires-at <ISO date>]
  npm run admin -- key revoke --key <api_key>
  npm run admin -- credits grant --org <org_id> --credits <n>`;

const { positionals, values } = parseArgs({
  allowPositionals: true,
  options: {
    name: { type: 'string' },
    credits: { type: 'string' },
    org: { type: 'string' },
    key: { type: 'string' },
    'expires-at': { type: 'string' },
  },
});

function fail(message: string): never {
  console.error(`admin: ${message}\n${USAGE}`);
  process.exit(2);
}

function need(name: keyof typeof values): string {
  const v = values[name];
  if (typeof v !== 'string' || v === '') fail(`--${name} is required`);
  return v;
}

function credits(): number {
  const n = Number(need('credits'));
  if (!Number.isInteger(n) || n < 0) fail('--credits must be a non-negative integer');
  return n;
}

/** While `npm start` runs on this DATA_DIR, use its PostgreSQL instead of starting the embedded one. */
async function runningServiceDatabase(dataDir: string): Promise<string | undefined> {
  try {
    const runtime = JSON.parse(await fs.readFile(path.join(dataDir, 'runtime.json'), 'utf8')) as { database_url?: string; pid?: number };
    if (runtime.pid && runtime.database_url) {
      process.kill(runtime.pid, 0);
      return runtime.database_url;
    }
  } catch {
    /* not running */
  }
  return undefined;
}

const config = loadConfig();
const shared = config.DATABASE_URL ?? (await runningServiceDatabase(config.dataDir));
const pg = shared ? null : await startEmbeddedPostgres({ dataDir: config.dataDir });
const databaseUrl = shared ?? pg!.databaseUrl;
const db = createPool(databaseUrl, 2);
let code = 0;
try {
  await migrate(databaseUrl);
  const [noun, verb] = positionals;
  let out: unknown;
  switch (`${noun} ${verb}`) {
    case 'org create':
      out = await createOrg(db, need('name'), credits());
      break;
    case 'key create': {
      const exp = values['expires-at'];
      const date = exp ? new Date(exp) : null;
      if (date && Number.isNaN(date.getTime())) fail('--expires-at must be an ISO date');
      out = await createKey(db, need('org'), date);
      break;
    }
    case 'key revoke':
      out = await revokeKey(db, need('key'));
      break;
    case 'credits grant':
      out = await grant(db, need('org'), credits());
      break;
    default:
      fail(`unknown command "${positionals.join(' ')}"`);
  }
  console.log(JSON.stringify(out));
} catch (err) {
  console.error(JSON.stringify({ error: err instanceof Error ? err.message : String(err) }));
  code = 1;
} finally {
  await db.end();
  await pg?.stop();
}
process.exit(code);
