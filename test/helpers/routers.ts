// createRouter for a test file, each router closed after the file: closing releases its embedding
// thread, and a process that exits while the model runs aborts (SIGABRT; test/router-embeddings.test.ts).
import { afterAll } from 'vitest';
import { createRouter, type OfflineRouter, type RouterDeps } from '../../shared/router/index.ts';

export function routerFactory(): (deps: RouterDeps) => OfflineRouter {
  const made: OfflineRouter[] = [];
  afterAll(async () => {
    await Promise.all(made.splice(0).map((r) => r.close().catch(() => undefined)));
  });
  return (deps) => {
    const r = createRouter(deps);
    made.push(r);
    return r;
  };
}
