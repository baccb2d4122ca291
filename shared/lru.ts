// A bounded map for per-process caches: least recently used keys are forgotten first.

/**
 * A map that forgets its least recently used keys past `maxEntries`, or past `maxWeight` summed
 * over its values' weights. A value heavier than `maxWeight` alone is not kept at all.
 */
export class Lru<K, V> {
  private readonly items = new Map<K, { value: V; weight: number }>();
  private total = 0;

  constructor(
    private readonly maxEntries: number,
    private readonly maxWeight = Number.POSITIVE_INFINITY,
    private readonly weigh: (value: V) => number = () => 0,
  ) {}

  get(key: K): V | undefined {
    const item = this.items.get(key);
    if (!item) return undefined;
    // A Map keeps insertion order: a hit moves to the end, so the first key is the least recent.
    this.items.delete(key);
    this.items.set(key, item);
    return item.value;
  }

  set(key: K, value: V): void {
    this.delete(key);
    const weight = this.weigh(value);
    this.items.set(key, { value, weight });
    this.total += weight;
    while (this.items.size > this.maxEntries || this.total > this.maxWeight) this.delete(this.items.keys().next().value as K);
  }

  delete(key: K): void {
    const item = this.items.get(key);
    if (!item) return;
    this.items.delete(key);
    this.total -= item.weight;
  }

  get size(): number {
    return this.items.size;
  }

  /** The summed weight of what is kept. */
  get weight(): number {
    return this.total;
  }
}
