// The size of a value as shared/recipes/template.ts's assertBoundedValue counts it (nodes: array
// items and object members; characters: strings and member names), measured a piece at a time so a
// value growing by appends (a pagination's collected list) is checked as it grows, not walked again
// whole after each page.
import { MAX_VALUE_CHARS, MAX_VALUE_NODES, assertBoundedValue } from '../../shared/recipes/template.ts';

const hasOwn = (o: object, k: string) => Object.prototype.hasOwnProperty.call(o, k);

/**
 * A list's running size, as assertBoundedValue counts it. `add` counts one more item (a node, and
 * what it holds) and, as soon as the list is over the bounds, throws the very refusal the output's
 * check would (workflow_execution_failed, `value_too_large`). Measuring an item stops once the total
 * is past the bounds, so a huge item costs no more than the bound's worth of walking.
 */
export class BoundedList {
  private nodes = 0;
  private chars = 0;

  constructor(private readonly items: unknown[]) {}

  add(item: unknown): void {
    this.items.push(item);
    this.nodes++;
    const stack: unknown[] = [item];
    while (stack.length > 0 && !this.over()) {
      const v = stack.pop();
      if (typeof v === 'string') this.chars += v.length;
      else if (Array.isArray(v)) {
        this.nodes += v.length;
        for (const x of v) stack.push(x);
      } else if (v && typeof v === 'object') {
        for (const k in v) {
          if (!hasOwn(v, k)) continue;
          this.nodes++;
          this.chars += k.length;
          stack.push((v as Record<string, unknown>)[k]);
        }
      }
    }
    // The list's own check words the refusal (and is certain to throw: it counts the same way).
    if (this.over()) assertBoundedValue(this.items);
  }

  /** Forgets the items (a cumulative pagination's next page replaces them). */
  clear(): void {
    this.items.length = 0;
    this.nodes = 0;
    this.chars = 0;
  }

  private over(): boolean {
    return this.nodes > MAX_VALUE_NODES || this.chars > MAX_VALUE_CHARS;
  }
}
