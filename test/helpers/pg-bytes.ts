// A TCP proxy in front of the test stack's PostgreSQL that counts the bytes PostgreSQL sends back:
// what a process (or a pool) connected through it read from the database. A column a statement
// selects or leaves out shows in the count, whatever the statement's text.
import net from 'node:net';

export interface PgByteCounter {
  /** postgres://… through the proxy (same user, password and database as `databaseUrl`). */
  url: string;
  /** Bytes PostgreSQL has sent through the proxy so far, on every connection. */
  received(): number;
  close(): Promise<void>;
}

export async function startPgByteCounter(databaseUrl: string): Promise<PgByteCounter> {
  const target = new URL(databaseUrl);
  let received = 0;
  const sockets = new Set<net.Socket>();
  const server = net.createServer((client) => {
    const upstream = net.connect(Number(target.port || 5432), target.hostname);
    sockets.add(client).add(upstream);
    const close = () => {
      client.destroy();
      upstream.destroy();
      sockets.delete(client);
      sockets.delete(upstream);
    };
    client.on('error', close).on('close', close);
    upstream.on('error', close).on('close', close);
    upstream.on('data', (chunk: Buffer) => {
      received += chunk.length;
    });
    upstream.pipe(client);
    client.pipe(upstream);
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const url = new URL(databaseUrl);
  url.hostname = '127.0.0.1';
  url.port = String((server.address() as net.AddressInfo).port);
  return {
    url: url.toString(),
    received: () => received,
    async close() {
      for (const s of sockets) s.destroy();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}
