// Registry of all demo sites served by server.ts.
import type { Site } from '../lib/http.ts';
import { booksSite } from './books.ts';
import { weatherSite } from './weather.ts';

export const sites: Site[] = [booksSite, weatherSite];
