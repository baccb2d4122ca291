// Browser engine (playwright-core + Debian Chromium). Stage 2: not implemented yet.
import { ServiceError } from '../../shared/errors.ts';
import type { Recipe } from '../../shared/recipes/schema.ts';
import type { RunContext } from './interpreter.ts';

export interface BrowserPoolOptions {
  hostMap: Record<string, string>;
  chromiumPath?: string;
  concurrency: number;
  allowPrivateNetwork: boolean;
}

export class BrowserPool {
  constructor(readonly opts: BrowserPoolOptions) {}
  async run(_recipe: Recipe, _input: Record<string, unknown>, _ctx: RunContext, _signal: AbortSignal): Promise<unknown> {
    throw new ServiceError('engine_unavailable', 'The browser engine is not available yet');
  }
  async close(): Promise<void> {}
}
