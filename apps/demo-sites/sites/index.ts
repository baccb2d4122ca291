// Registry of all demo sites served by server.ts. Stateful sites are created
// per server instance so two servers in one process never share state.
import type { Site } from '../lib/http.ts';
import { booksSite } from './books.ts';
import { createWeatherSite } from './weather.ts';
import { jobsSite } from './jobs.ts';
import { createShopSite } from './shop.ts';
import { createClinicSite } from './clinic.ts';
import { newsSite } from './news.ts';

export const DEMO_HOSTS = ['books.example.test', 'weather.example.test', 'jobs.example.test', 'shop.example.test', 'clinic.example.test', 'news.example.test'] as const;

export function createSites(): Site[] {
  return [booksSite, createWeatherSite(), jobsSite, createShopSite(), createClinicSite(), newsSite];
}
