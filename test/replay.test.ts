// Workflow code changes must not break runs already in flight: every history recorded in
// test/histories (real runs of each workflow type, see its README) is replayed on the current
// workflow bundle. A change that issues different commands for an old history fails here; make it
// replay-safe with patched() and record new histories as well (npm run record-histories).
import fs from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { DefaultLogger, Runtime, Worker } from '@temporalio/worker';
import { beforeAll, describe, expect, it } from 'vitest';
import * as registered from '../workflows/index.ts';
import { historyFromJson, workflowTypeOf } from './helpers/history-json.ts';
import { stack } from './helpers/stack.ts';

const DIR = path.join(path.dirname(fileURLToPath(import.meta.url)), 'histories');
const FILES = fs.readdirSync(DIR).filter((f) => f.endsWith('.json')).sort();
/** Recorded histories stay small: a big one means a recording did far more than it needed. */
const MAX_BYTES = 100_000;

const load = (file: string) => historyFromJson(JSON.parse(fs.readFileSync(path.join(DIR, file), 'utf8')));
const idOf = (file: string) => `replay-${file.replace(/\.json$/, '')}`;

/** One replay worker for every file; each result kept by file. */
const outcomes = new Map<string, string | null>();

beforeAll(async () => {
  // The replay worker's state changes at info are noise; a nondeterminism is in the results.
  Runtime.install({ logger: new DefaultLogger('WARN') });
  const histories = FILES.map((f) => ({ workflowId: idOf(f), history: load(f) }));
  for await (const r of Worker.runReplayHistories({ workflowBundle: { codePath: stack().workflowBundlePath } }, histories)) {
    outcomes.set(r.workflowId, r.error ? `${r.error.name}: ${r.error.message}` : null);
  }
});

describe('recorded histories', () => {
  it('cover every workflow type the worker registers', () => {
    expect(FILES.length).toBeGreaterThan(0);
    const recorded = new Set(FILES.map((f) => workflowTypeOf(load(f))));
    for (const type of Object.keys(registered)) expect(recorded, `no recorded history of ${type}`).toContain(type);
  });

  it.each(FILES)('%s is a closed run, small enough to keep in the repository', (file) => {
    expect(fs.statSync(path.join(DIR, file)).size).toBeLessThan(MAX_BYTES);
    const events = load(file).events ?? [];
    // Only a closed run proves its whole command sequence; an open one would replay trivially. A run
    // that continued as new closed too (its last command is the continuation).
    const last = events.at(-1);
    expect(last?.workflowExecutionCompletedEventAttributes ?? last?.workflowExecutionContinuedAsNewEventAttributes, `${file} did not complete`).toBeTruthy();
  });

  it.each(FILES)('%s replays on the current workflow code without nondeterminism', (file) => {
    expect(outcomes.has(idOf(file)), `${file} was not replayed`).toBe(true);
    expect(outcomes.get(idOf(file))).toBeNull();
  });
});
