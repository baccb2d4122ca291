// Child process of test/router-embeddings.test.ts: the embedding model is busy with a batch when
// the process shuts down the way the API does (close, then process.exit). It must exit 0: exiting
// while onnxruntime runs aborts the process (SIGABRT) unless the model's thread is closed first.
import { loadEmbedder } from '../../shared/router/embeddings.ts';

async function main() {
  const embedder = await loadEmbedder();
  if (!embedder) process.exit(3);
  const texts = Array.from({ length: 64 }, (_, i) => `current weather and forecast for city number ${i}, with a longer description to embed`);
  // Four batches queued (about 0.6 s of work on an idle core): the model is surely running at 200 ms.
  for (let i = 0; i < 4; i++) void embedder.embed(texts).catch(() => {});
  setTimeout(() => {
    const close = process.env.SKIP_CLOSE === '1' ? Promise.resolve() : embedder.close!();
    void close.then(() => process.exit(0));
  }, 200);
}
void main();
