// Bring a database to a usable state: migrations, the demo catalog, and (for dev) an organization.
import fs from 'node:fs/promises';
import path from 'node:path';
import { demoCatalog } from '../catalog/demo/index.ts';
import { validateOperationVersion } from '../catalog/validate.ts';
import { migrate } from './migrate.ts';
import { publishApi } from './catalog.ts';
import { checkApiKey, createKey, createOrg, ensurePlatformOrg } from './orgs.ts';
import type { Db } from './pool.ts';

export const DEV_ORG_NAME = 'Dev organization';
export const DEV_ORG_CREDITS = 1000;

/**
 * Publish every demo API, owned by the platform organization; recipes are validated by their
 * schema, and performs_actions against the recipe's action steps, before anything is written.
 */
export async function seedDemoCatalog(db: Db): Promise<number> {
  await ensurePlatformOrg(db);
  for (const def of demoCatalog) await publishApi(db, def, { validateRecipe: validateOperationVersion });
  return demoCatalog.length;
}

export async function prepareDatabase(databaseUrl: string, db: Db): Promise<void> {
  await migrate(databaseUrl);
  await seedDemoCatalog(db);
}

/**
 * The dev organization: created with 1000 credits on first boot; its key is kept in
 * `$DATA_DIR/dev-api-key` and reused while it is valid (a new key is made if it was revoked).
 */
export async function ensureDevOrg(db: Db, dataDir: string): Promise<{ orgId: string; apiKey: string; created: boolean }> {
  const keyFile = path.join(dataDir, 'dev-api-key');
  const saved = (await fs.readFile(keyFile, 'utf8').catch(() => '')).trim();
  if (saved) {
    const check = await checkApiKey(db, saved);
    if (check.ok) return { orgId: check.orgId, apiKey: saved, created: false };
  }
  const existing = await db.query('SELECT id FROM organizations WHERE name = $1 ORDER BY created_at LIMIT 1', [DEV_ORG_NAME]);
  let orgId: string;
  let apiKey: string;
  let created = false;
  if (existing.rowCount) {
    orgId = existing.rows[0].id;
    apiKey = (await createKey(db, orgId)).api_key;
  } else {
    const org = await createOrg(db, DEV_ORG_NAME, DEV_ORG_CREDITS);
    orgId = org.org_id;
    apiKey = org.api_key;
    created = true;
  }
  await fs.mkdir(dataDir, { recursive: true });
  await fs.writeFile(keyFile, `${apiKey}\n`, { mode: 0o600 });
  return { orgId, apiKey, created };
}
