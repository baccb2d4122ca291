// The client address that per-address limits count against, one rule for all of them: failed
// credential checks (credential-guard.ts), console sign-ins and sign-ups (console/pages/auth.ts)
// and the OAuth endpoints' per-address rate (routes/oauth.ts). request.ip is the TCP peer, or with
// TRUST_PROXY the address the named proxies forwarded, which some proxies write with its port.
import net from 'node:net';
import type { FastifyRequest } from 'fastify';

/**
 * The bucket an address counts against: an IPv4 address as is (also IPv4-mapped IPv6, in either
 * notation), an IPv6 address's /64. A port after the address (`198.51.100.7:4567`,
 * `[2001:db8::1]:443`: some proxies write X-Forwarded-For so, and TRUST_PROXY makes that
 * request.ip) is not part of it: the client picks a new source port with every connection.
 */
export function addressBucket(ip: string | undefined): string {
  // Fastify leaves request.ip undefined when the client reset the connection mid-request.
  if (!ip) return 'unknown';
  const v4 = /^(?:::ffff:)?(\d{1,3}(?:\.\d{1,3}){3})(?::\d{1,5})?$/i.exec(ip);
  if (v4) return v4[1]!;
  const bracketed = /^\[([^\]]+)\](?::\d{1,5})?$/.exec(ip);
  if (bracketed) return addressBucket(bracketed[1]!);
  const bare = ip.split('%')[0]!;
  if (!net.isIPv6(bare)) return ip;
  const [head, tail] = bare.split('::') as [string, string | undefined];
  const left = head ? head.split(':') : [];
  // The /64 is the first four groups; `::` stands for the zero groups between the two halves.
  const right = tail ? tail.split(':').flatMap((g) => (g.includes('.') ? ['0', '0'] : [g])) : [];
  const groups = tail === undefined ? left : [...left, ...Array(8 - left.length - right.length).fill('0'), ...right];
  // IPv4-mapped written out (`::ffff:c633:6407`, `0:0:0:0:0:ffff:198.51.100.7`): that IPv4 address.
  const mapped = bare.includes('.') ? /:ffff:(\d{1,3}(?:\.\d{1,3}){3})$/i.exec(bare)?.[1] : undefined;
  if (groups.slice(0, 5).every((g) => parseInt(g, 16) === 0) && parseInt(groups[5]!, 16) === 0xffff) {
    if (mapped) return mapped;
    const [hi, lo] = [parseInt(groups[6]!, 16), parseInt(groups[7]!, 16)];
    return [hi >> 8, hi & 255, lo >> 8, lo & 255].join('.');
  }
  return `${groups
    .slice(0, 4)
    .map((g) => parseInt(g, 16).toString(16))
    .join(':')}::/64`;
}

/** The bucket of the request's client (`addressBucket` of request.ip). */
export const clientAddress = (request: Pick<FastifyRequest, 'ip'>): string => addressBucket(request.ip);
