// A workflow that needs a connection: weather on a past day with the organization's
// WEATHER_API_KEY (the weather demo site's /api/v1/history refuses a request without a valid key),
// for the connections test files (connections.test.ts, connections-rekey.test.ts).
import type { ApiDefinition } from '../../shared/catalog/types.ts';

export const WEATHER = 'weather.example.test';
export const WEATHER_REQ = { kind: 'access_key' as const, name: 'WEATHER_API_KEY', site: WEATHER };

export const weatherHistoryApi = (handle: string, name: string): ApiDefinition => ({
  handle,
  name,
  description: 'Past weather with the organization’s access key (test fixture).',
  category: 'weather',
  website_url: `http://${WEATHER}/`,
  sites: [{ name: 'Skyline Weather', host: WEATHER }],
  operations: [
    {
      name: 'history',
      label: 'Weather on a past day',
      description: 'Needs WEATHER_API_KEY.',
      cost_credits: 2,
      default_version: 1,
      access: [WEATHER_REQ],
      versions: [
        {
          version: 1,
          input_schema: {
            type: 'object',
            additionalProperties: false,
            required: ['city', 'date'],
            properties: { city: { type: 'string', minLength: 1 }, date: { type: 'string', pattern: '^\\d{4}-\\d{2}-\\d{2}$' } },
          },
          output_schema: {
            type: 'object',
            additionalProperties: false,
            required: ['city', 'date', 'min_c', 'max_c'],
            properties: { city: { type: 'string' }, date: { type: 'string' }, min_c: { type: 'number' }, max_c: { type: 'number' } },
          },
          examples: [],
          recipe: {
            engine: 'http',
            hosts: [WEATHER],
            secrets: ['WEATHER_API_KEY'],
            steps: [
              {
                type: 'request',
                name: 'Historical observations',
                url: `http://${WEATHER}/api/v1/history`,
                query: { city: '{{input.city}}', date: '{{input.date}}' },
                headers: { 'X-Api-Key': '{{secrets.WEATHER_API_KEY}}' },
                parse: 'json',
                expect_status: [200],
                not_found_status: [404],
                save_as: 'h',
              },
              {
                type: 'extract',
                from: { var: 'h' },
                fields: {
                  city: { type: 'text', pointer: '/city' },
                  date: { type: 'text', pointer: '/date' },
                  min_c: { type: 'number', pointer: '/min_c' },
                  max_c: { type: 'number', pointer: '/max_c' },
                },
                save_as: 'day',
              },
            ],
            output: '{{vars.day}}',
          },
        },
      ],
    },
  ],
});
