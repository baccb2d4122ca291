// The router's dense embeddings (shared/router/embeddings.ts) with the real model that
// scripts/ensure-model.sh installs (npm test runs it through ensure-tools.sh): sentence vectors
// place a paraphrase near its operation, operation vectors follow a changed document, and without
// the model the router still routes, lexically.
import { afterAll, describe, expect, it } from 'vitest';
import { demoCatalog } from '../shared/catalog/demo/index.ts';
import { cosine, DIMENSIONS, loadEmbedder, operationDocument } from '../shared/router/embeddings.ts';
import { createRouter } from '../shared/router/index.ts';
import type { RouteRow } from '../shared/router/retrieve.ts';
import { closeDb, db, newOrg } from './helpers/stack.ts';

afterAll(closeDb);
const DEMO = demoCatalog.map((a) => a.handle);

function row(id: string, over: Partial<RouteRow>): RouteRow {
  return {
    operation_id: id, api: '@x', visibility: 'public', api_name: 'X', api_description: '', sites: [], operation: 'op', label: 'Op',
    description: '', labels: [], performs_actions: false, input_schema: { type: 'object', properties: {} }, examples: [], rank: 0, ...over,
  };
}

describe('embeddings', () => {
  it('gives unit-length 384-d vectors that put a paraphrase nearer its operation than another', async () => {
    const e = await loadEmbedder();
    expect(e, 'run scripts/ensure-model.sh').not.toBeNull();
    const weather = row('1', { operation: 'forecast', label: 'Weather forecast', description: 'Daily forecast for a city.', labels: ['weather', 'temperature'] });
    const books = row('2', { operation: 'search_books', label: 'Search books', description: 'Find books in the catalogue by title or author.' });
    const [p, w, b] = await e!.embed(['will I need an umbrella in Lyon', operationDocument(weather), operationDocument(books)]);
    expect(p!.length).toBe(DIMENSIONS);
    expect(cosine(p!, p!)).toBeCloseTo(1, 4);
    expect(cosine(p!, w!)).toBeGreaterThan(cosine(p!, b!) + 0.1);
  });

  it('without the model the router says so and routes lexically', async () => {
    expect(await loadEmbedder('/nonexistent-model-dir')).toBeNull();
    const org = await newOrg(0, 'Router lexical');
    const lexical = createRouter({ db: db(), embeddings: () => loadEmbedder('/nonexistent-model-dir') });
    lexical.warmUp();
    expect(await lexical.ready()).toBe(false);
    const r = await lexical.rank('weather forecast for Paris for 3 days', { orgId: org.org_id, allowedApis: DEMO });
    expect(r.chosen?.operation).toBe('forecast');
  });

  it('with the model, ready() reports embeddings in use and the same prompt routes the same', async () => {
    const org = await newOrg(0, 'Router dense');
    const dense = createRouter({ db: db() });
    expect(await dense.ready()).toBe(true);
    const r = await dense.rank('weather forecast for Paris for 3 days', { orgId: org.org_id, allowedApis: DEMO });
    expect(r.chosen?.operation).toBe('forecast');
  });
});
