// How many parsed pages the worker process holds at once. A parsed page may take about 100 MiB of
// heap (MAX_HTML_NODES, extract.ts); every run on the worker parses on its one thread, so more
// pages in memory at once make nothing faster, only a larger heap: three runs at once on pages of
// tiny elements took a worker to 2 GiB, past its container's 768 MiB, and every organization's
// runs on it died with it. A run takes a slot before it parses a page and keeps it while it reads
// that page (extraction, conditions, a pagination's next link), giving it back before it waits for
// the website again (a request, a navigation, a click, a fill, a wait) and when it ends.
import { Semaphore } from './fair-semaphore.ts';
import { HEALTH_PARTY } from './interpreter.ts';

/** Parsed pages held at once in the process: one being read while the next is parsed. */
export const DOCUMENT_SLOTS = 2;

let slots: Semaphore | undefined;

/**
 * The process's slots, fair between organizations (a freed slot goes to the party holding the
 * fewest, then to the one served longest ago; first come first served within one), each waiter
 * giving up when its run's signal aborts (a cancellation or the deadline). Health checks hold at
 * most one, so a query never waits behind a sweep of examples. Made when first used (this module
 * and the engines import each other).
 */
export function documentSlots(): Semaphore {
  slots ??= new Semaphore(DOCUMENT_SLOTS, { [HEALTH_PARTY]: Math.max(1, DOCUMENT_SLOTS - 1) });
  return slots;
}
