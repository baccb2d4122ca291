// Opaque OAuth secrets: 32 random bytes (crypto.randomBytes), base64url, behind a prefix that says
// what they are (so a leaked one is recognizable and /mcp can tell an access token from an API key).
// Only their SHA-256 is stored.
import { createHash, randomBytes, timingSafeEqual } from 'node:crypto';

export const ACCESS_PREFIX = 'wqs_at_';
export const REFRESH_PREFIX = 'wqs_rt_';
export const CODE_PREFIX = 'wqs_ac_';
export const ACCESS_TOKEN_PATTERN = /^wqs_at_[A-Za-z0-9_-]{43}$/;

export const newSecret = (prefix: string) => `${prefix}${randomBytes(32).toString('base64url')}`;
export const hashSecret = (secret: string) => createHash('sha256').update(secret).digest();
export const newGrantId = () => `grt_${randomBytes(12).toString('hex')}`;
export const newClientId = () => `mcpc_${randomBytes(16).toString('hex')}`;

/** RFC 7636 S256: BASE64URL(SHA256(verifier)) equals the challenge (compared in constant time). */
export function pkceMatches(verifier: string, challenge: string): boolean {
  if (!/^[A-Za-z0-9._~-]{43,128}$/.test(verifier)) return false;
  const computed = Buffer.from(createHash('sha256').update(verifier).digest('base64url'));
  const expected = Buffer.from(challenge);
  return computed.length === expected.length && timingSafeEqual(computed, expected);
}
