// Completed runs reach the catalog's counts when an API process folds them (every
// CATALOG_RUN_FOLD_MS; shared/db/catalog.ts). A test that reads the counts right after its runs
// folds first, and waits out a fold another process has under way (it holds the rows until it
// commits), so that every run committed before this call is counted.
import { foldRunCounts } from '../../shared/db/catalog.ts';
import type { Db } from '../../shared/db/pool.ts';

export async function foldAllRuns(db: Db): Promise<void> {
  for (let i = 0; i < 200; i++) {
    await foldRunCounts(db);
    const left = await db.query('SELECT EXISTS (SELECT 1 FROM catalog_run_pending) AS left');
    if (!left.rows[0].left) return;
    await new Promise((r) => setTimeout(r, 25));
  }
  throw new Error('completed runs stayed pending for 5 s');
}
