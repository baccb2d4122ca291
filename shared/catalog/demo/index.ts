// The seeded demo catalog: APIs whose recipes run against apps/demo-sites (through the host map in
// dev and tests). Every example's output is what running its input returns; test/engines-*.test.ts
// runs them and compares.
import type { ApiDefinition } from '../types.ts';
import { booksApi } from './books.ts';
import { weatherApi } from './weather.ts';

export const demoCatalog: ApiDefinition[] = [booksApi, weatherApi];
