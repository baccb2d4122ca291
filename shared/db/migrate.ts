import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { runner } from 'node-pg-migrate';

const MIGRATIONS_DIR = path.join(path.dirname(fileURLToPath(import.meta.url)), 'migrations');

/**
 * Apply every pending migration (SQL files in ./migrations). Safe to run concurrently: runners
 * queue on node-pg-migrate's advisory lock ('wait', not its default 'fail'), and a runner that
 * gets it after another finds nothing left to apply.
 */
export async function migrate(databaseUrl: string): Promise<void> {
  await runner({
    databaseUrl,
    dir: MIGRATIONS_DIR,
    direction: 'up',
    migrationsTable: 'pgmigrations',
    checkOrder: true,
    advisoryLockMode: 'wait',
    log: () => {},
  });
}
