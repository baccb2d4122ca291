// Fits the rerank's logistic weights (shared/router/rank.ts) on the dev split only, then picks
// the abstention threshold and margin on the dev split, and prints both splits' results. With the
// embedding model installed (scripts/ensure-model.sh) it fits TUNING_DENSE on the hybrid
// candidates (lexical + dense top-k, fused; the dense cosine as a feature) and then the dense rule
// (minimum cosine and lead, and the rule's precision as its score); with FIT_LEXICAL=1, or without
// the model, TUNING on the lexical candidates. Run against a database holding the demo catalog
// (migrated and seeded), or without DATABASE_URL on an embedded PostgreSQL of its own:
//   node --import tsx test/router-eval/fit.ts
// Paste the printed tuning into rank.ts; the held-out split is never used to choose anything.
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { migrate } from '../../shared/db/migrate.ts';
import { createPool } from '../../shared/db/pool.ts';
import { PLATFORM_ORG_ID } from '../../shared/db/orgs.ts';
import { seedDemoCatalog } from '../../shared/db/seed.ts';
import { startEmbeddedPostgres } from '../../shared/infra/embedded-postgres.ts';
import { loadEmbedder } from '../../shared/router/embeddings.ts';
import { hybridCandidates, type StageTimes } from '../../shared/router/hybrid.ts';
import { readPrompt, withoutZone } from '../../shared/router/prompt-facts.ts';
import { decide, featureVector, FEATURE_NAMES, features, TUNING, TUNING_DENSE, type PromptFeatures, type Tuning } from '../../shared/router/rank.ts';
import { VectorIndex } from '../../shared/router/vector-index.ts';
import { DEFAULT_NOW, loadCases, type EvalCase } from './evaluate.ts';

let url = process.env.DATABASE_URL;
let stopPg: (() => Promise<void>) | undefined;
let tmp: string | undefined;
if (!url) {
  tmp = await mkdtemp(path.join(tmpdir(), 'wqs-fit-'));
  const embedded = await startEmbeddedPostgres({ dataDir: tmp });
  [url, stopPg] = [embedded.databaseUrl, embedded.stop];
  await migrate(url);
}
const db = createPool(url, 2);
if (stopPg) await seedDemoCatalog(db);
const embedder = process.env.FIT_LEXICAL === '1' ? null : await loadEmbedder();
const index = embedder ? new VectorIndex(db, embedder) : null;
if (index) {
  await index.refresh();
  await index.drain();
}
const prepared: Array<{ c: EvalCase; pf: PromptFeatures }> = [];
for (const c of loadCases()) {
  const times: StageTimes = { embed_ms: 0, lexical_ms: 0, dense_ms: 0, fill_ms: 0, rerank_ms: 0, total_ms: 0, dense: false };
  const { rows, cosines } = await hybridCandidates(db, embedder && index ? { embedder, index } : null, withoutZone(c.prompt), { orgId: PLATFORM_ORG_ID }, times);
  prepared.push({ c, pf: features(rows, readPrompt(c.prompt, { now: new Date(c.now ?? DEFAULT_NOW), timeZone: c.time_zone }), c.prompt, cosines) });
}
await db.end();
await stopPg?.();
if (tmp) await rm(tmp, { recursive: true, force: true });
const dev = prepared.filter((p) => p.c.split === 'dev');
const fitted = embedder ? 'TUNING_DENSE' : 'TUNING';

// Training rows: every candidate of every dev prompt; positive only for the expected operation.
const X: number[][] = [];
const Y: number[] = [];
for (const { c, pf } of dev) {
  for (const f of pf.candidates) {
    X.push(featureVector(f));
    Y.push(c.expect && f.row.api === c.expect.api && f.row.operation === c.expect.operation ? 1 : 0);
  }
}
// Plain batch gradient descent with a little L2; positives weighted up to balance the classes.
const k = FEATURE_NAMES.length;
let w = new Array<number>(k + 1).fill(0);
const pos = Y.filter((y) => y === 1).length;
const classWeight = (y: number) => (y === 1 ? (Y.length - pos) / Math.max(1, pos) : 1);
for (let iter = 0; iter < 20_000; iter++) {
  const grad = new Array<number>(k + 1).fill(0);
  for (let i = 0; i < X.length; i++) {
    const z = w[0]! + X[i]!.reduce((a, x, j) => a + w[j + 1]! * x, 0);
    const e = (1 / (1 + Math.exp(-z)) - Y[i]!) * classWeight(Y[i]!);
    grad[0]! += e;
    X[i]!.forEach((x, j) => (grad[j + 1]! += e * x));
  }
  w = w.map((wi, j) => wi - 0.05 * (grad[j]! / X.length + (j > 0 ? 0.001 * wi : 0)));
}
const weights = Object.fromEntries([['bias', w[0]!], ...FEATURE_NAMES.map((n, j) => [n, w[j + 1]!])].map(([n, v]) => [n, Math.round(Number(v) * 1000) / 1000])) as Tuning['weights'];

function measure(set: typeof prepared, t: Tuning) {
  let top1 = 0;
  let inScope = 0;
  let abstained = 0;
  let oos = 0;
  for (const { c, pf } of set) {
    const r = decide(pf, t);
    const chosen = r.chosen ? `${r.chosen.api}.${r.chosen.operation}` : null;
    if (c.expect) {
      inScope++;
      if (chosen === `${c.expect.api}.${c.expect.operation}`) top1++;
    } else {
      oos++;
      if (!chosen) abstained++;
    }
  }
  return { top1: top1 / inScope, abstention: abstained / oos };
}
const objectiveOf = (m: { top1: number; abstention: number }) => Math.min(m.top1, m.abstention) + (m.top1 + m.abstention) / 2;
const off = { minCosine: 2, minLead: 0, score: 0 };
let best: { t: Tuning; objective: number } | undefined;
for (let minScore = 0.2; minScore <= 0.8; minScore += 0.05) {
  for (const minMargin of [0, 0.02, 0.05, 0.1, 0.15, 0.2]) {
    const t: Tuning = { weights, minScore: Math.round(minScore * 100) / 100, minMargin, dense: off };
    // Both targets matter: the worse of the two counts double.
    const objective = objectiveOf(measure(dev, t));
    if (!best || objective > best.objective) best = { t, objective };
  }
}
// The dense rule, on top of the fitted model: the least permissive rule among the best on dev.
if (embedder) {
  for (let minCosine = 0.6; minCosine >= 0.2 - 1e-9; minCosine -= 0.025) {
    for (const minLead of [0.2, 0.15, 0.12, 0.1, 0.08, 0.06, 0.04, 0.02, 0]) {
      const t: Tuning = { ...best!.t, dense: { minCosine: Math.round(minCosine * 1000) / 1000, minLead, score: 0 } };
      const objective = objectiveOf(measure(dev, t));
      if (objective > best!.objective) best = { t, objective };
    }
  }
  // The rule's precision on dev: how often the operation it picked was the labelled one.
  if (best!.t.dense.minCosine <= 1) {
    const lexicalOnly: Tuning = { ...best!.t, dense: off };
    let fired = 0;
    let right = 0;
    for (const { c, pf } of dev) {
      if (decide(pf, lexicalOnly).chosen) continue;
      const r = decide(pf, best!.t);
      if (!r.chosen) continue;
      fired++;
      if (c.expect && r.chosen.api === c.expect.api && r.chosen.operation === c.expect.operation) right++;
    }
    const precision = fired === 0 ? 0 : Math.round((right / fired) * 1000) / 1000;
    console.log(`dense rule fired on ${fired} dev prompts, right on ${right}`);
    best!.t.dense.score = Math.max(best!.t.minScore, precision);
  }
}
const heldout = prepared.filter((p) => p.c.split === 'heldout');
console.log(fitted, JSON.stringify(best!.t));
console.log('dev', measure(dev, best!.t));
console.log('heldout', measure(heldout, best!.t));
// What the tunings in rank.ts do on the same features, for comparison.
for (const [name, t] of [['TUNING (in rank.ts)', TUNING], ['TUNING_DENSE (in rank.ts)', TUNING_DENSE]] as const) {
  console.log(name, 'dev', measure(dev, t), 'heldout', measure(heldout, t));
}
