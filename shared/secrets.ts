// The shortest secret value the service keeps and runs with. Redaction (activities/engines/errors.ts,
// `secretSpellings`) and the secret-host check replace or look for every spelling of a secret of at
// least this many characters; a shorter one would match inside ordinary text everywhere, so they
// cannot protect it. Connections refuse to store one (shared/db/connections.ts), a stored one fails
// its runs closed, and the recipe runner refuses one from anywhere else. One constant: the rule
// that stores a value and the code that protects it must never disagree.
// Workflow-safe: no Node built-ins.

export const MIN_SECRET_LENGTH = 3;

/** Whether redaction and the secret-host check can protect `value`. */
export const isProtectableSecret = (value: unknown): value is string => typeof value === 'string' && value.length >= MIN_SECRET_LENGTH;
