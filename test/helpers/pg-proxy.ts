// A TCP proxy in front of the test stack's PostgreSQL that can hold back chosen simple queries: a
// slow database for exactly those statements (a statement like `SELECT 1` takes no lock a test could
// hold), while every other statement of the same process goes through at once. A statement with
// parameters (the extended protocol) is chosen by its Bind message instead, e.g. by a parameter's value.
import net from 'node:net';

export interface PgProxy {
  /** postgres://… through the proxy (same user, password and database as `databaseUrl`). */
  url: string;
  /** Connections whose matching query is being held now (each is one statement PostgreSQL has not seen). */
  held(): number;
  /** Matching queries seen so far (held or not). */
  matched(): number;
  /** Hold matching queries from now on (until release). */
  hold(): void;
  /** Send every held query on and stop holding. */
  release(): void;
  close(): Promise<void>;
}

const PROTOCOL_3 = 196608; // a startup message; SSLRequest / GSSENCRequest codes are answered with one byte, then a startup follows

/**
 * Proxy `databaseUrl`; a simple query ('Q') whose text `matches`, or a Bind ('B') whose bytes (as
 * latin1: text parameters read as themselves) `bindMatches`, is held while holding is on.
 */
export async function startPgProxy(databaseUrl: string, matches: (sql: string) => boolean, bindMatches: (bind: string) => boolean = () => false): Promise<PgProxy> {
  const target = new URL(databaseUrl);
  let holding = false;
  let matched = 0;
  const waiting = new Set<() => void>();
  const sockets = new Set<net.Socket>();
  const server = net.createServer((client) => {
    const upstream = net.connect(Number(target.port || 5432), target.hostname);
    sockets.add(client).add(upstream);
    let started = false; // the untyped startup message(s) passed
    let pending = Buffer.alloc(0);
    let held: Buffer | null = null; // the held query; what the client sends after it waits in `pending`
    let resume: (() => void) | null = null;
    const close = () => {
      if (resume) waiting.delete(resume);
      client.destroy();
      upstream.destroy();
    };
    client.on('error', close).on('close', close);
    upstream.on('error', close).on('close', close);
    upstream.pipe(client);
    const pump = () => {
      while (held === null) {
        if (!started) {
          if (pending.length < 8) return;
          const len = pending.readInt32BE(0);
          if (pending.length < len) return;
          if (pending.readInt32BE(4) === PROTOCOL_3) started = true;
          upstream.write(pending.subarray(0, len));
          pending = pending.subarray(len);
          continue;
        }
        if (pending.length < 5) return;
        const len = pending.readInt32BE(1) + 1;
        if (pending.length < len) return;
        const message = pending.subarray(0, len);
        pending = pending.subarray(len);
        if (
          (message[0] === 0x51 /* Q */ && matches(message.subarray(5, len - 1).toString('utf8'))) ||
          (message[0] === 0x42 /* B */ && bindMatches(message.subarray(5).toString('latin1')))
        ) {
          matched++;
          if (holding) {
            held = message;
            resume = () => {
              upstream.write(held!);
              held = null;
              resume = null;
              pump();
            };
            waiting.add(resume);
            return;
          }
        }
        upstream.write(message);
      }
    };
    client.on('data', (chunk: Buffer) => {
      pending = Buffer.concat([pending, chunk]);
      pump();
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const port = (server.address() as net.AddressInfo).port;
  const url = new URL(databaseUrl);
  url.hostname = '127.0.0.1';
  url.port = String(port);
  return {
    url: url.toString(),
    held: () => waiting.size,
    matched: () => matched,
    hold() {
      holding = true;
    },
    release() {
      holding = false;
      for (const resume of [...waiting]) {
        waiting.delete(resume);
        resume();
      }
    },
    async close() {
      for (const s of sockets) s.destroy();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}
