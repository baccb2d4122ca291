// @weather — Skyline Weather API (weather.example.test), a JSON weather API.
import type { ApiDefinition, JsonSchema } from '../types.ts';
import type { Recipe } from '../../recipes/schema.ts';
import { DATE, DATETIME, site } from './common.ts';

const HOST = 'weather.example.test';
const CITY = { type: 'string', minLength: 1, maxLength: 100, description: 'City name, e.g. London' } as const;
const cityInput: JsonSchema = { type: 'object', additionalProperties: false, required: ['city'], properties: { city: CITY } };

const currentRecipe: Recipe = {
  engine: 'http',
  hosts: [HOST],
  steps: [
    { type: 'request', name: 'Current conditions', url: `http://${HOST}/api/v1/current`, query: { city: '{{input.city}}' }, parse: 'json', not_found_status: [404], save_as: 'current' },
    {
      type: 'extract',
      from: { var: 'current' },
      fields: {
        city: { type: 'text', pointer: '/city' },
        country: { type: 'text', pointer: '/country' },
        temperature_c: { type: 'number', pointer: '/temperature_c' },
        conditions: { type: 'text', pointer: '/conditions' },
        humidity_pct: { type: 'integer', pointer: '/humidity_pct' },
        wind_kph: { type: 'number', pointer: '/wind_kph' },
        observed_at: { type: 'datetime', pointer: '/observed_at' },
      },
      save_as: 'w',
    },
  ],
  output: '{{vars.w}}',
};

const forecastRecipe: Recipe = {
  engine: 'http',
  hosts: [HOST],
  steps: [
    {
      type: 'request',
      name: 'Daily forecast',
      url: `http://${HOST}/api/v1/forecast`,
      query: { city: '{{input.city}}', days: '{{input.days}}' },
      parse: 'json',
      not_found_status: [404],
      save_as: 'forecast',
    },
    {
      type: 'extract',
      from: { var: 'forecast' },
      fields: {
        city: { type: 'text', pointer: '/city' },
        country: { type: 'text', pointer: '/country' },
        issued_at: { type: 'datetime', pointer: '/issued_at' },
        days: {
          type: 'list',
          pointer: '/days',
          fields: {
            date: { type: 'date', pointer: '/date' },
            min_c: { type: 'number', pointer: '/min_c' },
            max_c: { type: 'number', pointer: '/max_c' },
            conditions: { type: 'text', pointer: '/conditions' },
            precipitation_mm: { type: 'number', pointer: '/precipitation_mm' },
            chance_of_rain_pct: { type: 'integer', pointer: '/chance_of_rain_pct' },
          },
        },
      },
      save_as: 'f',
    },
    { type: 'not_found', when: { empty: 'f' } },
  ],
  output: '{{vars.f}}',
};

const REGIONS = ['england', 'ile-de-france', 'berlin', 'madrid', 'lazio', 'new-york', 'kanto', 'new-south-wales', 'ontario', 'cairo'];

const alertsRecipe: Recipe = {
  engine: 'http',
  hosts: [HOST],
  steps: [
    { type: 'request', name: 'Active alerts', url: `http://${HOST}/api/v1/alerts`, query: { region: '{{input.region}}' }, parse: 'json', not_found_status: [404], save_as: 'alerts' },
    {
      type: 'extract',
      from: { var: 'alerts' },
      fields: {
        region: { type: 'text', pointer: '/region' },
        updated_at: { type: 'datetime', pointer: '/updated_at' },
        alerts: {
          type: 'list',
          pointer: '/alerts',
          fields: {
            id: { type: 'text', pointer: '/id' },
            severity: { type: 'text', pointer: '/severity' },
            event: { type: 'text', pointer: '/event' },
            headline: { type: 'text', pointer: '/headline' },
            starts_at: { type: 'datetime', pointer: '/starts_at' },
            ends_at: { type: 'datetime', pointer: '/ends_at' },
          },
        },
      },
      save_as: 'a',
    },
  ],
  output: '{{vars.a}}',
};

const historyRecipe: Recipe = {
  engine: 'http',
  hosts: [HOST],
  secrets: ['WEATHER_API_KEY'],
  steps: [
    {
      type: 'request',
      name: 'Historical observations',
      url: `http://${HOST}/api/v1/history`,
      query: { city: '{{input.city}}', date: '{{input.date}}' },
      headers: { 'X-Api-Key': '{{secrets.WEATHER_API_KEY}}' },
      parse: 'json',
      expect_status: [200],
      not_found_status: [404],
      save_status_as: 'status',
      save_as: 'h',
    },
    {
      type: 'extract',
      from: { var: 'h' },
      fields: {
        city: { type: 'text', pointer: '/city' },
        country: { type: 'text', pointer: '/country' },
        date: { type: 'date', pointer: '/date' },
        min_c: { type: 'number', pointer: '/min_c' },
        max_c: { type: 'number', pointer: '/max_c' },
        conditions: { type: 'text', pointer: '/conditions' },
        precipitation_mm: { type: 'number', pointer: '/precipitation_mm' },
        humidity_pct: { type: 'integer', pointer: '/humidity_pct' },
      },
      save_as: 'day',
    },
  ],
  output: '{{vars.day}}',
};

const airQualityRecipe: Recipe = {
  engine: 'http',
  hosts: [HOST],
  steps: [
    { type: 'request', name: 'Air quality', url: `http://${HOST}/api/v1/air-quality`, query: { city: '{{input.city}}' }, parse: 'json', not_found_status: [404], save_as: 'aq' },
    {
      type: 'extract',
      from: { var: 'aq' },
      fields: {
        city: { type: 'text', pointer: '/city' },
        country: { type: 'text', pointer: '/country' },
        aqi: { type: 'integer', pointer: '/aqi' },
        category: { type: 'text', pointer: '/category' },
        pm25_ugm3: { type: 'number', pointer: '/pm25_ugm3' },
        pm10_ugm3: { type: 'number', pointer: '/pm10_ugm3' },
        o3_ppb: { type: 'number', pointer: '/o3_ppb' },
        observed_at: { type: 'datetime', pointer: '/observed_at' },
      },
      save_as: 'a',
    },
  ],
  output: '{{vars.a}}',
};

export const weatherApi: ApiDefinition = {
  handle: '@weather',
  name: 'Skyline Weather',
  description: 'Current conditions and daily forecasts for major cities from the Skyline Weather API.',
  category: 'weather',
  website_url: `http://${HOST}/`,
  sites: [site('Skyline Weather API', HOST)],
  operations: [
    {
      name: 'current_weather',
      label: 'Current weather',
      description: 'Current temperature, conditions, humidity and wind for a city, with the observation time. A city without a station is not_found.',
      cost_credits: 1,
      default_version: 1,
      labels: ['weather', 'temperature', 'conditions', 'humidity', 'wind', 'now'],
      versions: [
        {
          version: 1,
          input_schema: cityInput,
          output_schema: {
            type: 'object',
            additionalProperties: false,
            required: ['city', 'country', 'temperature_c', 'conditions', 'humidity_pct', 'wind_kph', 'observed_at'],
            properties: {
              city: { type: 'string' },
              country: { type: 'string', pattern: '^[A-Z]{2}$', description: 'ISO 3166-1 alpha-2 code' },
              temperature_c: { type: 'number' },
              conditions: { type: 'string' },
              humidity_pct: { type: 'integer', minimum: 0, maximum: 100 },
              wind_kph: { type: 'number', minimum: 0 },
              observed_at: DATETIME,
            },
          },
          recipe: currentRecipe,
          examples: [
            {
              title: "London now",
              input: {
                city: "London"
              },
              output: {
                city: "London",
                country: "GB",
                temperature_c: 14.2,
                conditions: "Light rain",
                humidity_pct: 81,
                wind_kph: 17,
                observed_at: "2025-06-01T12:00:00Z"
              }
            },
            {
              title: "A city name with a space",
              input: {
                city: "New York"
              },
              output: {
                city: "New York",
                country: "US",
                temperature_c: 21.6,
                conditions: "Thunderstorms",
                humidity_pct: 77,
                wind_kph: 22,
                observed_at: "2025-06-01T12:00:00Z"
              }
            }
          ],
        },
      ],
    },
    {
      name: 'forecast',
      label: 'Daily forecast',
      description: 'Daily forecast for the next 1 to 7 days for a city: minimum and maximum temperature, conditions, precipitation and chance of rain.',
      cost_credits: 1,
      default_version: 1,
      labels: ['weather', 'forecast', 'rain', 'temperature', 'week'],
      versions: [
        {
          version: 1,
          input_schema: {
            type: 'object',
            additionalProperties: false,
            required: ['city'],
            properties: { city: CITY, days: { type: 'integer', minimum: 1, maximum: 7, default: 3, description: 'Number of days (1–7)' } },
          },
          output_schema: {
            type: 'object',
            additionalProperties: false,
            required: ['city', 'country', 'issued_at', 'days'],
            properties: {
              city: { type: 'string' },
              country: { type: 'string', pattern: '^[A-Z]{2}$' },
              issued_at: DATETIME,
              days: {
                type: 'array',
                minItems: 1,
                maxItems: 7,
                items: {
                  type: 'object',
                  additionalProperties: false,
                  required: ['date', 'min_c', 'max_c', 'conditions', 'precipitation_mm', 'chance_of_rain_pct'],
                  properties: {
                    date: DATE,
                    min_c: { type: 'number' },
                    max_c: { type: 'number' },
                    conditions: { type: 'string' },
                    precipitation_mm: { type: 'number', minimum: 0 },
                    chance_of_rain_pct: { type: 'integer', minimum: 0, maximum: 100 },
                  },
                },
              },
            },
          },
          recipe: forecastRecipe,
          examples: [
            {
              title: "Two days in Paris",
              input: {
                city: "Paris",
                days: 2
              },
              output: {
                city: "Paris",
                country: "FR",
                issued_at: "2025-06-01T12:00:00Z",
                days: [
                  {
                    date: "2025-06-02",
                    min_c: 13.5,
                    max_c: 24.6,
                    conditions: "Mostly sunny",
                    precipitation_mm: 9.5,
                    chance_of_rain_pct: 56
                  },
                  {
                    date: "2025-06-03",
                    min_c: 14.5,
                    max_c: 23.6,
                    conditions: "Thunderstorms",
                    precipitation_mm: 8.7,
                    chance_of_rain_pct: 29
                  }
                ]
              }
            },
            {
              title: "Default of three days",
              input: {
                city: "Cairo"
              },
              output: {
                city: "Cairo",
                country: "EG",
                issued_at: "2025-06-01T12:00:00Z",
                days: [
                  {
                    date: "2025-06-02",
                    min_c: 24.1,
                    max_c: 35.6,
                    conditions: "Light rain",
                    precipitation_mm: 5.4,
                    chance_of_rain_pct: 64
                  },
                  {
                    date: "2025-06-03",
                    min_c: 26.1,
                    max_c: 36.5,
                    conditions: "Showers",
                    precipitation_mm: 6.2,
                    chance_of_rain_pct: 91
                  },
                  {
                    date: "2025-06-04",
                    min_c: 28.1,
                    max_c: 39.3,
                    conditions: "Sunny",
                    precipitation_mm: 10.3,
                    chance_of_rain_pct: 24
                  }
                ]
              }
            }
          ],
        },
      ],
    },
    {
      name: 'weather_alerts',
      label: 'Weather alerts',
      description: 'Active weather warnings for a region (severity, event, headline, start and end). The API allows 5 calls per 10 seconds; beyond that the call fails with source_rate_limited.',
      cost_credits: 1,
      default_version: 1,
      labels: ['weather', 'alerts', 'warnings', 'storm', 'heat'],
      versions: [
        {
          version: 1,
          input_schema: { type: 'object', additionalProperties: false, required: ['region'], properties: { region: { type: 'string', enum: REGIONS } } },
          output_schema: {
            type: 'object',
            additionalProperties: false,
            required: ['region', 'updated_at', 'alerts'],
            properties: {
              region: { type: 'string' },
              updated_at: DATETIME,
              alerts: {
                type: 'array',
                items: {
                  type: 'object',
                  additionalProperties: false,
                  required: ['id', 'severity', 'event', 'headline', 'starts_at', 'ends_at'],
                  properties: {
                    id: { type: 'string' },
                    severity: { type: 'string', enum: ['minor', 'moderate', 'severe'] },
                    event: { type: 'string' },
                    headline: { type: 'string' },
                    starts_at: DATETIME,
                    ends_at: DATETIME,
                  },
                },
              },
            },
          },
          recipe: alertsRecipe,
          examples: [
            {
              title: "Two alerts in New York",
              input: {
                region: "new-york"
              },
              output: {
                region: "new-york",
                updated_at: "2025-06-01T12:00:00Z",
                alerts: [
                  {
                    id: "ALR-US-7731",
                    severity: "severe",
                    event: "Severe thunderstorm",
                    headline: "Severe thunderstorm watch until 9 PM EDT",
                    starts_at: "2025-06-01T16:00:00Z",
                    ends_at: "2025-06-02T01:00:00Z"
                  },
                  {
                    id: "ALR-US-7732",
                    severity: "minor",
                    event: "Air quality",
                    headline: "Air quality alert for sensitive groups",
                    starts_at: "2025-06-01T10:00:00Z",
                    ends_at: "2025-06-01T23:59:00Z"
                  }
                ]
              }
            },
            {
              title: "A region without alerts",
              input: {
                region: "kanto"
              },
              output: {
                region: "kanto",
                updated_at: "2025-06-01T12:00:00Z",
                alerts: []
              }
            }
          ],
        },
      ],
    },
    {
      name: 'weather_history',
      label: 'Weather on a past day',
      description: 'Observed minimum and maximum temperature, conditions, precipitation and humidity for a city on a past day. Needs a Skyline Weather API key (WEATHER_API_KEY) on the organization.',
      cost_credits: 1,
      default_version: 1,
      access: [{ kind: 'access_key', name: 'WEATHER_API_KEY', site: HOST }],
      labels: ['weather', 'history', 'past weather', 'observations'],
      versions: [
        {
          version: 1,
          input_schema: {
            type: 'object',
            additionalProperties: false,
            required: ['city', 'date'],
            properties: { city: CITY, date: { ...DATE, description: 'A past day, YYYY-MM-DD' } },
          },
          output_schema: {
            type: 'object',
            additionalProperties: false,
            required: ['city', 'country', 'date', 'min_c', 'max_c', 'conditions', 'precipitation_mm', 'humidity_pct'],
            properties: {
              city: { type: 'string' },
              country: { type: 'string', pattern: '^[A-Z]{2}$' },
              date: DATE,
              min_c: { type: 'number' },
              max_c: { type: 'number' },
              conditions: { type: 'string' },
              precipitation_mm: { type: 'number', minimum: 0 },
              humidity_pct: { type: 'integer', minimum: 0, maximum: 100 },
            },
          },
          recipe: historyRecipe,
          examples: [
            {
              title: "London on the first of May",
              input: {
                city: "London",
                date: "2025-05-01"
              },
              output: {
                city: "London",
                country: "GB",
                date: "2025-05-01",
                min_c: 8.2,
                max_c: 18.3,
                conditions: "Overcast",
                precipitation_mm: 10.1,
                humidity_pct: 68
              }
            },
            {
              title: "Sydney at the start of the year",
              input: {
                city: "Sydney",
                date: "2025-01-15"
              },
              output: {
                city: "Sydney",
                country: "AU",
                date: "2025-01-15",
                min_c: 7.4,
                max_c: 17.9,
                conditions: "Mostly sunny",
                precipitation_mm: 8.5,
                humidity_pct: 89
              }
            }
          ],
        },
      ],
    },
  ],
};

export const airQualityApi: ApiDefinition = {
  handle: '@air-quality',
  name: 'Skyline Air Quality',
  description: 'Air quality index and pollutant levels for major cities from the Skyline Weather API’s sensor network.',
  category: 'health',
  website_url: `http://${HOST}/api/v1`,
  sites: [site('Skyline Weather API', HOST)],
  operations: [
    {
      name: 'air_quality',
      label: 'Air quality now',
      description: 'Current air quality index (AQI) with its category and PM2.5, PM10 and ozone levels for a city. The sensors are sometimes unavailable; such a call fails with a retryable upstream_http_error.',
      cost_credits: 1,
      default_version: 1,
      labels: ['air quality', 'aqi', 'pollution', 'pm2.5', 'health'],
      versions: [
        {
          version: 1,
          input_schema: cityInput,
          output_schema: {
            type: 'object',
            additionalProperties: false,
            required: ['city', 'country', 'aqi', 'category', 'pm25_ugm3', 'pm10_ugm3', 'o3_ppb', 'observed_at'],
            properties: {
              city: { type: 'string' },
              country: { type: 'string', pattern: '^[A-Z]{2}$' },
              aqi: { type: 'integer', minimum: 0, maximum: 500 },
              category: { type: 'string' },
              pm25_ugm3: { type: 'number', minimum: 0 },
              pm10_ugm3: { type: 'number', minimum: 0 },
              o3_ppb: { type: 'number', minimum: 0 },
              observed_at: DATETIME,
            },
          },
          recipe: airQualityRecipe,
          examples: [
            {
              title: "Madrid",
              input: {
                city: "Madrid"
              },
              output: {
                city: "Madrid",
                country: "ES",
                aqi: 115,
                category: "Unhealthy for sensitive groups",
                pm25_ugm3: 28,
                pm10_ugm3: 50,
                o3_ppb: 33,
                observed_at: "2025-06-01T12:00:00Z"
              }
            },
            {
              title: "Tokyo",
              input: {
                city: "Tokyo"
              },
              output: {
                city: "Tokyo",
                country: "JP",
                aqi: 92,
                category: "Moderate",
                pm25_ugm3: 22.4,
                pm10_ugm3: 40,
                o3_ppb: 36,
                observed_at: "2025-06-01T12:00:00Z"
              }
            }
          ],
        },
      ],
    },
  ],
};
