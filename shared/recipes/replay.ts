// Whether re-running a recipe after a lost attempt (a worker that died mid-run) can repeat an
// action on the website. It cannot when every action step carries the query's stable reference
// (`{{run.request_ref}}`), which the site uses to return the first outcome instead of acting again.
// Workflow-safe: no Node built-ins.

const REF = /\{\{\s*run\.request_ref\s*\}\}/;

export function actionsReplaySafe(recipe: unknown): boolean {
  const steps: unknown[] = [];
  const walk = (node: unknown) => {
    if (Array.isArray(node)) node.forEach(walk);
    else if (node && typeof node === 'object') {
      const o = node as Record<string, unknown>;
      if (o.action === true) steps.push(o);
      for (const v of Object.values(o)) if (v && typeof v === 'object') walk(v);
    }
  };
  walk((recipe as { steps?: unknown } | null)?.steps);
  return steps.every((s) => REF.test(JSON.stringify(s)));
}
