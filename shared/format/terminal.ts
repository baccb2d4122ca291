// Text for an operator's terminal. JSON.stringify escapes the C0 controls (ESC among them) but
// leaves DEL, the C1 controls and the bidirectional controls raw, and the admin command prints
// data others wrote: organization names and connection names from the console, what a website
// answered a test run. Terminals such as xterm act on UTF-8 C1 controls as escape sequences
// (U+009B is CSI, U+009D starts an OSC: colours, the window title, clipboard writes, hyperlinks),
// and bidirectional overrides make a line read as something else.

/** DEL, C1, line/paragraph separators, bidirectional marks, embeddings, overrides and isolates. */
const UNSAFE_IN_JSON = /[\u007f-\u009f\u061c\u200e\u200f\u2028\u2029\u202a-\u202e\u2066-\u2069]/g;
/** The same, plus the C0 controls (which JSON.stringify already escapes inside strings). */
const UNSAFE_IN_TEXT = /[\u0000-\u0008\u000b-\u001f\u007f-\u009f\u061c\u200e\u200f\u2028\u2029\u202a-\u202e\u2066-\u2069]/g;

const escape = (c: string) => `\\u${c.charCodeAt(0).toString(16).padStart(4, '0')}`;

/**
 * JSON.stringify(value) with every character a terminal could act on written as a \uXXXX escape.
 * Such characters can only occur inside JSON string literals, where the escape means the same
 * character: JSON.parse gives back exactly `value`.
 */
export const terminalJson = (value: unknown): string => JSON.stringify(value).replace(UNSAFE_IN_JSON, escape);

/** Plain text (a message) with the same characters, and the C0 controls but tab and newline, escaped. */
export const terminalText = (text: string): string => text.replace(UNSAFE_IN_TEXT, escape);
