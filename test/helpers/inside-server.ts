// A loopback HTTP server outside the host map: the "internal service" a hostile page or recipe
// points at. Destination tests assert it never sees a connection.
import http from 'node:http';
import type { AddressInfo } from 'node:net';

export interface InsideServer {
  port: number;
  /** Connections accepted since the start or the last reset. */
  seen(): number;
  reset(): void;
  close(): Promise<void>;
}

export async function startInsideServer(): Promise<InsideServer> {
  let seen = 0;
  const server = http.createServer((_req, res) => res.end('internal'));
  server.on('connection', () => seen++);
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', () => r()));
  return {
    port: (server.address() as AddressInfo).port,
    seen: () => seen,
    reset: () => {
      seen = 0;
    },
    async close() {
      server.closeAllConnections();
      await new Promise<void>((r) => server.close(() => r()));
    },
  };
}
