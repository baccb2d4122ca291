// Recipe runner: validates a recipe once, picks the engine, bounds the run by the caller's signal
// (and the recipe's own timeout_ms), and returns the assembled output. Errors are ServiceErrors
// with catalog codes and never contain secrets.

import { ServiceError } from '../../shared/errors.ts';
import { MIN_SECRET_LENGTH, isProtectableSecret } from '../../shared/secrets.ts';
import { RecipeValidationError, parseRecipe, type Recipe } from '../../shared/recipes/schema.ts';
import { redactError } from './errors.ts';
import { HttpDriver, createHttpDispatcher } from './http-engine.ts';
import { Interpreter, makeUrlCheck, type RunContext } from './interpreter.ts';
import type { BrowserPool, SandboxMode } from './browser-engine.ts';
import { Semaphore, browserPageSlots } from './fair-semaphore.ts';

export type { RunContext } from './interpreter.ts';

export interface RecipeRunner {
  run(recipe: Recipe, input: Record<string, unknown>, ctx: RunContext): Promise<unknown>;
  close(): Promise<void>;
}

export interface RecipeRunnerOptions {
  /** host → 'address:port'; in dev and tests routes demo hosts to apps/demo-sites (both engines). */
  hostMap?: Record<string, string>;
  /** Chromium binary; default CHROMIUM_PATH, then Debian's headless shell or full browser (defaultChromiumPath). */
  chromiumPath?: string;
  /** Chromium's sandbox (CHROMIUM_SANDBOX; default `auto`). */
  chromiumSandbox?: SandboxMode;
  /** Concurrent browser runs per runner (default 2). */
  browserConcurrency?: number;
  /** Let unmapped hosts reach private addresses (never in production). */
  allowPrivateNetwork?: boolean;
  /** HTTP runs at once per runner (HTTP_CONCURRENCY; default 100). */
  httpConcurrency?: number;
  /** Of those, at most this many for one organization (HTTP_CONCURRENCY_PER_ORG; default a quarter). */
  httpConcurrencyPerOrg?: number;
}

const validated = new WeakSet<object>();

function validate(recipe: Recipe): Recipe {
  if (recipe && typeof recipe === 'object' && validated.has(recipe)) return recipe;
  try {
    const parsed = parseRecipe(recipe);
    validated.add(parsed);
    if (recipe && typeof recipe === 'object') validated.add(recipe);
    return parsed;
  } catch (e) {
    if (e instanceof RecipeValidationError)
      throw new ServiceError('internal_error', 'The operation has an invalid recipe', { details: { issues: e.issues.slice(0, 20) } });
    throw e;
  }
}

/** `browserPages`: the Chromium pages' semaphore (the browser worker's task slots follow what health checks hold of it). */
export function createRecipeRunner(opts: RecipeRunnerOptions = {}): RecipeRunner & { readonly browserPages: Semaphore } {
  const hostMap = Object.fromEntries(Object.entries(opts.hostMap ?? {}).map(([k, v]) => [k.toLowerCase(), v]));
  const dispatcher = createHttpDispatcher({ hostMap, allowPrivateNetwork: opts.allowPrivateNetwork });
  const browserPages = browserPageSlots(opts.browserConcurrency ?? 2);
  // HTTP runs wait on the website, not on this process, and read-only ones run as local activities,
  // whose slots the SDK hands out first come first served with no regard for whose run it is: this
  // is where they are shared out. Each organization (and the health checks) may hold a share below
  // the total, so another's run starts at once however many runs one keeps waiting, and a freed
  // slot goes to the waiting organization holding the fewest.
  const httpTotal = Math.max(1, opts.httpConcurrency ?? 100);
  const httpSlots = new Semaphore(httpTotal, {}, Math.min(httpTotal, Math.max(1, opts.httpConcurrencyPerOrg ?? Math.floor(httpTotal / 4))));
  let browser: BrowserPool | null = null;
  let browserLoading: Promise<BrowserPool> | null = null;
  let closed = false;

  const getBrowser = async (): Promise<BrowserPool> => {
    if (browser) return browser;
    if (!browserLoading) {
      browserLoading = import('./browser-engine.ts').then(
        (m) =>
          (browser = new m.BrowserPool({
            hostMap,
            chromiumPath: opts.chromiumPath,
            sandbox: opts.chromiumSandbox,
            concurrency: opts.browserConcurrency ?? 2,
            allowPrivateNetwork: opts.allowPrivateNetwork ?? false,
            pages: browserPages,
          })),
      );
    }
    return browserLoading;
  };

  return {
    browserPages,
    async run(recipeIn, input, ctx) {
      if (closed) throw new ServiceError('engine_unavailable', 'The recipe runner is closed');
      const recipe = validate(recipeIn);
      const signals = [ctx.signal];
      if (recipe.timeout_ms) signals.push(AbortSignal.timeout(recipe.timeout_ms));
      const signal = signals.length > 1 ? AbortSignal.any(signals) : ctx.signal;
      // A secret redaction cannot protect is never run with, wherever it came from (connections
      // refuse to store one and fail a stored one closed first: shared/secrets.ts).
      const values = Object.values(ctx.secrets ?? {});
      if (values.some((s) => !isProtectableSecret(s)))
        throw new ServiceError('auth_required', `A secret shorter than ${MIN_SECRET_LENGTH} characters cannot be kept out of outputs; the run was not started`, {
          details: { reason: 'secret_too_short' },
        });
      const secrets = values as string[];
      if (recipe.engine === 'http') {
        // The wait for a slot touches no website: `ctx.startSignal` may end it too, as a browser page's.
        let release: () => void;
        try {
          release = await httpSlots.acquire(ctx.startSignal ? AbortSignal.any([signal, ctx.startSignal]) : signal, ctx.party);
        } catch {
          throw new ServiceError('execution_timeout', 'The website task did not start within its time limit (all HTTP slots busy)');
        }
        try {
          const driver = new HttpDriver(dispatcher, makeUrlCheck(recipe.hosts));
          ctx.beforeSite?.();
          return await new Interpreter(recipe, driver, input, ctx, signal).run();
        } finally {
          release();
        }
      }
      try {
        const pool = await getBrowser();
        return await pool.run(recipe, input, ctx, signal);
      } catch (e) {
        if (e instanceof ServiceError) throw redactError(e, secrets);
        throw e;
      }
    },
    async close() {
      closed = true;
      const b = browser ?? (browserLoading ? await browserLoading.catch(() => null) : null);
      await Promise.allSettled([dispatcher.close(), b?.close()]);
    },
  };
}
