// Publish-time checks of an operation version beyond its recipe's own schema: the operation's
// declared `performs_actions` must agree with what its recipes do. The flag decides whether a run
// may be retried, health-checked or offered to read-only clients, so a wrong `false` would let the
// service repeat an order or a booking; it is derived from the recipe and a disagreement refuses
// the publish.
import { RecipeValidationError, parseRecipe, type Recipe, type Step } from '../recipes/schema.ts';
import type { OperationDefinition } from './types.ts';

/** Methods that change something by definition: an unmarked step with one of them is refused. */
const WRITE_METHODS = new Set(['PUT', 'PATCH', 'DELETE']);

function walk(steps: Step[], path: string, visit: (s: Step, path: string) => void): void {
  steps.forEach((s, i) => {
    visit(s, `${path}/${i}`);
    if (s.type === 'paginate') walk(s.steps, `${path}/${i}/steps`, visit);
  });
}

/** Whether running the recipe changes something on a website: any step marked `action: true`. */
export function recipeActions(recipe: Recipe): { performsActions: boolean; unmarkedWrites: string[] } {
  let performsActions = false;
  const unmarkedWrites: string[] = [];
  walk(recipe.steps, 'steps', (s, path) => {
    if (s.action === true) performsActions = true;
    else if (s.type === 'request' && WRITE_METHODS.has(s.method ?? 'GET')) unmarkedWrites.push(path);
  });
  return { performsActions, unmarkedWrites };
}

/**
 * The publish-time validator of one version (the `validateRecipe` hook of `publishApi`): the recipe
 * parses, every PUT/PATCH/DELETE request is marked as an action, and the operation's
 * `performs_actions` is true exactly when some version of it performs actions (a read-only version
 * of an action operation is treated as an action: never retried, which is safe).
 */
export function validateOperationVersion(recipe: unknown, op?: OperationDefinition): void {
  const parsed = parseRecipe(recipe);
  const own = recipeActions(parsed);
  if (own.unmarkedWrites.length) {
    throw new RecipeValidationError(own.unmarkedWrites.map((p) => ({ path: `${p}/action`, message: 'a PUT, PATCH or DELETE request changes the website: mark it `action: true`' })));
  }
  if (!op) return;
  const derived = op.versions.some((v) => {
    try {
      return recipeActions(parseRecipe(v.recipe)).performsActions;
    } catch {
      return false; // that version's own validation reports it
    }
  });
  const declared = op.performs_actions ?? false;
  if (declared !== derived) {
    const why = derived
      ? 'a version has steps marked `action: true`, so the operation must declare performs_actions: true'
      : 'no version has a step marked `action: true`, so the operation must not declare performs_actions: true';
    throw new RecipeValidationError([{ path: 'performs_actions', message: `${op.name}: ${why}` }]);
  }
}
