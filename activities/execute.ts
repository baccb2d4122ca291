// The execute activity: runs an operation version's declarative recipe on its website.
import { Context } from '@temporalio/activity';
import { ApplicationFailure } from '@temporalio/common';
import type { Db } from '../shared/db/pool.ts';
import { ERRORS, ServiceError, type ErrorCode } from '../shared/errors.ts';
import { loadSecrets, type AccessItem, type Keyring } from '../shared/db/connections.ts';
import { MIN_SECRET_LENGTH, isProtectableSecret } from '../shared/secrets.ts';
import type { RecipeRunner } from './engines/index.ts';
import { isFinalRefusal, redact } from './engines/errors.ts';
import type { ExecuteActivities } from './types.ts';
import { loadConfig } from '../shared/config.ts';
import { UnusableVersion, createVersionLoader } from './version-cache.ts';
import { ACTION_NOT_STARTED_MESSAGE } from '../shared/workflow-contract.ts';

/** `final`: a retry would fail the same way (our own fault, not the site's), whatever the catalog says to clients. */
function toApplicationFailure(code: ErrorCode, message: string, details?: unknown, final = !ERRORS[code].retryable): ApplicationFailure {
  return ApplicationFailure.create({ type: code, message, details: details === undefined ? [] : [details], nonRetryable: final });
}

/**
 * A connection that stopped being usable between the API's check and the run (also a builder test
 * run's answer). `secret_too_short`: a connection stored before the minimum secret length, which is
 * never run with: `auth_required` (add it again), `details.reason` saying why.
 */
export function accessFailure(items: AccessItem[], reason?: 'secret_too_short'): ApplicationFailure {
  const bad = items.filter((i) => i.status !== 'connected');
  const details = { access: items.map(({ kind, name, site, status }) => ({ kind, name, site, status })) };
  const list = (s: string) => bad.filter((i) => i.status === s).map((i) => `${i.name} (${i.site})`).join(', ');
  if (reason === 'secret_too_short')
    return toApplicationFailure(
      'auth_required',
      `The connected ${list('needs_reauth')} has a secret shorter than ${MIN_SECRET_LENGTH} characters, which cannot be kept out of outputs: add it again with its full value`,
      { ...details, reason },
    );
  if (bad.some((i) => i.status === 'missing'))
    return toApplicationFailure('credentials_missing', `The organization has no connection ${list('missing')} that this operation needs`, details);
  if (bad.some((i) => i.status === 'needs_reauth')) return toApplicationFailure('auth_required', `The connected ${list('needs_reauth')} must sign in again`, details);
  return toApplicationFailure('auth_revoked', `The connected ${list('revoked')} was disconnected`, details);
}

/** Bytes of an output's JSON; an output JSON cannot even write counts as too large to carry. */
function jsonBytes(value: unknown): number {
  try {
    return Buffer.byteLength(JSON.stringify(value) ?? 'null');
  } catch {
    return Number.POSITIVE_INFINITY;
  }
}

const mib = (bytes: number) => `${(bytes / 1_048_576).toFixed(1)} MiB`;

/**
 * An output Temporal could not carry: failing the completion would retry the run (repeating the
 * site's work, and for actions the action). It fails at once instead; the reservation is released.
 */
function outputTooLarge(bytes: number, limit: number): ApplicationFailure {
  const size = Number.isFinite(bytes) ? `${mib(bytes)} of output` : 'output nested too deeply to serialize';
  return toApplicationFailure(
    'workflow_execution_failed',
    `The website returned more than the service can carry (${size}; the limit is ${mib(limit)}); narrow the input and try again`,
    { reason: 'output_too_large', output_bytes: Number.isFinite(bytes) ? bytes : null, limit_bytes: limit },
    true,
  );
}

/**
 * An action step that gave up before reaching the website. On its first attempt the action
 * certainly did not happen. A later attempt follows one that was lost mid-run (only a lost attempt
 * of an action runs again), whose outcome nobody knows: that stays action_unconfirmed.
 */
function actionNotStarted(attempt: number): ApplicationFailure {
  if (attempt <= 1) return toApplicationFailure('execution_timeout', ACTION_NOT_STARTED_MESSAGE, undefined, true);
  return toApplicationFailure(
    'action_unconfirmed',
    'An earlier attempt of the action was lost before its outcome was known, and the deadline came before it could run again; check the website before trying again',
    undefined,
    true,
  );
}

export function createExecuteActivities(deps: {
  db: Db;
  runner: RecipeRunner;
  keyring: () => Promise<Keyring>;
  /** Largest output JSON in bytes; read once from EXECUTE_MAX_OUTPUT_BYTES when not given. */
  maxOutputBytes?: number;
  /** Bounds of the kept versions (version-cache.ts's defaults when not given). */
  versionCache?: { maxEntries?: number; maxBytes?: number };
}): ExecuteActivities {
  const maxOutputBytes = deps.maxOutputBytes ?? loadConfig().EXECUTE_MAX_OUTPUT_BYTES;
  // Connection secrets are decrypted with the configured key (CONNECTIONS_ENCRYPTION_KEY or the dev key in DATA_DIR).
  const keyring = deps.keyring;
  // Versions (recipe parsed, output schema compiled) are kept in a bounded LRU: version-cache.ts.
  const versions = createVersionLoader(deps.db, deps.versionCache);

  async function load(operationId: number, version: number) {
    try {
      return await versions.load(operationId, version);
    } catch (err) {
      if (err instanceof UnusableVersion) {
        // The detail (a recipe's or schema's defects) is the author's, not the caller's: logged only.
        Context.current().log.error('operation version cannot be run', { operationId, version, error: err.message, detail: err.detail });
        throw toApplicationFailure('internal_error', err.message, undefined, true);
      }
      throw err;
    }
  }

  return {
    async executeOperation({ operationId, version, input, requestId, orgId, deadlineAt, startBy, performsActions }) {
      const ctx = Context.current();
      const v = await load(operationId, version);
      const recipe = v.recipe;
      // An action never runs where a read-only step does (retried, a local step re-run after a
      // crash): whatever the run was told, a version that acts is refused there, before the site.
      if (v.acts && (ctx.info.isLocal || performsActions === false)) {
        ctx.log.error('an acting version reached the read-only path', { operationId, version, local: ctx.info.isLocal });
        throw toApplicationFailure('internal_error', 'The workflow could not be run', undefined, true);
      }
      // The calling organization's connections only (never a public workflow's creator's); read on
      // every run, never cached, so a connection revoked or expired since the API's check is seen.
      let secrets: Record<string, string> = {};
      let secretSites: Record<string, string> | undefined;
      if (v.access?.length) {
        let loaded;
        try {
          loaded = await loadSecrets(deps.db, await keyring(), orgId, v.access);
        } catch (err) {
          ctx.log.error('connection secrets could not be loaded', { operationId, version, error: err instanceof Error ? err.message : 'unknown' });
          throw toApplicationFailure('internal_error', 'The connected account or access key could not be read', undefined, true);
        }
        if (!loaded.ok) throw accessFailure(loaded.items, loaded.reason);
        secrets = loaded.secrets;
        secretSites = loaded.sites;
      }
      const secretValues = Object.values(secrets).filter(isProtectableSecret);
      // Beat steadily so a dead worker is noticed fast and cancellation reaches us mid-step. A local
      // activity (read-only HTTP) cannot heartbeat: its workflow task notices a dead worker instead.
      // Each beat carries the step the run is on (the Web UI shows it as the pending activity's
      // details); the runner reports every step, but only the steady beat sends one: a heartbeat
      // per step cost the worker's one thread 4-5 ms of a browser query (encoding, encryption and
      // the native call into the SDK's core), and a run shorter than a second now sends none.
      const local = ctx.info.isLocal;
      let step: unknown;
      const beat = local ? undefined : setInterval(() => ctx.heartbeat(step), 1_000);
      // The query's deadline bounds the run on the worker's own clock too: a local activity's
      // timeout counts from its (re)dispatch, so a workflow task retried after a crash would
      // otherwise let a late site answer through after the caller was told execution_timeout.
      // (Normal activities keep the server's timeout: an action cut off there, once begun, is action_unconfirmed.)
      const pastDeadline = local ? AbortSignal.timeout(Math.max(0, deadlineAt - Date.now())) : undefined;
      const signal = pastDeadline ? AbortSignal.any([ctx.cancellationSignal, pastDeadline]) : ctx.cancellationSignal;
      // An action begins its work on the website by `startBy` (on this worker's clock) or never: its
      // wait for a browser page gives up then, and a page got later is not used. Such a refusal is
      // certain that nothing happened, and it reaches the server before the server's timeout at the
      // deadline would report the attempt as one whose outcome is unknown. An attempt the server has
      // already given up on (its cancellation arrives through the heartbeats) does not begin either.
      const gated = !local && startBy !== undefined;
      let begun = !gated;
      const gate = gated
        ? {
            startSignal: AbortSignal.timeout(Math.max(0, startBy - Date.now())),
            beforeSite: () => {
              if (Date.now() >= startBy || ctx.cancellationSignal.aborted) throw new ServiceError('execution_timeout', ACTION_NOT_STARTED_MESSAGE);
              begun = true;
            },
          }
        : {};
      try {
        const output = await deps.runner.run(recipe, input, {
          signal,
          heartbeat: (d) => {
            step = d;
          },
          secrets,
          secretSites,
          requestRef: requestId,
          party: orgId,
          ...gate,
        });
        if (pastDeadline?.aborted) throw new Error('answered after the deadline'); // reported as execution_timeout below
        const validate = v.validate;
        if (!validate(output)) {
          // A string too long to check against the output schema's pattern (shared/regex.ts) was not
          // matched: the output is not known to conform, and running it again reads the same text.
          const unchecked = validate.errors?.find((e) => e.params.tooLongToCheck === true);
          if (unchecked) {
            ctx.log.warn('output too long to check against output_schema', { operationId, version, path: unchecked.instancePath, message: unchecked.message });
            throw toApplicationFailure('internal_error', `The workflow's output could not be checked against its output schema: ${unchecked.instancePath || '/'} ${unchecked.message}`, undefined, true);
          }
          // The site answered but the recipe produced something off-contract: our fault, never a silent success.
          ctx.log.error('output does not match output_schema', { operationId, version, errors: validate.errors });
          throw toApplicationFailure('internal_error', 'The workflow produced output that does not match its output schema', undefined, true);
        }
        // A site may echo a secret back; it never leaves the worker (outputs are never cached either).
        const result = redact(output, secretValues);
        const bytes = jsonBytes(result);
        if (bytes > maxOutputBytes) {
          ctx.log.warn('output over the payload bound', { operationId, version, bytes, limit: maxOutputBytes });
          throw outputTooLarge(bytes, maxOutputBytes);
        }
        return result;
      } catch (err) {
        if (pastDeadline?.aborted) throw toApplicationFailure('execution_timeout', 'The workflow did not finish within its time limit', undefined, true);
        // Timed out (the start bound, the recipe's own timeout, a cancellation) before reaching the site.
        if (!begun && err instanceof ServiceError && err.code === 'execution_timeout') throw actionNotStarted(ctx.info.attempt);
        if (err instanceof ApplicationFailure) throw err;
        if (err instanceof ServiceError) throw toApplicationFailure(err.code, redact(err.message, secretValues), redact(err.details, secretValues), isFinalRefusal(err) || undefined);
        if (ctx.cancellationSignal.aborted) throw toApplicationFailure('execution_timeout', 'The workflow did not finish within its time limit');
        ctx.log.error('unexpected execution error', { operationId, version, error: redact(String(err), secretValues) });
        throw toApplicationFailure('internal_error', 'Unexpected error while running the workflow');
      } finally {
        clearInterval(beat);
      }
    },

  };
}
