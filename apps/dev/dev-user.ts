// The dev console user: Owner of the dev organization, created on first boot. Its password is kept
// in `$DATA_DIR/dev-console-password` (mode 0600) and printed next to the dev key; a missing file
// means a new password (the old one is unknown).
import { randomBytes } from 'node:crypto';
import fs from 'node:fs/promises';
import path from 'node:path';
import type { Db } from '../../shared/db/pool.ts';
import { createUserInOrg, ensureMembership, findUserByEmail, setPassword, verifyUserEmail } from '../../shared/accounts/users.ts';

export const DEV_USER_EMAIL = 'dev@example.com';

export async function ensureDevUser(db: Db, dataDir: string, orgId: string): Promise<{ email: string; password: string; passwordFile: string }> {
  const passwordFile = path.join(dataDir, 'dev-console-password');
  const saved = (await fs.readFile(passwordFile, 'utf8').catch(() => '')).trim();
  const user = await findUserByEmail(db, DEV_USER_EMAIL);
  let password = saved;
  if (!user) {
    password = saved || randomBytes(15).toString('base64url');
    await createUserInOrg(db, { email: DEV_USER_EMAIL, password, orgId, role: 'owner' });
  } else {
    if (!saved) {
      password = randomBytes(15).toString('base64url');
      await setPassword(db, user.id, password);
    }
    await ensureMembership(db, orgId, user.id, 'owner');
    // Made by this process, not by sign-up (a data dir from before email_verified has it false).
    await verifyUserEmail(db, DEV_USER_EMAIL);
  }
  if (password !== saved) await fs.writeFile(passwordFile, `${password}\n`, { mode: 0o600 });
  return { email: DEV_USER_EMAIL, password, passwordFile };
}
