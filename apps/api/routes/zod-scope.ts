// Zod route schemas in an encapsulated plugin scope: the compilers (in case the app has not set
// them), and validation failures as the spec's `invalid_input` with `param` and `details.issues`.
// Anything else is rethrown to the app's central handler.
import type { FastifyError, FastifyInstance } from 'fastify';
import { hasZodFastifySchemaValidationErrors, serializerCompiler, validatorCompiler } from 'fastify-type-provider-zod';
import { ServiceError, type ValidationIssue } from '../../../shared/errors.ts';

/** Canonical spellings of headers named in `param` (Fastify lower-cases header names). */
const HEADER_NAMES: Record<string, string> = { 'x-file-name': 'X-File-Name', 'idempotency-key': 'Idempotency-Key' };

function paramOf(context: string | undefined, instancePath: string): string {
  const parts = instancePath.split('/').filter((p) => p !== '');
  if (context === 'headers' && parts[0]) return HEADER_NAMES[parts[0]] ?? parts[0];
  return parts.join('.');
}

/** `mapError` may translate other failures of the scope (e.g. a content-type parser's) first. */
export function useZod(app: FastifyInstance, mapError: (err: FastifyError) => ServiceError | undefined = () => undefined): void {
  app.setValidatorCompiler(validatorCompiler);
  app.setSerializerCompiler(serializerCompiler);
  app.setErrorHandler((err: FastifyError, _request, _reply) => {
    if (hasZodFastifySchemaValidationErrors(err)) {
      const issues: ValidationIssue[] = err.validation.flatMap((v) => {
        const path = paramOf(err.validationContext, v.instancePath);
        // An unknown field is named by its own path, not its parent's.
        const keys = (v.params as { keys?: unknown }).keys;
        if (v.keyword === 'unrecognized_keys' && Array.isArray(keys)) {
          return keys.map((k) => ({ path: path ? `${path}.${String(k)}` : String(k), message: 'unknown field', code: v.keyword }));
        }
        return [{ path, message: v.message ?? 'invalid', code: v.keyword }];
      });
      const first = issues[0]!;
      throw new ServiceError('invalid_input', `${first.path || err.validationContext || 'request'}: ${first.message}`, {
        param: first.path || undefined,
        details: { issues },
      });
    }
    throw mapError(err) ?? err;
  });
}
