// Activity factories: each takes its dependencies and returns plain async functions.
import type { Db } from '../shared/db/pool.ts';
import type { LedgerDb } from '../shared/db/credits.ts';
import { createBillingActivities } from './billing.ts';
import { createExecuteActivities } from './execute.ts';
import { createHealthActivities } from './health.ts';
import { createBuilderActivities } from './builder.ts';
import { createReadQueryActivity } from './read-query.ts';
import type { RecipeRunner } from './engines/index.ts';
import type { Keyring } from '../shared/db/connections.ts';
import type { LocalResults } from '../shared/local-results.ts';
import type { BuilderActivities, HealthActivities, QueryActivities } from './types.ts';

export function createActivities(deps: { db: Db; ledger: LedgerDb; runner: RecipeRunner; keyring: () => Promise<Keyring>; localResults?: LocalResults }): QueryActivities & HealthActivities & BuilderActivities {
  const billing = createBillingActivities(deps.db, deps.ledger, deps.localResults);
  const execute = createExecuteActivities(deps);
  return { ...billing, ...execute, ...createReadQueryActivity({ ...billing, ...execute }), ...createHealthActivities(deps), ...createBuilderActivities(deps) };
}
