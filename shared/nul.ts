// PostgreSQL stores no NUL (U+0000) in text or jsonb: a value holding one, written as it is, fails
// the statement. Callers refuse such input as the caller's fault before it reaches the database.

/** Whether a value (a parsed JSON document, a form, a query) has a NUL in any string or key, at any depth (walked without recursion). */
export function holdsNul(value: unknown): boolean {
  const stack = [value];
  while (stack.length > 0) {
    const v = stack.pop();
    if (typeof v === 'string' && v.includes('\u0000')) return true;
    if (!v || typeof v !== 'object') continue;
    for (const [k, child] of Object.entries(v)) {
      if (k.includes('\u0000')) return true;
      stack.push(child);
    }
  }
  return false;
}
