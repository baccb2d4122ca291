// The execute activity: runs an operation version's declarative recipe on its website.
import { Context } from '@temporalio/activity';
import { ApplicationFailure } from '@temporalio/common';
import { Ajv2020 } from 'ajv/dist/2020.js';
import addFormatsModule from 'ajv-formats';
import type { Db } from '../shared/db/pool.ts';
import { loadOperationVersion } from '../shared/db/catalog.ts';
import { ERRORS, ServiceError, type ErrorCode } from '../shared/errors.ts';
import { parseRecipe } from '../shared/recipes/schema.ts';
import type { RecipeRunner } from './engines/index.ts';
import type { ExecuteActivities } from './types.ts';

const addFormats = addFormatsModule as unknown as (ajv: Ajv2020) => Ajv2020;

function toApplicationFailure(code: ErrorCode, message: string, details?: unknown): ApplicationFailure {
  return ApplicationFailure.create({ type: code, message, details: details === undefined ? [] : [details], nonRetryable: !ERRORS[code].retryable });
}

export function createExecuteActivities(deps: { db: Db; runner: RecipeRunner }): ExecuteActivities {
  const ajv = addFormats(new Ajv2020({ allErrors: true, strict: false }));
  const validators = new Map<string, ReturnType<Ajv2020['compile']>>();
  const versionCache = new Map<string, NonNullable<Awaited<ReturnType<typeof loadOperationVersion>>>>();

  // Versions are immutable, so a loaded one can be kept for the worker's life.
  async function load(operationId: number, version: number) {
    const key = `${operationId}@${version}`;
    let v = versionCache.get(key);
    if (!v) {
      v = await loadOperationVersion(deps.db, operationId, version);
      if (!v) throw toApplicationFailure('internal_error', `operation version ${key} is missing`);
      versionCache.set(key, v);
    }
    return { key, v };
  }

  return {
    async executeOperation({ operationId, version, input, requestId }) {
      const ctx = Context.current();
      const { key, v } = await load(operationId, version);
      const recipe = parseRecipe(v.recipe);
      // Beat steadily so a dead worker is noticed fast and cancellation reaches us mid-step.
      const beat = setInterval(() => ctx.heartbeat(), 1_000);
      try {
        const output = await deps.runner.run(recipe, input, {
          signal: ctx.cancellationSignal,
          heartbeat: (d) => ctx.heartbeat(d),
          requestRef: requestId,
        });
        let validate = validators.get(key);
        if (!validate) {
          validate = ajv.compile(v.output_schema);
          validators.set(key, validate);
        }
        if (!validate(output)) {
          // The site answered but the recipe produced something off-contract: our fault, never a silent success.
          ctx.log.error('output does not match output_schema', { operationId, version, errors: validate.errors });
          throw toApplicationFailure('internal_error', 'The workflow produced output that does not match its output schema');
        }
        return output;
      } catch (err) {
        if (err instanceof ApplicationFailure) throw err;
        if (err instanceof ServiceError) throw toApplicationFailure(err.code, err.message, err.details);
        if (ctx.cancellationSignal.aborted) throw toApplicationFailure('execution_timeout', 'The workflow did not finish within its time limit');
        ctx.log.error('unexpected execution error', { operationId, version, error: String(err) });
        throw toApplicationFailure('internal_error', 'Unexpected error while running the workflow');
      } finally {
        clearInterval(beat);
      }
    },

  };
}
