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
  ['192.88.99.0', 24], // 6to4 relay anycast (deprecated): routes into whatever relay is nearest
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

/** The eight 16-bit groups of an IPv6 address (any spelling: compressed or not, with a dotted tail). */
function ipv6Groups(ip: string): number[] | null {
  let text = ip.toLowerCase();
  const dotted = /(\d+)\.(\d+)\.(\d+)\.(\d+)$/.exec(text);
  if (dotted) {
    const [a, b, c, d] = dotted.slice(1).map(Number) as [number, number, number, number];
    text = `${text.slice(0, dotted.index)}${((a << 8) | b).toString(16)}:${((c << 8) | d).toString(16)}`;
  }
  const halves = text.split('::');
  if (halves.length > 2) return null;
  const head = halves[0] ? halves[0].split(':') : [];
  const tail = halves.length === 2 && halves[1] ? halves[1].split(':') : [];
  const fill = halves.length === 2 ? 8 - head.length - tail.length : 0;
  if (fill < 0) return null;
  const groups = [...head, ...Array<string>(fill).fill('0'), ...tail].map((g) => parseInt(g, 16));
  return groups.length === 8 && groups.every((g) => g >= 0 && g <= 0xffff) ? groups : null;
}

const v4 = (hi: number, lo: number) => `${hi >> 8}.${hi & 255}.${lo >> 8}.${lo & 255}`;

/**
 * The IPv4 address an IPv6 address stands for where the network may deliver it to that IPv4 host:
 * IPv4-compatible (::/96), IPv4-mapped (::ffff:0:0/96), IPv4-translated (::ffff:0:0:0/96), NAT64's
 * well-known prefix (64:ff9b::/96) and 6to4 (2002::/16). 'refuse' for prefixes that reach IPv4 hosts
 * by other means (local-use NAT64 64:ff9b:1::/48, Teredo 2001::/32): never a public website's address.
 */
function embeddedIpv4(ip: string): string | 'refuse' | null {
  const g = ipv6Groups(ip);
  if (!g) return 'refuse';
  const zero = (from: number, to: number) => g.slice(from, to).every((x) => x === 0);
  if (zero(0, 6)) return v4(g[6]!, g[7]!);
  if (zero(0, 5) && g[5] === 0xffff) return v4(g[6]!, g[7]!);
  if (zero(0, 4) && g[4] === 0xffff && g[5] === 0) return v4(g[6]!, g[7]!);
  if (g[0] === 0x64 && g[1] === 0xff9b && zero(2, 6)) return v4(g[6]!, g[7]!);
  if (g[0] === 0x64 && g[1] === 0xff9b && g[2] === 1) return 'refuse';
  if (g[0] === 0x2002) return v4(g[1]!, g[2]!);
  if (g[0] === 0x2001 && g[1] === 0) return 'refuse';
  return null;
}

/** True for private, loopback, link-local, multicast and other non-public addresses. */
export function isPrivateAddress(ip: string): boolean {
  const bare = ip.replace(/^\[|\]$/g, '').replace(/%.*$/, '');
  const family = isIP(bare);
  if (family === 4) return blocked.check(bare, 'ipv4');
  if (family === 6) {
    const inner = embeddedIpv4(bare);
    if (inner === 'refuse') return true;
    if (inner) return blocked.check(inner, 'ipv4');
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
