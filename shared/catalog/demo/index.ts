// The seeded demo catalog: APIs whose recipes run against apps/demo-sites (through the host map in
// dev and tests). Every example's output is what running its input returns; test/engines-*.test.ts
// runs them and compares.
import type { ApiDefinition } from '../types.ts';
import { booksApi } from './books.ts';
import { airQualityApi, weatherApi } from './weather.ts';
import { jobsApi } from './jobs.ts';
import { shopApi, shopApiApi } from './shop.ts';
import { clinicApi } from './clinic.ts';
import { newsApi } from './news.ts';

export const demoCatalog: ApiDefinition[] = [booksApi, weatherApi, airQualityApi, jobsApi, shopApi, shopApiApi, clinicApi, newsApi];
