// The browser's only way out: a per-run HTTP proxy on 127.0.0.1 that every connection of the run's
// browser context goes through (Playwright forces `<-loopback>`, so loopback is proxied too).
// Playwright's routes see only the first URL of a redirect chain and Chromium would resolve names
// again after a check; here every hop of every chain, every subresource, fetch, EventSource and
// WebSocket (tunnelled with CONNECT) arrives as its own request, is checked against the recipe's
// hosts and the private ranges, and is connected to the very address that was checked (mapped
// hosts to their demo-site address, other names through the guarded lookup). Refusals are
// answered with 403 (the browser never reaches the destination) and reported to the driver.

import http from 'node:http';
import net, { type AddressInfo, type Socket } from 'node:net';
import { DestinationRefusedError, guardedLookup, isPrivateAddress, mappedTarget, type HostMap } from './net-guard.ts';

export type RefusalReason = 'destination_refused' | 'host_not_allowed' | 'scheme_not_allowed';

export interface ProxyRefusal {
  host: string;
  reason: RefusalReason;
}

export interface GuardedProxyOptions {
  hostMap: HostMap;
  allowPrivateNetwork: boolean;
  /** The recipe's hosts (lower case). */
  allowedHosts: ReadonlySet<string>;
  onRefused(r: ProxyRefusal): void;
}

export interface GuardedProxy {
  /** `http://127.0.0.1:PORT`, for the context's `proxy.server`. */
  server: string;
  close(): Promise<void>;
}

interface Target {
  host: string;
  port: number;
  /** Set for names that must be resolved and checked when connecting. */
  lookup?: typeof guardedLookup;
}

const bareHost = (h: string) => h.toLowerCase().replace(/^\[|\]$/g, '').replace(/\.$/, '');

/** Where a request for host:port may connect, or why it may not. */
export function proxyTarget(opts: Omit<GuardedProxyOptions, 'onRefused'>, hostname: string, port: number): Target | ProxyRefusal {
  const host = bareHost(hostname);
  const literalPrivate = (net.isIP(host) !== 0 && isPrivateAddress(host)) || host === 'localhost' || host.endsWith('.localhost');
  const mapped = mappedTarget(opts.hostMap, host);
  if (literalPrivate && !mapped && !opts.allowPrivateNetwork) return { host, reason: 'destination_refused' };
  if (!opts.allowedHosts.has(host)) return { host, reason: literalPrivate && !opts.allowPrivateNetwork ? 'destination_refused' : 'host_not_allowed' };
  if (mapped) return { host: mapped.host, port: mapped.port };
  if (opts.allowPrivateNetwork) return { host, port };
  return { host, port, lookup: guardedLookup };
}

const isRefusal = (t: Target | ProxyRefusal): t is ProxyRefusal => 'reason' in t;

function connectTo(t: Target): Socket {
  return net.connect({ host: t.host, port: t.port, ...(t.lookup ? { lookup: t.lookup } : {}) });
}

const HOP_BY_HOP = new Set(['proxy-connection', 'proxy-authorization', 'connection', 'keep-alive', 'te', 'trailer', 'upgrade']);

export async function startGuardedProxy(opts: GuardedProxyOptions): Promise<GuardedProxy> {
  const sockets = new Set<Socket>();
  const track = (s: Socket) => {
    sockets.add(s);
    s.on('close', () => sockets.delete(s));
    s.on('error', () => undefined);
    return s;
  };
  const refuse = (r: ProxyRefusal) => {
    try {
      opts.onRefused(r);
    } catch {
      /* reporting never breaks the proxy */
    }
  };
  const onConnectError = (host: string, e: unknown) => {
    if (e instanceof DestinationRefusedError) refuse({ host, reason: 'destination_refused' });
  };

  const server = http.createServer((req, res) => {
    let url: URL;
    try {
      url = new URL(req.url ?? '');
    } catch {
      res.writeHead(400, { connection: 'close' }).end();
      return;
    }
    if (url.protocol !== 'http:') {
      refuse({ host: url.hostname, reason: 'scheme_not_allowed' });
      res.writeHead(403, { connection: 'close' }).end();
      return;
    }
    const t = proxyTarget(opts, url.hostname, Number(url.port || 80));
    if (isRefusal(t)) {
      refuse(t);
      res.writeHead(403, { 'content-type': 'text/plain', connection: 'close' }).end('Refused by the service\n');
      return;
    }
    const headers: http.OutgoingHttpHeaders = {};
    for (const [k, v] of Object.entries(req.headers)) if (!HOP_BY_HOP.has(k) && v !== undefined) headers[k] = v;
    const upstream = http.request({
      host: t.host,
      port: t.port,
      ...(t.lookup ? { lookup: t.lookup } : {}),
      method: req.method,
      path: `${url.pathname}${url.search}`,
      headers,
      setHost: false,
      agent: false,
    });
    upstream.on('response', (up) => {
      const out: http.OutgoingHttpHeaders = {};
      for (const [k, v] of Object.entries(up.headers)) if (!HOP_BY_HOP.has(k) && v !== undefined) out[k] = v;
      res.writeHead(up.statusCode ?? 502, out);
      up.pipe(res);
    });
    upstream.on('error', (e) => {
      onConnectError(bareHost(url.hostname), e);
      if (!res.headersSent) res.writeHead(e instanceof DestinationRefusedError ? 403 : 502, { connection: 'close' });
      res.end();
    });
    // The browser gave up on it (a closed page, an aborted fetch): so does the upstream request.
    res.on('close', () => upstream.destroy());
    req.pipe(upstream);
  });

  // CONNECT host:port: HTTPS and every WebSocket (Chromium tunnels ws:// and wss:// through an HTTP proxy).
  server.on('connect', (req: http.IncomingMessage, client: Socket, head: Buffer) => {
    track(client);
    const m = /^\[?([^\]]+?)\]?:(\d+)$/.exec(req.url ?? '');
    if (!m) {
      client.end('HTTP/1.1 400 Bad Request\r\nConnection: close\r\n\r\n');
      return;
    }
    const t = proxyTarget(opts, m[1]!, Number(m[2]));
    if (isRefusal(t)) {
      refuse(t);
      client.end('HTTP/1.1 403 Forbidden\r\nConnection: close\r\n\r\n');
      return;
    }
    const upstream = track(connectTo(t));
    upstream.once('connect', () => {
      client.write('HTTP/1.1 200 Connection Established\r\n\r\n');
      if (head.length) upstream.write(head);
      upstream.pipe(client);
      client.pipe(upstream);
    });
    upstream.once('error', (e) => {
      onConnectError(bareHost(m[1]!), e);
      if (!client.destroyed) client.end(`HTTP/1.1 ${e instanceof DestinationRefusedError ? '403 Forbidden' : '502 Bad Gateway'}\r\nConnection: close\r\n\r\n`);
    });
    client.on('close', () => upstream.destroy());
  });

  // A plain-HTTP WebSocket handshake sent in absolute form (not what Chromium does, but any
  // client could): checked like a request, then tunnelled with its head rewritten to origin form.
  server.on('upgrade', (req: http.IncomingMessage, client: Socket, head: Buffer) => {
    track(client);
    let url: URL;
    try {
      url = new URL(req.url ?? '');
    } catch {
      client.end('HTTP/1.1 400 Bad Request\r\nConnection: close\r\n\r\n');
      return;
    }
    const t = url.protocol === 'http:' || url.protocol === 'ws:' ? proxyTarget(opts, url.hostname, Number(url.port || 80)) : { host: url.hostname, reason: 'scheme_not_allowed' as const };
    if (isRefusal(t)) {
      refuse(t);
      client.end('HTTP/1.1 403 Forbidden\r\nConnection: close\r\n\r\n');
      return;
    }
    const upstream = track(connectTo(t));
    upstream.once('connect', () => {
      const lines = [`${req.method} ${url.pathname}${url.search} HTTP/1.1`];
      for (let i = 0; i < req.rawHeaders.length; i += 2) {
        if (!/^proxy-/i.test(req.rawHeaders[i]!)) lines.push(`${req.rawHeaders[i]}: ${req.rawHeaders[i + 1]}`);
      }
      upstream.write(`${lines.join('\r\n')}\r\n\r\n`);
      if (head.length) upstream.write(head);
      upstream.pipe(client);
      client.pipe(upstream);
    });
    upstream.once('error', (e) => {
      onConnectError(bareHost(url.hostname), e);
      client.destroy();
    });
    client.on('close', () => upstream.destroy());
  });
  server.on('connection', track);
  server.on('clientError', (_e, socket) => socket.destroy());

  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(0, '127.0.0.1', () => {
      server.off('error', reject);
      resolve();
    });
  });
  const { port } = server.address() as AddressInfo;
  let closed: Promise<void> | undefined;
  return {
    server: `http://127.0.0.1:${port}`,
    close() {
      closed ??= new Promise<void>((resolve) => {
        server.close(() => resolve());
        for (const s of sockets) s.destroy();
      });
      return closed;
    },
  };
}
