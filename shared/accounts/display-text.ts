// What people type that other people then read: an organization's name (sign-up; shown to whoever
// it invites, in their organization switcher and on the OAuth consent page), and a user's address
// (shown in Members, on keys as who made them). Such text must read as what it is:
//
// - no control characters (C0, DEL, C1: \p{Cc}) nor line or paragraph separators: they break lines
//   and act on terminals (`npm run admin` prints these values);
// - no bidirectional embeddings, overrides or isolates (U+202A–U+202E, U+2066–U+2069) nor direction
//   marks (LRM, RLM, ALM): "Acme\u202Egnp.exe" displays as "Acmeexe.png", so a name can show as
//   something it is not;
// - no invisible characters: the zero-width space, the BOM / zero-width no-break space, the word
//   joiner and invisible operators, the soft hyphen, the Hangul and Mongolian fillers. Two names
//   that read the same would differ ("Acme" and "Ac\u200Bme").
//
// The zero-width non-joiner and joiner (U+200C, U+200D) are needed inside Persian and Indic words
// and emoji sequences, so they are accepted between two non-ASCII characters and refused elsewhere
// (next to a Latin letter, a digit, a space or an edge they only make a lookalike).
//
// An upload's file name follows the same rule (apps/api/routes/files.ts `parseFileName`), so one
// rule holds for every name the service shows.

/** Control characters, line and paragraph separators, direction embeddings, overrides and isolates. */
const CONTROL_CHARS = '\\p{Cc}\\u2028\\u2029\\u202A-\\u202E\\u2066-\\u2069';
/** Invisible characters: soft hyphen, direction marks, fillers, zero-width space, word joiner and invisible operators, BOM. */
const INVISIBLE_CHARS = '\\u00AD\\u061C\\u115F\\u1160\\u180E\\u200B\\u200E\\u200F\\u2060-\\u2064\\u3164\\uFEFF\\uFFA0';
const CONTROL = new RegExp(`[${CONTROL_CHARS}]`, 'u');
const INVISIBLE = new RegExp(`[${INVISIBLE_CHARS}]`, 'u');
/** A ZWNJ/ZWJ not between two non-ASCII characters (which are not themselves joiners). */
const STRAY_JOINER = /(?:^|[\x00-\x7F\u200C\u200D])[\u200C\u200D]|[\u200C\u200D](?:$|[\x00-\x7F])/u;

export const CONTROL_MESSAGE = 'must not contain control characters or direction overrides';
export const INVISIBLE_MESSAGE = 'must not contain invisible characters (zero-width spaces, direction marks, fillers)';

/** Why `value` cannot be a name people read (e.g. `must not contain control characters…`), or null. */
export function displayTextProblem(value: string): string | null {
  if (CONTROL.test(value)) return CONTROL_MESSAGE;
  if (INVISIBLE.test(value) || STRAY_JOINER.test(value)) return INVISIBLE_MESSAGE;
  return null;
}

/**
 * For an address (a sign-in name, unique): every format character (\p{Cf}: all of the above, the
 * joiners included, tag characters) is refused as well. Addresses are a service's name for a person,
 * and no address needs an invisible character.
 */
export function addressTextProblem(value: string): string | null {
  if (CONTROL.test(value)) return CONTROL_MESSAGE;
  if (INVISIBLE.test(value) || /\p{Cf}/u.test(value)) return INVISIBLE_MESSAGE;
  return null;
}

/** Every character CONTROL or INVISIBLE finds (stray joiners are not: they only matter next to ASCII). */
const SHOWN_ESCAPED = new RegExp(`[${CONTROL_CHARS}${INVISIBLE_CHARS}]`, 'gu');

/**
 * Text others chose, as a page shows it: every character the rules above refuse written as a
 * visible `\uXXXX`, so it cannot reorder or hide the page's own words around it. For values no rule
 * checked when they were stored: an OAuth client's self-registered name (anyone may register one),
 * and names stored before these rules.
 */
export const shownText = (value: string): string =>
  value.replace(SHOWN_ESCAPED, (c) => `\\u${c.charCodeAt(0).toString(16).toUpperCase().padStart(4, '0')}`);
