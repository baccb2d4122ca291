// What people type that other people then read: an organization's name (sign-up; shown to whoever
// it invites, in their organization switcher and on the OAuth consent page), and a user's address
// (shown in Members, on keys as who made them). Such text must read as what it is:
//
// - no control characters (C0, DEL, C1: \p{Cc}) nor line or paragraph separators: they break lines
//   and act on terminals (`npm run admin` prints these values);
// - no bidirectional embeddings, overrides or isolates (U+202A–U+202E, U+2066–U+2069) nor direction
//   marks (LRM, RLM, ALM): "Acme\u202Egnp.exe" displays as "Acmeexe.png", so a name can show as
//   something it is not;
// - no invisible characters: every format character (\p{Cf}: the zero-width space, the BOM / zero-width
//   no-break space, the word joiner and invisible operators, the soft hyphen, direction marks,
//   interlinear annotation marks, tag characters U+E0001 and U+E0020–U+E007F), every default-ignorable
//   code point (\p{Default_Ignorable_Code_Point}: the combining grapheme joiner U+034F, the variation
//   selectors U+FE00–U+FE0F and U+E0100–U+E01EF, the Mongolian free variation selectors, the Hangul
//   and Mongolian fillers, the Khmer inherent vowels), the object replacement character U+FFFC and
//   the braille blank U+2800 (a blank that is not a space, so trimming keeps it). Two names that read
//   the same would differ ("Acme" and "Ac\u200Bme", "Acme" and "Acme\u{E0041}").
//
// Where an invisible character changes what is shown, and only there, it is accepted:
//
// - The zero-width non-joiner and joiner (U+200C, U+200D) are needed inside Persian and Indic words
//   and emoji sequences, so they are accepted between two non-ASCII characters and refused elsewhere
//   (next to a Latin letter, a digit, a space or an edge they only make a lookalike).
// - Variation selector-16 (U+FE0F) right after an emoji shown as text by default (\p{Emoji} without
//   \p{Emoji_Presentation}, not ASCII: "❤️", "☺️", "🏳️‍🌈"), or between a keycap base (# * 0-9) and
//   U+20E3 ("1️⃣"): there it turns a text symbol into an emoji, as emoji keyboards type it. After
//   anything else it shows nothing ("👍\uFE0F" reads as "👍", "e\uFE0F" as "e") and is refused, as
//   are the other variation selectors: a name reads the same with or without them in most fonts.
// - Tag characters only as the three flags Unicode recommends that are made of them (England,
//   Scotland, Wales: U+1F3F4, tags, U+E007F). Anywhere else they show nothing and can carry hidden
//   ASCII text.
//
// An upload's file name follows the same rule (apps/api/routes/files.ts `parseFileName`), so one
// rule holds for every name the service shows. The rules apply to names as they are given; names
// stored before them are shown through `shownText`.

/** Control characters, line and paragraph separators, direction embeddings, overrides and isolates. */
const CONTROL_CHARS = '\\p{Cc}\\u2028\\u2029\\u202A-\\u202E\\u2066-\\u2069';
/** Invisible characters: format characters, default-ignorable code points, U+FFFC, the braille blank. */
const INVISIBLE_CHARS = '\\p{Cf}\\p{Default_Ignorable_Code_Point}\\u2800\\uFFFC';
const CONTROL = new RegExp(`[${CONTROL_CHARS}]`, 'u');
const INVISIBLE = new RegExp(`[${INVISIBLE_CHARS}]`, 'u');
/** A ZWNJ/ZWJ not between two non-ASCII characters (which are not themselves joiners). */
const STRAY_JOINER = /(?:^|[\x00-\x7F\u200C\u200D])[\u200C\u200D]|[\u200C\u200D](?:$|[\x00-\x7F])/u;
/** The RGI subdivision flags: 🏴 + "gbeng" / "gbsct" / "gbwls" in tag characters + cancel tag. */
const TAG_FLAG = '\\u{1F3F4}\\u{E0067}\\u{E0062}(?:\\u{E0065}\\u{E006E}\\u{E0067}|\\u{E0073}\\u{E0063}\\u{E0074}|\\u{E0077}\\u{E006C}\\u{E0073})\\u{E007F}';
/** A VS16 that makes an emoji of a text-default emoji, or of a keycap base before U+20E3. */
const EMOJI_VS16 = '(?<=\\p{Emoji})(?<!\\p{Emoji_Presentation})(?<![\\x00-\\x7F])\\uFE0F|(?<=[#*0-9])\\uFE0F(?=\\u20E3)';
/** What of the invisible characters a name may hold where it stands (the joiners: STRAY_JOINER says where). */
const VISIBLE_USE = new RegExp(`${TAG_FLAG}|${EMOJI_VS16}|[\\u200C\\u200D]`, 'gu');

export const CONTROL_MESSAGE = 'must not contain control characters or direction overrides';
export const INVISIBLE_MESSAGE = 'must not contain invisible characters (zero-width spaces, direction marks, fillers)';

/** Why `value` cannot be a name people read (e.g. `must not contain control characters…`), or null. */
export function displayTextProblem(value: string): string | null {
  if (CONTROL.test(value)) return CONTROL_MESSAGE;
  if (STRAY_JOINER.test(value) || INVISIBLE.test(value.replace(VISIBLE_USE, ''))) return INVISIBLE_MESSAGE;
  return null;
}

/**
 * For an address (a sign-in name, unique): every invisible character is refused, the joiners,
 * variation selectors and tag flags included. Addresses are a service's name for a person, and no
 * address needs an invisible character.
 */
export function addressTextProblem(value: string): string | null {
  if (CONTROL.test(value)) return CONTROL_MESSAGE;
  if (INVISIBLE.test(value)) return INVISIBLE_MESSAGE;
  return null;
}

export const NOT_ASCII_MESSAGE = 'must be ASCII: URI-encode the value (encodeURIComponent); raw non-ASCII bytes are refused';

/**
 * Why a URI-encoded header value (X-File-Name) cannot be decoded as its sender meant, or null: it
 * must be ASCII. Node reads a header's raw bytes as Latin-1, so "café.txt" sent as raw UTF-8 arrives
 * as "cafÃ©.txt": a name nobody typed. Check it before `decodeURIComponent`, then the decoded text
 * with `displayTextProblem`.
 */
export function uriEncodedProblem(raw: string): string | null {
  return /[^\x00-\x7F]/.test(raw) ? NOT_ASCII_MESSAGE : null;
}

/** Every character CONTROL or INVISIBLE finds, and (captured) the uses of them a name may hold. */
const SHOWN_ESCAPED = new RegExp(`(${VISIBLE_USE.source})|[${CONTROL_CHARS}${INVISIBLE_CHARS}]`, 'gu');

const escaped = (c: string): string => {
  const hex = c.codePointAt(0)!.toString(16).toUpperCase();
  return hex.length > 4 ? `\\u{${hex}}` : `\\u${hex.padStart(4, '0')}`;
};

/**
 * Text others chose, as a page shows it: every character the rules above refuse written as a
 * visible `\uXXXX` (`\u{XXXXX}` past U+FFFF), so it cannot reorder or hide the page's own words
 * around it; the joiners, emoji variation selectors and tag flags stay (stray joiners too: they only
 * matter next to ASCII). For values no rule checked when they were stored: an OAuth client's
 * self-registered name (anyone may register one), and names stored before these rules.
 */
export const shownText = (value: string): string => value.replace(SHOWN_ESCAPED, (c: string, kept?: string) => kept ?? escaped(c));
