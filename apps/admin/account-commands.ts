// Operator commands for accounts: `user create`, `user verify` and `org show`. Dispatched from main.ts.
import { isRole, createUserInOrg, verifyUserEmail, AccountError } from '../../shared/accounts/users.ts';
import { balanceOf } from '../../shared/db/orgs.ts';
import type { Db } from '../../shared/db/pool.ts';

export const ACCOUNT_USAGE = `  npm run admin -- user create --email <email> --password <password>|- --org <org_id> --role owner|admin|member
      (--password - reads the password from stdin, keeping it out of shell history)
  npm run admin -- user verify --email <email>  (the operator vouches for the address: invitations to it
      can then be accepted from the console's Overview, without their link)
  npm run admin -- org show --org <org_id>     (name, plan, members, credits: granted, available, reserved, charged)`;

export interface AccountArgs {
  need(name: 'email' | 'password' | 'org' | 'role'): string;
  readStdin(): Promise<string>;
  fail(message: string): never;
}

/** Runs an account command, or returns undefined when `command` is not one. */
export async function runAccountCommand(db: Db, command: string, a: AccountArgs): Promise<unknown> {
  switch (command) {
    case 'user create': {
      const role = a.need('role');
      if (!isRole(role)) a.fail('--role must be owner, admin or member');
      const raw = a.need('password');
      // One trailing newline from `echo` or a here-string is not part of the password.
      const password = raw === '-' ? (await a.readStdin()).replace(/\r?\n$/, '') : raw;
      try {
        return await createUserInOrg(db, { email: a.need('email'), password, orgId: a.need('org'), role });
      } catch (err) {
        if (err instanceof AccountError) throw new Error(err.message); // never echoes the password
        throw err;
      }
    }
    case 'user verify': {
      const user = await verifyUserEmail(db, a.need('email'));
      if (!user) throw new Error('no user has that email');
      return user;
    }
    case 'org show': {
      const orgId = a.need('org');
      const org = await db.query('SELECT id, name, plan, created_at FROM organizations WHERE id = $1', [orgId]);
      if (org.rowCount === 0) throw new Error(`organization ${orgId} not found`);
      const members = await db.query(
        'SELECT u.email, m.role FROM memberships m JOIN users u ON u.id = m.user_id WHERE m.org_id = $1 ORDER BY u.email',
        [orgId],
      );
      const row = org.rows[0];
      return {
        org_id: row.id,
        name: row.name,
        plan: row.plan,
        created_at: (row.created_at as Date).toISOString(),
        credits: (await balanceOf(db, orgId)) ?? { granted: 0, available: 0, reserved: 0, charged: 0 },
        members: members.rows,
      };
    }
    default:
      return undefined;
  }
}
