// Builder test runs: one verified example of a DRAFT recipe (not a published version) on the real
// engines. Same runner, private-address guards, connection loading and secret redaction as the
// execute activity; the differences are that the recipe comes with the call and that every outcome
// (a wrong output, an off-schema output, a site's failure) is a result to show, not a failure.
import { isDeepStrictEqual } from 'node:util';
import { Context } from '@temporalio/activity';
import type { Db } from '../shared/db/pool.ts';
import { loadSecrets, type Keyring } from '../shared/db/connections.ts';
import { ServiceError } from '../shared/errors.ts';
import { parseRecipe } from '../shared/recipes/schema.ts';
import type { RecipeRunner } from './engines/index.ts';
import { redact } from './engines/errors.ts';
import { accessFailure } from './execute.ts';
import { failedExample, type BuilderActivities, type DraftExampleResult } from './types.ts';
import { compileOrgSchema } from '../shared/org-schemas.ts';
import { isProtectableSecret } from '../shared/secrets.ts';

/** JSON's view of a value: what a caller would receive. */
const asJson = (v: unknown): unknown => (v === undefined ? null : JSON.parse(JSON.stringify(v)));

export function createBuilderActivities(deps: { db: Db; runner: RecipeRunner; keyring: () => Promise<Keyring> }): BuilderActivities {
  return {
    async runDraftExample({ orgId, testRunId, example }) {
      const ctx = Context.current();
      const started = Date.now();
      const base = { operation: example.operation, index: example.index, title: example.title, input: example.input, expected: example.expected };
      const failed = (code: string, message: string): DraftExampleResult => failedExample(example, code, message, Date.now() - started);
      let secrets: Record<string, string> = {};
      let secretSites: Record<string, string> | undefined;
      if (example.access.length) {
        // The testing organization's own connections, exactly as its queries would use them.
        const loaded = await loadSecrets(deps.db, await deps.keyring(), orgId, example.access);
        if (!loaded.ok) {
          const f = accessFailure(loaded.items, loaded.reason);
          return failed(f.type ?? 'credentials_missing', f.message);
        }
        secrets = loaded.secrets;
        secretSites = loaded.sites;
      }
      const secretValues = Object.values(secrets).filter(isProtectableSecret);
      const beat = setInterval(() => ctx.heartbeat(), 1_000);
      try {
        const raw = await deps.runner.run(parseRecipe(example.recipe), example.input, {
          signal: ctx.cancellationSignal,
          heartbeat: (d) => ctx.heartbeat(d),
          secrets,
          secretSites,
          requestRef: `${testRunId}_${example.operation}_${example.index}`,
          party: orgId,
        });
        const output = asJson(redact(raw, secretValues));
        const validate = compileOrgSchema(example.outputSchema);
        const schemaOk = validate(output);
        const schemaErrors = (validate.errors ?? []).map((e) => ({ path: e.instancePath || '/', message: e.message ?? 'is invalid' }));
        const equal = isDeepStrictEqual(output, asJson(example.expected));
        return { ...base, output, equal, schema_ok: schemaOk, schema_errors: schemaErrors, error: null, passed: equal && schemaOk, ms: Date.now() - started };
      } catch (err) {
        if (err instanceof ServiceError) return failed(err.code, redact(err.message, secretValues));
        if (ctx.cancellationSignal.aborted) return failed('execution_timeout', 'The example did not finish within its time limit');
        ctx.log.warn('test-run example failed unexpectedly', { testRunId, operation: example.operation, index: example.index, error: redact(String(err), secretValues) });
        return failed('internal_error', 'Unexpected error while running the example');
      } finally {
        clearInterval(beat);
      }
    },

    async recordTestRun({ testRunId, status, results }) {
      await deps.db.query(
        `UPDATE builder_test_runs SET status = $2, results = $3, finished_at = now() WHERE id = $1 AND status = 'running'`,
        [testRunId, status, JSON.stringify(results)],
      );
    },
  };
}
