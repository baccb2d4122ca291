// For test files that kill, restart or reconfigure the API and the worker: a pair on a task queue of
// the file's own, so nothing they do disturbs another test; and a short-lived Temporal client on the
// stack's server for reading or starting the runs themselves.
import { Client, Connection } from '@temporalio/client';
import { afterAll, afterEach, beforeAll, beforeEach } from 'vitest';
import { processPool, type ServicePairOptions } from './processes.ts';
import { closeDb, dataConverter, demo, ownPair, stack } from './stack.ts';

/**
 * Registers the calling file's hooks: its pair's options (task queue named after `name`, `env` on
 * top of the stack's) are made before its tests, the demo sites are reset before and after each
 * test, every process spawned is killed (SIGKILL) after each, and the database pool is closed at the end.
 * `spawn` starts an API or a worker with the pair's options, or with `o` (a variant of `pair`).
 */
export function ownPairPool(name: string, env: Record<string, string> = {}) {
  let pair: ReturnType<typeof ownPair> | undefined;
  const options = () => {
    if (!pair) throw new Error('the pair is made in beforeAll: use it inside a test');
    return pair;
  };
  const pool = processPool(options);
  beforeAll(() => {
    pair = ownPair(name, env);
  });
  beforeEach(async () => {
    await demo('/__demo/reset');
  });
  // Faults a test armed (a slow site for a thousand requests) are cleared when it ends too, so the
  // next file on the stack's shared demo sites does not meet them.
  afterEach(async () => {
    await pool.killAll();
    await demo('/__demo/reset');
  });
  afterAll(closeDb);
  return {
    get pair() {
      return options();
    },
    spawn: (kind: 'api' | 'worker', o?: ServicePairOptions) => pool.spawn(kind, o),
  };
}

/** `fn` with a Temporal client on the stack's server (payloads decoded as the processes encode them). */
export async function withTemporal<T>(fn: (c: Client) => Promise<T>): Promise<T> {
  const connection = await Connection.connect({ address: stack().temporalAddress });
  try {
    return await fn(new Client({ connection, dataConverter: await dataConverter() }));
  } finally {
    await connection.close();
  }
}
