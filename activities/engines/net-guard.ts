// Destination checks shared by both engines: the host map (dev/test routing of real-looking hosts
// to apps/demo-sites) and refusal of private, loopback and link-local addresses for everything else.

import { lookup as dnsLookup, type LookupAddress } from 'node:dns';
import { BlockList, isIP } from 'node:net';

export type HostMap = Record<string, string>;

export interface MappedTarget {
  host: string;
  port: number;
}

/** Parses a host map value such as `127.0.0.1:4100`. */
export function mappedTarget(hostMap: HostMap | undefined, hostname: string): MappedTarget | null {
  const v = hostMap?.[hostname.toLowerCase()];
  if (!v) return null;
  const m = /^\[?([^\]]+?)\]?:(\d+)$/.exec(v);
  if (!m) throw new Error(`host map entry for ${hostname} must be "address:port", got "${v}"`);
  return { host: m[1]!, port: Number(m[2]) };
}

const blocked = new BlockList();
for (const [net, prefix] of [
  ['0.0.0.0', 8], // "this" network
  ['10.0.0.0', 8],
  ['100.64.0.0', 10], // carrier-grade NAT
  ['127.0.0.0', 8],
  ['169.254.0.0', 16], // link-local (cloud metadata)
  ['172.16.0.0', 12],
  ['192.0.0.0', 24],
  ['192.0.2.0', 24],
  ['192.168.0.0', 16],
  ['198.18.0.0', 15],
  ['198.51.100.0', 24],
  ['203.0.113.0', 24],
  ['224.0.0.0', 4], // multicast
  ['240.0.0.0', 4], // reserved + broadcast
] as const)
  blocked.addSubnet(net, prefix, 'ipv4');
for (const [net, prefix] of [
  ['::', 128],
  ['::1', 128],
  ['fc00::', 7], // unique local
  ['fe80::', 10], // link-local
  ['fec0::', 10], // site-local (deprecated)
  ['ff00::', 8], // multicast
  ['2001:db8::', 32], // documentation
  ['100::', 64], // discard
] as const)
  blocked.addSubnet(net, prefix, 'ipv6');

function embeddedIpv4(ip: string): string | null {
  const lower = ip.toLowerCase();
  // ::ffff:a.b.c.d, ::a.b.c.d, 64:ff9b::a.b.c.d (NAT64)
  const dotted = /^(?:::ffff:|::|64:ff9b::)(\d+\.\d+\.\d+\.\d+)$/.exec(lower);
  if (dotted) return dotted[1]!;
  const hex = /^(?:::ffff:|64:ff9b::)([0-9a-f]{1,4}):([0-9a-f]{1,4})$/.exec(lower);
  if (hex) {
    const hi = parseInt(hex[1]!, 16);
    const lo = parseInt(hex[2]!, 16);
    return `${hi >> 8}.${hi & 255}.${lo >> 8}.${lo & 255}`;
  }
  return null;
}

/** True for private, loopback, link-local, multicast and other non-public addresses. */
export function isPrivateAddress(ip: string): boolean {
  const bare = ip.replace(/^\[|\]$/g, '').replace(/%.*$/, '');
  const family = isIP(bare);
  if (family === 4) return blocked.check(bare, 'ipv4');
  if (family === 6) {
    const v4 = embeddedIpv4(bare);
    if (v4) return blocked.check(v4, 'ipv4');
    return blocked.check(bare, 'ipv6');
  }
  return true; // not an address: refuse
}

export class DestinationRefusedError extends Error {
  readonly code = 'E_DESTINATION_REFUSED';
  readonly hostname: string;
  constructor(hostname: string, reason: string) {
    super(`Destination ${hostname} refused: ${reason}`);
    this.name = 'DestinationRefusedError';
    this.hostname = hostname;
  }
}

type LookupCallback = (err: NodeJS.ErrnoException | null, address: string | LookupAddress[], family?: number) => void;

/**
 * A `lookup` for net/tls connect that resolves every address of a name and refuses the connection
 * when any of them is private (so DNS rebinding cannot reach inside), then connects to the
 * checked address.
 */
export function guardedLookup(hostname: string, options: { all?: boolean; family?: number | string } | number | undefined, callback: LookupCallback): void {
  const opts = typeof options === 'object' && options ? options : {};
  dnsLookup(hostname, { all: true, family: typeof opts.family === 'number' ? opts.family : 0 }, (err, addresses) => {
    if (err) return callback(err, '');
    const list = addresses as LookupAddress[];
    if (list.length === 0) return callback(Object.assign(new Error(`no address for ${hostname}`), { code: 'ENOTFOUND' }), '');
    const bad = list.find((a) => isPrivateAddress(a.address));
    if (bad) return callback(new DestinationRefusedError(hostname, 'it resolves to a private, loopback or link-local address') as NodeJS.ErrnoException, '');
    if (opts.all) return callback(null, list);
    return callback(null, list[0]!.address, list[0]!.family);
  });
}

/** Resolves a name and checks every address (used before handing a URL to the browser). */
export async function assertPublicHost(hostname: string): Promise<void> {
  const bare = hostname.replace(/^\[|\]$/g, '');
  if (isIP(bare)) {
    if (isPrivateAddress(bare)) throw new DestinationRefusedError(hostname, 'it is a private, loopback or link-local address');
    return;
  }
  if (bare === 'localhost' || bare.endsWith('.localhost')) throw new DestinationRefusedError(hostname, 'it is a loopback name');
  await new Promise<void>((resolve, reject) => {
    guardedLookup(bare, { all: true }, (err) => (err ? reject(err) : resolve()));
  });
}
