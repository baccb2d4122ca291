// Regular expressions that come from organizations (a built workflow's `pattern` and
// `patternProperties` in its JSON Schemas, a recipe field's `pattern`) run on other people's input in
// the API and the workers every organization shares. V8's engine backtracks: `^(\w|\d)*$` against
// forty characters and a `!` takes hours of one thread. So they run on RE2's linear-time engine
// (re2js, a pure-JS port): matching costs time proportional to the text, whatever the pattern.
// RE2 has no lookaround and no backreferences; a pattern using them is refused when the
// workflow is built (`patternProblem`).
//
// Linear is not cheap: RE2 follows every instruction of the compiled program that can be live at a
// character, so a match costs up to (characters × instructions). `(?:a?){1000}a{1000}[^a]`, 22
// characters, compiles to 3,003 instructions and took 2.5 s over 20,000 characters, 18.5 s over
// 100,000, on a thread every organization shares. Measured here, a step of (one character × one
// instruction) takes 20 to 50 ns in the worst case. So: a pattern compiling to more than
// MAX_PATTERN_INSTRUCTIONS is refused where it is accepted (`patternProblem`), and every match is
// charged its cost (`patternCost`) before it runs: in extraction against the document's work budget
// (activities/engines/extract.ts), in JSON Schema validation against PATTERN_WORK_PER_VALUE for the
// whole value checked (`checkingPatterns`, shared/org-schemas.ts). A string whose match would go
// over is not matched: it is refused as too long to check against its pattern.
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

/**
 * The most instructions a pattern may compile to. The largest pattern this service's own schemas,
 * catalog and demo sites use compiles to 262 (a host name, with two `{0,61}`); `^[a-z][a-z0-9_]{0,99}$`
 * is 203. A counted repetition compiles to a copy of its body per count (`.{0,1000}` is 2,002).
 */
export const MAX_PATTERN_INSTRUCTIONS = 1000;

/**
 * Steps (characters × instructions, `patternCost`) that checking one value against a JSON Schema's
 * patterns may take, all its strings and property names together: at most about 0.2 s of the
 * thread. A 1,000-instruction pattern checks 4,000 characters, a 200-instruction one 20,000, and
 * `^https?://` (7) 570,000.
 */
export const PATTERN_WORK_PER_VALUE = 4_000_000;

/** Why the linear-time engine cannot run `pattern`, or null when it can. */
export function patternProblem(pattern: string): string | null {
  let size: number;
  try {
    size = compileLinear(pattern).programSize();
  } catch (e) {
    const why = e instanceof Error ? e.message.replace(/^error parsing regexp: /, '') : 'invalid';
    return `not a regular expression this service can run in linear time (${why.slice(0, 120)}); lookaround and backreferences are not supported`;
  }
  if (size > MAX_PATTERN_INSTRUCTIONS) {
    return `compiles to ${size} instructions, more than the ${MAX_PATTERN_INSTRUCTIONS} a pattern may have (matching costs each character of text a step per instruction): write large counted repetitions such as {0,500} as * or +, or with smaller counts`;
  }
  return null;
}

/**
 * Steps matching a pattern of `instructions` (its compiled program's size) over `length`
 * characters may take: each character, and the end of the text, can visit every instruction.
 */
export function patternCost(instructions: number, length: number): number {
  return instructions * (length + 1);
}

/** `patternCost` of `pattern` over `text` (the pattern compiled, and cached, to know its size). */
export function matchCost(pattern: string, text: string): number {
  return patternCost(compileLinear(pattern).programSize(), text.length);
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

/** A string (or property name) not matched against `pattern` because its match would cost too much. */
export interface PatternRefusal {
  pattern: string;
  text: string;
  instructions: number;
  /** Whether the string alone costs more than PATTERN_WORK_PER_VALUE (else the value's earlier strings used the rest). */
  alone: boolean;
}

/** What one value's check may still spend, and what it refused. */
interface Meter {
  left: number;
  refused: PatternRefusal[];
}

/** The check running now (validation is synchronous: one at a time per thread). */
let meter: Meter | null = null;

/**
 * Runs `check` (a validation whose patterns go through `linearRegExp`) with one budget of
 * PATTERN_WORK_PER_VALUE for all of its pattern matches. A match that would go over is not run,
 * tests false, and is listed in `refused`: the caller must treat a value with refusals as invalid,
 * whatever `check` answered (under `not`, `if` or `anyOf` a false test can make a value valid).
 */
export function checkingPatterns<T>(check: () => T): { result: T; refused: PatternRefusal[] } {
  const outer = meter;
  const mine: Meter = { left: PATTERN_WORK_PER_VALUE, refused: [] };
  meter = mine;
  try {
    return { result: check(), refused: mine.refused };
  } finally {
    meter = outer;
  }
}

/** Refusals listed per check: past these, more strings are refused without being listed (the check fails all the same). */
const MAX_REFUSALS_LISTED = 100;

/**
 * Ajv's `code.regExp`: `pattern` and `patternProperties` of every schema an organization wrote run on
 * the linear-time engine, each match charged (`patternCost`) before it runs. Inside
 * `checkingPatterns` a value's matches share one budget; elsewhere (the LLM router's and the
 * definition format's own validators) each match has PATTERN_WORK_PER_VALUE alone, and one over it
 * tests false. (`code` names it for standalone code, which this service does not generate.)
 */
export const linearRegExp = Object.assign(
  (pattern: string, flags: string) => {
    const re = compileLinear(pattern);
    const instructions = re.programSize();
    return {
      test: (s: string) => {
        const cost = patternCost(instructions, s.length);
        const m = meter;
        if (cost > (m ? m.left : PATTERN_WORK_PER_VALUE)) {
          if (m && m.refused.length < MAX_REFUSALS_LISTED) m.refused.push({ pattern, text: s, instructions, alone: cost > PATTERN_WORK_PER_VALUE });
          return false;
        }
        if (m) m.left -= cost;
        return re.matcher(s).find();
      },
      toString: () => `/${pattern}/${flags}`,
    };
  },
  { code: 'linearRegExp' },
);
