import pg from 'pg';

// bigint columns (credits) come back as JS numbers: balances never approach 2^53.
pg.types.setTypeParser(20, (v) => Number(v));

export type Db = pg.Pool;
export type DbClient = pg.PoolClient;

export interface PoolTimeouts {
  /** statement_timeout: a statement that runs longer fails (lock waits included). */
  statementTimeoutMs?: number;
  /** idle_in_transaction_session_timeout: an open transaction left idle is ended by the server. */
  idleInTransactionTimeoutMs?: number;
}

/** How long a query waits for a pooled connection before it fails. */
export const POOL_CONNECT_WAIT_MS = 5_000;

export function createPool(databaseUrl: string, max = 10, timeouts: PoolTimeouts = {}): Db {
  const pool = new pg.Pool({
    connectionString: databaseUrl,
    max,
    connectionTimeoutMillis: POOL_CONNECT_WAIT_MS,
    statement_timeout: timeouts.statementTimeoutMs ?? 30_000,
    idle_in_transaction_session_timeout: timeouts.idleInTransactionTimeoutMs ?? 60_000,
  });
  // An idle client's error (server restart) must not crash the process; the next query reconnects.
  pool.on('error', () => {});
  return pool;
}

/** The pool timeouts a process's configuration asks for. */
export const poolTimeouts = (c: { DB_STATEMENT_TIMEOUT_MS: number; DB_IDLE_IN_TRANSACTION_TIMEOUT_MS: number }): PoolTimeouts => ({
  statementTimeoutMs: c.DB_STATEMENT_TIMEOUT_MS,
  idleInTransactionTimeoutMs: c.DB_IDLE_IN_TRANSACTION_TIMEOUT_MS,
});

/** Run `fn` in one transaction; rolls back on any throw. */
export async function tx<T>(db: Db, fn: (c: DbClient) => Promise<T>): Promise<T> {
  const client = await db.connect();
  try {
    await client.query('BEGIN');
    const result = await fn(client);
    await client.query('COMMIT');
    return result;
  } catch (err) {
    await client.query('ROLLBACK').catch(() => {});
    throw err;
  } finally {
    client.release();
  }
}
