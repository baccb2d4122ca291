// A workflow over a site's JSON API that returns as many items as asked for: the fixture of the
// tests that need results of a chosen size (test/shaping-payload.test.ts, test/sse-backpressure.test.ts).
import type { ApiDefinition } from '../../shared/catalog/types.ts';

/** n items of about 60 bytes each, as the site's JSON API answers them. */
export function bulkItems(n: number) {
  return { items: Array.from({ length: n }, (_, i) => ({ id: i, name: `item ${i} ${'x'.repeat(40)}` })) };
}

/** `@handle list_items {n}`: a GET of http://host/items?n=… whose JSON is the output. */
export function bulkListApi(handle: string, host: string, name: string): ApiDefinition {
  return {
    handle,
    name,
    description: 'Returns as many items as asked for.',
    category: 'other',
    website_url: `http://${host}/`,
    sites: [{ name: 'Bulk', host }],
    operations: [
      {
        name: 'list_items',
        label: 'List items',
        description: 'The first n items.',
        cost_credits: 1,
        default_version: 1,
        versions: [
          {
            version: 1,
            input_schema: { type: 'object', additionalProperties: false, required: ['n'], properties: { n: { type: 'integer', minimum: 1, maximum: 100000 } } },
            output_schema: { type: 'object', required: ['items'], properties: { items: { type: 'array' } } },
            examples: [],
            recipe: {
              engine: 'http',
              hosts: [host],
              steps: [{ type: 'request', name: 'Items', url: `http://${host}/items`, query: { n: '{{input.n}}' }, parse: 'json', expect_status: [200], save_as: 'list' }],
              output: '{{vars.list}}',
            },
          },
        ],
      },
    ],
  };
}
