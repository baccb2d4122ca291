// weather.example.test — JSON weather API with a rate-limited endpoint
// (alerts), a flaky endpoint (air-quality: every 3rd call → 503) and a
// premium endpoint needing an X-Api-Key (history).
import { Router, json, hash, type DemoRequest, type Site, CACHE_PUBLIC } from '../lib/http.ts';

interface City { city: string; country: string; region: string; base_c: number; conditions: string; humidity_pct: number; wind_kph: number; tz: string }

const cities: City[] = [
  { city: 'London', country: 'GB', region: 'england', base_c: 14.2, conditions: 'Light rain', humidity_pct: 81, wind_kph: 17, tz: 'Europe/London' },
  { city: 'Paris', country: 'FR', region: 'ile-de-france', base_c: 17.5, conditions: 'Partly cloudy', humidity_pct: 64, wind_kph: 11, tz: 'Europe/Paris' },
  { city: 'Berlin', country: 'DE', region: 'berlin', base_c: 15.1, conditions: 'Overcast', humidity_pct: 70, wind_kph: 14, tz: 'Europe/Berlin' },
  { city: 'Madrid', country: 'ES', region: 'madrid', base_c: 27.8, conditions: 'Sunny', humidity_pct: 31, wind_kph: 8, tz: 'Europe/Madrid' },
  { city: 'Rome', country: 'IT', region: 'lazio', base_c: 24.3, conditions: 'Clear', humidity_pct: 48, wind_kph: 9, tz: 'Europe/Rome' },
  { city: 'New York', country: 'US', region: 'new-york', base_c: 21.6, conditions: 'Thunderstorms', humidity_pct: 77, wind_kph: 22, tz: 'America/New_York' },
  { city: 'Tokyo', country: 'JP', region: 'kanto', base_c: 23.9, conditions: 'Humid and hazy', humidity_pct: 84, wind_kph: 12, tz: 'Asia/Tokyo' },
  { city: 'Sydney', country: 'AU', region: 'new-south-wales', base_c: 12.4, conditions: 'Showers', humidity_pct: 72, wind_kph: 26, tz: 'Australia/Sydney' },
  { city: 'Toronto', country: 'CA', region: 'ontario', base_c: 18.7, conditions: 'Mostly sunny', humidity_pct: 55, wind_kph: 15, tz: 'America/Toronto' },
  { city: 'Cairo', country: 'EG', region: 'cairo', base_c: 34.1, conditions: 'Sunny', humidity_pct: 22, wind_kph: 13, tz: 'Africa/Cairo' },
];
const byName = new Map(cities.map((c) => [c.city.toLowerCase(), c]));

// Fixed clock so outputs are deterministic.
const OBSERVED_AT = '2025-06-01T12:00:00Z';
const TODAY = '2025-06-01';

const alertsByRegion: Record<string, Array<{ id: string; severity: 'minor' | 'moderate' | 'severe'; event: string; headline: string; starts_at: string; ends_at: string }>> = {
  england: [{ id: 'ALR-GB-0412', severity: 'moderate', event: 'Heavy rain', headline: 'Yellow warning of heavy rain for southern England', starts_at: '2025-06-01T15:00:00Z', ends_at: '2025-06-02T06:00:00Z' }],
  'new-york': [
    { id: 'ALR-US-7731', severity: 'severe', event: 'Severe thunderstorm', headline: 'Severe thunderstorm watch until 9 PM EDT', starts_at: '2025-06-01T16:00:00Z', ends_at: '2025-06-02T01:00:00Z' },
    { id: 'ALR-US-7732', severity: 'minor', event: 'Air quality', headline: 'Air quality alert for sensitive groups', starts_at: '2025-06-01T10:00:00Z', ends_at: '2025-06-01T23:59:00Z' },
  ],
  madrid: [{ id: 'ALR-ES-0098', severity: 'moderate', event: 'High temperatures', headline: 'Aviso amarillo por temperaturas máximas', starts_at: '2025-06-01T11:00:00Z', ends_at: '2025-06-01T19:00:00Z' }],
  cairo: [{ id: 'ALR-EG-0020', severity: 'minor', event: 'Dust', headline: 'Blowing dust reducing visibility in the afternoon', starts_at: '2025-06-01T12:00:00Z', ends_at: '2025-06-01T18:00:00Z' }],
};
const regions = new Set(cities.map((c) => c.region));

export const WEATHER_API_KEYS = { valid: ['wk_demo_valid_key_123', 'wk_demo_premium_key_456'], denied: ['wk_demo_denied_key'] };
const RATE_LIMIT = 5;
const RATE_WINDOW_MS = 10_000;

/** Each server instance gets its own counters and rate-limit windows. */
export function createWeatherSite(): Site {
  let windows = new Map<string, { start: number; count: number }>();
  let airQualityCalls = 0;
  let alertsCalls = 0;
  let historyCalls = 0;

  const cached = { 'cache-control': CACHE_PUBLIC };
  const round1 = (n: number) => Math.round(n * 10) / 10;
  const conditionsList = ['Sunny', 'Partly cloudy', 'Overcast', 'Light rain', 'Showers', 'Clear', 'Thunderstorms', 'Mostly sunny'];

  function findCity(req: DemoRequest): City | { error: ReturnType<typeof json> } {
    const name = (req.query.get('city') ?? '').trim();
    if (!name) return { error: json(400, { error: 'missing_city', message: 'Query parameter "city" is required.' }) };
    const c = byName.get(name.toLowerCase());
    if (!c) return { error: json(404, { error: 'city_not_found', message: `No weather station for "${name}".` }) };
    return c;
  }

  function addDays(date: string, n: number): string {
    const d = new Date(`${date}T00:00:00Z`);
    d.setUTCDate(d.getUTCDate() + n);
    return d.toISOString().slice(0, 10);
  }

  function dayFor(c: City, date: string) {
    const h = hash(`${c.city}|${date}`);
    const mid = c.base_c + ((h % 80) - 40) / 10;
    return {
      date,
      min_c: round1(mid - 4 - (h % 30) / 10),
      max_c: round1(mid + 3 + ((h >>> 5) % 30) / 10),
      conditions: conditionsList[(h >>> 9) % conditionsList.length],
      precipitation_mm: round1(((h >>> 13) % 120) / 10),
      chance_of_rain_pct: (h >>> 17) % 101,
    };
  }

  function apiKey(req: DemoRequest): string {
    return String(req.headers['x-api-key'] ?? req.query.get('api_key') ?? '');
  }

  const router = new Router(() => json(404, { error: 'not_found', message: 'Unknown endpoint. See /api/v1.' }))
    .get('/', () => json(200, { name: 'Skyline Weather API', version: 'v1', docs: '/api/v1' }, cached))
    .get('/api/v1', () =>
      json(200, {
        endpoints: {
          'GET /api/v1/cities': 'List supported cities',
          'GET /api/v1/current?city=': 'Current conditions',
          'GET /api/v1/forecast?city=&days=1..7': 'Daily forecast',
          'GET /api/v1/alerts?region=': `Active alerts (rate limited: ${RATE_LIMIT} requests per ${RATE_WINDOW_MS / 1000}s per client and key)`,
          'GET /api/v1/air-quality?city=': 'Air quality index (occasionally unavailable)',
          'GET /api/v1/history?city=&date=YYYY-MM-DD': 'Historical observations (requires X-Api-Key)',
        },
      }, cached),
    )
    .get('/api/v1/cities', () => json(200, { cities: cities.map((c) => ({ city: c.city, country: c.country, region: c.region })) }, cached))
    .get('/api/v1/current', (req) => {
      const c = findCity(req);
      if ('error' in c) return c.error;
      return json(200, { city: c.city, country: c.country, temperature_c: c.base_c, conditions: c.conditions, humidity_pct: c.humidity_pct, wind_kph: c.wind_kph, observed_at: OBSERVED_AT }, cached);
    })
    .get('/api/v1/forecast', (req) => {
      const c = findCity(req);
      if ('error' in c) return c.error;
      const raw = req.query.get('days');
      const days = raw === null || raw === '' ? 3 : /^\d+$/.test(raw) ? Number(raw) : NaN;
      if (!(days >= 1 && days <= 7)) return json(400, { error: 'invalid_days', message: '"days" must be an integer from 1 to 7.' });
      return json(200, { city: c.city, country: c.country, issued_at: OBSERVED_AT, days: Array.from({ length: days }, (_, i) => dayFor(c, addDays(TODAY, i + 1))) }, cached);
    })
    .get('/api/v1/alerts', (req) => {
      alertsCalls++;
      const key = `${req.clientIp}|${apiKey(req)}`;
      const now = Date.now();
      let w = windows.get(key);
      if (!w || now - w.start >= RATE_WINDOW_MS) windows.set(key, (w = { start: now, count: 0 }));
      const resetS = Math.max(1, Math.ceil((w.start + RATE_WINDOW_MS - now) / 1000));
      const limitHeaders = { 'x-ratelimit-limit': String(RATE_LIMIT), 'x-ratelimit-reset': String(resetS) };
      if (w.count >= RATE_LIMIT) {
        return json(429, { error: 'rate_limited', message: `Too many requests: ${RATE_LIMIT} per ${RATE_WINDOW_MS / 1000} seconds.`, retry_after_s: resetS }, { ...limitHeaders, 'x-ratelimit-remaining': '0', 'retry-after': String(resetS) });
      }
      w.count++;
      const headers = { ...limitHeaders, 'x-ratelimit-remaining': String(RATE_LIMIT - w.count) };
      const region = (req.query.get('region') ?? '').trim().toLowerCase();
      if (!region) return json(400, { error: 'missing_region', message: 'Query parameter "region" is required.' }, headers);
      if (!regions.has(region)) return json(404, { error: 'region_not_found', message: `Unknown region "${region}".` }, headers);
      return json(200, { region, updated_at: OBSERVED_AT, alerts: alertsByRegion[region] ?? [] }, headers);
    })
    .get('/api/v1/air-quality', (req) => {
      airQualityCalls++;
      if (airQualityCalls % 3 === 0) return json(503, { error: 'service_unavailable', message: 'Air quality sensors are temporarily unavailable. Try again.' }, { 'retry-after': '1' });
      const c = findCity(req);
      if ('error' in c) return c.error;
      const h = hash(`aq|${c.city}`);
      const aqi = 15 + (h % 120);
      const category = aqi <= 50 ? 'Good' : aqi <= 100 ? 'Moderate' : 'Unhealthy for sensitive groups';
      return json(200, { city: c.city, country: c.country, aqi, category, pm25_ugm3: round1(aqi / 4.1), pm10_ugm3: round1(aqi / 2.3), o3_ppb: 20 + ((h >>> 8) % 40), observed_at: OBSERVED_AT });
    })
    .get('/api/v1/history', (req) => {
      historyCalls++;
      const key = apiKey(req);
      const auth = { 'www-authenticate': 'ApiKey header="X-Api-Key"' };
      if (!key) return json(401, { error: 'missing_api_key', message: 'This endpoint requires an X-Api-Key header.' }, auth);
      if (WEATHER_API_KEYS.denied.includes(key)) return json(403, { error: 'plan_not_entitled', message: 'Your plan does not include historical data.' });
      if (!WEATHER_API_KEYS.valid.includes(key)) return json(401, { error: 'invalid_api_key', message: 'The API key is not valid.' }, auth);
      const c = findCity(req);
      if ('error' in c) return c.error;
      const date = req.query.get('date') ?? '';
      if (!/^\d{4}-\d{2}-\d{2}$/.test(date) || Number.isNaN(Date.parse(`${date}T00:00:00Z`)) || new Date(`${date}T00:00:00Z`).toISOString().slice(0, 10) !== date) {
        return json(400, { error: 'invalid_date', message: '"date" must be YYYY-MM-DD.' });
      }
      if (date > TODAY) return json(422, { error: 'date_in_future', message: `History is available up to ${TODAY}.` });
      const d = dayFor(c, date);
      return json(200, { city: c.city, country: c.country, date, min_c: d.min_c, max_c: d.max_c, conditions: d.conditions, precipitation_mm: d.precipitation_mm, humidity_pct: 30 + (hash(date) % 60) }, { 'cache-control': 'private, max-age=3600' });
    });

  return {
    host: 'weather.example.test',
    name: 'Skyline Weather API',
    json: true,
    handle: router.handle,
    reset() {
      windows = new Map();
      airQualityCalls = 0;
      alertsCalls = 0;
      historyCalls = 0;
    },
    stats: () => ({ weather_air_quality_calls: airQualityCalls, weather_alerts_calls: alertsCalls, weather_history_calls: historyCalls }),
  };
}
