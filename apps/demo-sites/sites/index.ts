// Registry of all demo sites served by server.ts.
import type { Site } from '../lib/http.ts';
import { booksSite } from './books.ts';
import { weatherSite } from './weather.ts';
import { jobsSite } from './jobs.ts';
import { shopSite } from './shop.ts';
import { clinicSite } from './clinic.ts';
import { newsSite } from './news.ts';

export const sites: Site[] = [booksSite, weatherSite, jobsSite, shopSite, clinicSite, newsSite];
