// Query-parameter validation for the discovery routes: the zod schema that documents a route in
// OpenAPI also validates it; every bad parameter is 400 invalid_input naming the `param`.
import type { z } from 'zod';
import { ServiceError } from '../../../shared/errors.ts';
import { zodIssues } from '../../../shared/schemas/common.ts';

export function parseParams<T extends z.ZodType>(schema: T, query: unknown): z.infer<T> {
  const r = schema.safeParse(query ?? {});
  if (r.success) return r.data;
  const issues = zodIssues(r.error);
  const first = issues[0]!;
  throw new ServiceError('invalid_input', `${first.path || 'query'}: ${first.message}`, { param: first.path || undefined, details: { issues } });
}
