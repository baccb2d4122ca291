// The embedding model on a worker thread (embeddings.ts starts it): onnxruntime-node runs a
// session on the calling thread, so on the API's main thread every prompt's embedding (~5 ms) and
// every background batch of operation documents (~50 ms) stalled all other requests. Plain
// JavaScript so that it loads in any runtime that starts it (node --import tsx, vitest).
// workerData: { dir, maxTokens, dimensions }. Messages in: { id, texts }; out: { id, vectors } or
// { id, error }; first { ready: true } or { error } once the model has loaded.
import { readFileSync } from 'node:fs';
import path from 'node:path';
import { parentPort, workerData } from 'node:worker_threads';
import { Tokenizer } from '@huggingface/tokenizers';
import ort from 'onnxruntime-node';

const { dir, maxTokens, dimensions } = workerData;

async function embed(session, tokenizer, texts) {
  if (texts.length === 0) return [];
  const encoded = texts.map((t) => {
    const ids = tokenizer.encode(t).ids;
    // Keep [CLS] … [SEP] when cutting.
    return ids.length <= maxTokens ? ids : [...ids.slice(0, maxTokens - 1), ids[ids.length - 1]];
  });
  const len = Math.max(...encoded.map((e) => e.length));
  const n = texts.length;
  const ids = new BigInt64Array(n * len);
  const mask = new BigInt64Array(n * len);
  encoded.forEach((e, i) =>
    e.forEach((id, j) => {
      ids[i * len + j] = BigInt(id);
      mask[i * len + j] = 1n;
    }),
  );
  const dims = [n, len];
  const out = await session.run({
    input_ids: new ort.Tensor('int64', ids, dims),
    attention_mask: new ort.Tensor('int64', mask, dims),
    token_type_ids: new ort.Tensor('int64', new BigInt64Array(n * len), dims),
  });
  const hidden = out.last_hidden_state.data;
  // Mean over the text's own word pieces, then unit length (cosine = dot product).
  return encoded.map((e, i) => {
    const v = new Float32Array(dimensions);
    for (let j = 0; j < e.length; j++) {
      const base = (i * len + j) * dimensions;
      for (let d = 0; d < dimensions; d++) v[d] += hidden[base + d];
    }
    let norm = 0;
    for (let d = 0; d < dimensions; d++) norm += v[d] * v[d];
    norm = Math.sqrt(norm) || 1;
    for (let d = 0; d < dimensions; d++) v[d] /= norm;
    return v;
  });
}

try {
  const session = await ort.InferenceSession.create(path.join(dir, 'model.onnx'), { executionProviders: ['cpu'], intraOpNumThreads: 1, interOpNumThreads: 1 });
  const tokenizer = new Tokenizer(JSON.parse(readFileSync(path.join(dir, 'tokenizer.json'), 'utf8')), JSON.parse(readFileSync(path.join(dir, 'tokenizer_config.json'), 'utf8')));
  // One request at a time, in arrival order (onnxruntime runs one session call per thread anyway).
  let chain = Promise.resolve();
  let closing = false;
  parentPort.on('message', ({ id, texts, close }) => {
    if (close) {
      // After the batch in hand (batches still queued are refused, so a busy model on a loaded
      // machine still closes well within close()'s patience): release the session, then end this
      // thread. Exiting the process while a session runs aborts it (SIGABRT from onnxruntime's
      // native threads).
      closing = true;
      chain = chain.then(async () => {
        await session.release().catch(() => {});
        parentPort.close();
      });
      return;
    }
    chain = chain.then(async () => {
      if (closing) return void parentPort.postMessage({ id, error: 'the embedding model is closing' });
      try {
        const vectors = await embed(session, tokenizer, texts);
        parentPort.postMessage({ id, vectors }, vectors.map((v) => v.buffer));
      } catch (err) {
        parentPort.postMessage({ id, error: String(err?.message ?? err) });
      }
    });
  });
  parentPort.postMessage({ ready: true });
} catch (err) {
  parentPort.postMessage({ error: String(err?.message ?? err) });
}
