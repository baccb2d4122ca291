// Argon2id password hashing (@node-rs/argon2, the library's defaults: m=19456 KiB, t=2, p=1, the
// OWASP minimum). A sign-in for an unknown email still verifies against a dummy hash, so both cases
// cost the same and timing does not tell whether an account exists.
import { hash, verify } from '@node-rs/argon2';

export const MIN_PASSWORD_LENGTH = 10;
export const MAX_PASSWORD_LENGTH = 256;

/** A PHC string `$argon2id$v=19$m=19456,t=2,p=1$…` (Argon2id is the library's default algorithm). */
export const hashPassword = (password: string) => hash(password);

let dummy: Promise<string> | undefined;

/** Verify a password against a stored hash, or against a dummy one when there is none (same cost). */
export async function verifyPassword(stored: string | null, password: string): Promise<boolean> {
  const target = stored ?? (await (dummy ??= hashPassword('not a real password, only here to spend time')));
  try {
    const ok = await verify(target, password);
    return stored !== null && ok;
  } catch {
    return false;
  }
}

/** Why a new password is refused, or null. */
export function passwordProblem(password: string): string | null {
  if (password.length < MIN_PASSWORD_LENGTH) return `must be at least ${MIN_PASSWORD_LENGTH} characters`;
  if (password.length > MAX_PASSWORD_LENGTH) return `must be at most ${MAX_PASSWORD_LENGTH} characters`;
  return null;
}
