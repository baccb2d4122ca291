// Regular expressions that come from organizations (a built workflow's `pattern` and
// `patternProperties` in its JSON Schemas, a recipe field's `pattern`) run on other people's input in
// the API and the workers every organization shares. V8's engine backtracks: `^(\w|\d)*$` against
// forty characters and a `!` takes hours of one thread. So they run on RE2's linear-time engine
// (re2js, a pure-JS port): matching costs time proportional to the text, whatever the pattern.
// RE2 has no lookaround and no backreferences; a pattern using them is refused when the
// workflow is built (`patternProblem`).
import { RE2JS } from 're2js';

/**
 * The RE2 spelling of an ECMAScript pattern: `\uXXXX` and `\u{X…}` become `\x{…}` (RE2's escape
 * for a code point); every other escape is kept as written.
 */
export function toRe2(pattern: string): string {
  let out = '';
  for (let i = 0; i < pattern.length; i++) {
    const ch = pattern[i]!;
    if (ch !== '\\' || i + 1 >= pattern.length) {
      out += ch;
      continue;
    }
    const next = pattern[i + 1]!;
    if (next === 'u') {
      const braced = /^\{([0-9a-fA-F]{1,6})\}/.exec(pattern.slice(i + 2));
      const four = /^[0-9a-fA-F]{4}/.exec(pattern.slice(i + 2));
      if (braced) {
        out += `\\x{${braced[1]}}`;
        i += 1 + braced[0].length;
        continue;
      }
      if (four) {
        out += `\\x{${four[0]}}`;
        i += 5;
        continue;
      }
    }
    out += ch + next;
    i++;
  }
  return out;
}

const compiled = new Map<string, RE2JS>();
const MAX_CACHED = 2000;

/** The compiled pattern (cached); throws a SyntaxError-like error when RE2 cannot take it. */
export function compileLinear(pattern: string): RE2JS {
  let re = compiled.get(pattern);
  if (!re) {
    re = RE2JS.compile(toRe2(pattern));
    if (compiled.size >= MAX_CACHED) compiled.delete(compiled.keys().next().value!);
    compiled.set(pattern, re);
  }
  return re;
}

/** Why the linear-time engine cannot run `pattern`, or null when it can. */
export function patternProblem(pattern: string): string | null {
  try {
    compileLinear(pattern);
    return null;
  } catch (e) {
    const why = e instanceof Error ? e.message.replace(/^error parsing regexp: /, '') : 'invalid';
    return `not a regular expression this service can run in linear time (${why.slice(0, 120)}); lookaround and backreferences are not supported`;
  }
}

/** Does `pattern` match somewhere in `text` (JSON Schema `pattern` semantics: unanchored search)? */
export function linearTest(pattern: string, text: string): boolean {
  return compileLinear(pattern).matcher(text).find();
}

/** The first match's group 1, or the whole match; null when nothing matches. */
export function linearExtract(pattern: string, text: string): string | null {
  const m = compileLinear(pattern).matcher(text);
  if (!m.find()) return null;
  return (m.groupCount() >= 1 ? m.group(1) : null) ?? m.group(0);
}

/**
 * Ajv's `code.regExp`: `pattern` and `patternProperties` of every schema an organization wrote run on
 * the linear-time engine. (`code` names it for standalone code, which this service does not generate.)
 */
export const linearRegExp = Object.assign(
  (pattern: string, flags: string) => {
    const re = compileLinear(pattern);
    return { test: (s: string) => re.matcher(s).find(), toString: () => `/${pattern}/${flags}` };
  },
  { code: 'linearRegExp' },
);
