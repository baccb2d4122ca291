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
  ],
};
