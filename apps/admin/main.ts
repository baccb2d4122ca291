// `npm run admin -- <noun> <verb> [--flags]`: operator commands against the service's database
// (embedded via DATA_DIR, or DATABASE_URL). Each prints one JSON object on stdout, with every
// character a terminal could act on escaped (shared/format/terminal.ts): what it prints comes from
// the database and from websites, which others wrote.
import fs from 'node:fs/promises';
import path from 'node:path';
import { parseArgs } from 'node:util';
import { loadConfig } from '../../shared/config.ts';
import { ServiceError, errorEnvelope } from '../../shared/errors.ts';
import { createPool } from '../../shared/db/pool.ts';
import { terminalJson, terminalText } from '../../shared/format/terminal.ts';
import { migrate } from '../../shared/db/migrate.ts';
import { createKey, createOrg, grant, listKeys, revokeKey, revokeKeyById } from '../../shared/db/orgs.ts';
import { ACCOUNT_USAGE, runAccountCommand } from './account-commands.ts';
import { isRole } from '../../shared/accounts/users.ts';
import { displayTextProblem } from '../../shared/accounts/display-text.ts';
import { startEmbeddedPostgres } from '../../shared/infra/embedded-postgres.ts';
import { WORKFLOW_USAGE, workflowCommand } from './workflow-commands.ts';
import { addConnection, deleteConnection, expireConnection, listConnections, loadKeyring, rekeyConnections, revokeConnection, type ConnectionKind } from '../../shared/db/connections.ts';

const USAGE = `usage:
  npm run admin -- org create --name <name> --credits <n>
  npm run admin -- key create --org <org_id> [--expires-at <ISO date>]
  npm run admin -- key list --org <org_id>              (ids, prefixes, who created them, use and revocation;
      never the keys)
  npm run admin -- key revoke --id <key_id>
  npm run admin -- key revoke --key -                   (reads the key from stdin, keeping it out of shell
      history and the process list; --key <api_key> works too)
  npm run admin -- credits grant --org <org_id> --credits <n>   (1 to 1000000000; org create takes 0 to 1000000000)
  npm run admin -- connection add --org <org_id> --kind account|access_key --name <name> --site <host> --secret '<json>'
      (--secret - reads the JSON from stdin, keeping it out of shell history; the output never shows it)
  npm run admin -- connection revoke --id <conn_id>      (disconnected: queries get auth_revoked)
  npm run admin -- connection expire --id <conn_id>      (needs a fresh sign-in: queries get auth_required)
  npm run admin -- connection list --org <org_id>
  npm run admin -- connection delete --id <conn_id>      (removes a revoked row, or one no configured key decrypts,
      secret included; a live readable one must be revoked first)
  npm run admin -- connection rekey [--org <org_id>] [--dry-run]
      (re-encrypts rows still under a CONNECTIONS_PREVIOUS_KEYS key with CONNECTIONS_ENCRYPTION_KEY, every
      organization's or one's; exit 1 when a row no configured key decrypts; docs/connections.md)
${ACCOUNT_USAGE}
${WORKFLOW_USAGE}`;

function fail(message: string): never {
  console.error(`admin: ${terminalText(message)}\n${USAGE}`);
  process.exit(2);
}

function parse() {
  try {
    return parseArgs({ allowPositionals: true, options: OPTIONS });
  } catch (e) {
    // An unknown or malformed flag: say which, with the usage, never a stack trace.
    fail((e as Error).message.split('. ')[0]!);
  }
}

const OPTIONS = {
  name: { type: 'string' },
  credits: { type: 'string' },
  org: { type: 'string' },
  key: { type: 'string' },
  'expires-at': { type: 'string' },
  id: { type: 'string' },
  kind: { type: 'string' },
  site: { type: 'string' },
  secret: { type: 'string' },
  email: { type: 'string' },
  password: { type: 'string' },
  role: { type: 'string' },
  file: { type: 'string' },
  share: { type: 'boolean' },
  'dry-run': { type: 'boolean' },
  help: { type: 'boolean', short: 'h' },
} as const;
const { positionals, values } = parse();
if (values.help) {
  console.log(USAGE);
  process.exit(0);
}

function need(name: keyof typeof values): string {
  const v = values[name];
  if (typeof v !== 'string' || v === '') fail(`--${name} is required`);
  return v;
}

async function readStdin(): Promise<string> {
  const chunks: Buffer[] = [];
  for await (const c of process.stdin) chunks.push(c as Buffer);
  return Buffer.concat(chunks).toString('utf8');
}

/** Most credits one command grants: far above any real grant, and balances stay exact integers (below 2^53) in JavaScript. */
const MAX_CREDITS = 1_000_000_000;

/**
 * `--credits`, in decimal digits only: Number() also took `0x10`, `1e3`, ` 7` and `1.0`, and
 * rounded past 2^53 (9007199254740993 granted 9007199254740992); past bigint the database refused
 * with its own text. A grant adds at least 1 (a grant of 0 was a ledger row that moved nothing).
 */
function credits(min: 0 | 1): number {
  const raw = need('credits');
  const n = /^[0-9]{1,10}$/.test(raw) ? Number(raw) : NaN;
  if (!(n >= min && n <= MAX_CREDITS)) fail(`--credits must be a whole number of credits from ${min} to ${MAX_CREDITS}, in decimal digits`);
  return n;
}

/**
 * An organization's name, as the console's sign-up takes it: trimmed, 1 to 100 characters, none of
 * them a control, direction or invisible character (its members and invitees read it).
 */
function orgName(): string {
  const name = (values.name ?? '').trim();
  if (name.length < 1 || name.length > 100) fail('--name must be 1 to 100 characters');
  const bad = displayTextProblem(name);
  if (bad) fail(`--name ${bad}`);
  return name;
}

/**
 * `--expires-at`: an ISO 8601 date (UTC midnight) or date and time with a zone, in the future.
 * `new Date()` took `1` as 2001-01-01 and `2099-02-30` as March 2nd: a key that was expired when
 * made, or a day nobody wrote.
 */
function expiresAt(): Date | null {
  const raw = values['expires-at'];
  if (raw === undefined) return null;
  const m = /^(\d{4})-(\d{2})-(\d{2})(?:T(\d{2}):(\d{2})(?::(\d{2})(?:\.\d{1,9})?)?(?:Z|[+-]\d{2}:\d{2}))?$/.exec(raw);
  const date = new Date(raw);
  const [y, mo, d, h = '0', mi = '0', sec = '0'] = (m ?? []).slice(1);
  const calendar = m && new Date(Date.UTC(+y!, +mo! - 1, +d!)).getUTCDate() === +d! && +mo! >= 1 && +mo! <= 12 && +h <= 23 && +mi <= 59 && +sec <= 59;
  if (!calendar || Number.isNaN(date.getTime())) {
    fail('--expires-at must be an ISO 8601 date (2030-01-31) or date and time with a zone (2030-01-31T12:00:00Z)');
  }
  if (date.getTime() <= Date.now()) fail('--expires-at must be in the future (a key that has expired cannot be used)');
  return date;
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

// Every argument is checked before a database is opened (a refusal exits at once, 2, nothing written).
const [noun, verb, ...extra] = positionals;
if (extra.length > 0) fail(`unexpected argument "${extra[0]}"`);
const checked: { name?: string; credits?: number; expiresAt?: Date | null } = {};
switch (`${noun} ${verb}`) {
  case 'org create':
    checked.name = orgName();
    checked.credits = credits(0);
    break;
  case 'key create':
    need('org');
    checked.expiresAt = expiresAt();
    break;
  case 'credits grant':
    need('org');
    checked.credits = credits(1);
    break;
  case 'key revoke':
    if ((values.id === undefined) === (values.key === undefined)) fail('key revoke takes one of --id <key_id> or --key <api_key>|-');
    break;
  case 'connection add':
    if (values.kind !== 'account' && values.kind !== 'access_key') fail('--kind must be account or access_key');
    break;
  case 'user create':
    if (!isRole(need('role'))) fail('--role must be owner, admin or member');
    break;
}

/** A failure on stderr as one JSON object: a refusal as the spec's error envelope, anything else its message only (no stack trace). */
function report(err: unknown): void {
  if (err instanceof ServiceError) console.error(terminalJson(errorEnvelope(err.code, { message: err.message, param: err.param, details: err.details })));
  else console.error(terminalJson({ error: err instanceof Error ? err.message : String(err) }));
}

// A configuration that does not load or a database that does not start is said as any other
// failure (exit 1), not as an uncaught exception's stack trace.
const { config, pg, databaseUrl } = await (async () => {
  const config = loadConfig();
  const shared = config.DATABASE_URL ?? (await runningServiceDatabase(config.dataDir));
  const pg = shared ? null : await startEmbeddedPostgres({ dataDir: config.dataDir });
  return { config, pg, databaseUrl: shared ?? pg!.databaseUrl };
})().catch((err: unknown) => {
  report(err);
  process.exit(1);
});
const db = createPool(databaseUrl, 2);
let code = 0;
try {
  await migrate(databaseUrl);
  let out: unknown;
  switch (`${noun} ${verb}`) {
    case 'org create':
      out = await createOrg(db, checked.name!, checked.credits!);
      break;
    case 'key create':
      out = await createKey(db, need('org'), checked.expiresAt ?? null);
      break;
    case 'key list':
      out = { keys: await listKeys(db, need('org')) };
      break;
    case 'key revoke': {
      if (values.id !== undefined) {
        out = await revokeKeyById(db, need('id'));
        break;
      }
      const key = need('key') === '-' ? (await readStdin()).trim() : need('key');
      out = await revokeKey(db, key);
      break;
    }
    case 'credits grant':
      out = await grant(db, need('org'), checked.credits!);
      break;
    case 'connection add': {
      const kind = need('kind');
      const raw = need('secret') === '-' ? await readStdin() : need('secret');
      let secret: unknown;
      try {
        secret = JSON.parse(raw);
      } catch {
        fail('--secret must be JSON, e.g. \'{"email":"…","password":"…"}\' or \'{"WEATHER_API_KEY":"…"}\''); // never echo it
      }
      out = await addConnection(db, await loadKeyring(config), { orgId: need('org'), kind: kind as ConnectionKind, name: need('name'), site: need('site'), secret });
      break;
    }
    case 'connection revoke':
      out = await revokeConnection(db, need('id'));
      break;
    case 'connection expire':
      out = await expireConnection(db, need('id'));
      break;
    case 'connection list':
      out = { connections: await listConnections(db, need('org')) };
      break;
    case 'connection delete':
      out = await deleteConnection(db, await loadKeyring(config), need('id'));
      break;
    case 'connection rekey': {
      const report = await rekeyConnections(db, await loadKeyring(config), { dryRun: values['dry-run'] === true, orgId: values.org });
      out = report;
      if (report.undecryptable.length > 0) {
        // Ids only (they are in the JSON too): an operator must look at these rows before dropping a key.
        console.error(`admin: ${report.undecryptable.length} connection(s) could not be decrypted with any configured key and were left unchanged`);
        code = 1;
      }
      break;
    }
    case 'workflow template':
    case 'workflow build':
      ({ code, out } = await workflowCommand(verb, values, { db, config }));
      break;
    default:
      out = await runAccountCommand(db, `${noun} ${verb}`, { need, readStdin, fail });
      if (out === undefined) fail(`unknown command "${positionals.join(' ')}"`);
  }
  console.log(terminalJson(out));
} catch (err) {
  // A refused argument (a connection's field, say): the spec's error envelope, code, param and details.issues.
  report(err);
  code = 1;
} finally {
  await db.end();
  await pg?.stop();
}
process.exit(code);
