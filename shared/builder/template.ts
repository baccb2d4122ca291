// `npm run admin -- workflow template`: a complete, working definition against the books demo site
// (books.example.test, which the worker's host map points at the running demo sites, exactly as
// for the demo catalog). Its example is a verified one: a test run passes as printed.
import type { BuilderDefinition } from './definition.ts';

const HOST = 'books.example.test';
const ISBN13 = { type: 'string', pattern: '^97[89][0-9]{10}$', description: '13-digit ISBN without hyphens' };

/** A fresh copy on every call: callers edit it (shared sub-objects would leak edits between calls). */
export function workflowTemplate(handle = '@my-bookshop'): BuilderDefinition {
  return structuredClone(template(handle));
}

function template(handle: string): BuilderDefinition {
  return {
    handle,
    name: 'My bookshop prices',
    description: 'Reads the title, authors, price and stock of a book at the Ferrow & Finch bookshop by its ISBN.',
    category: 'commerce',
    website_url: `http://${HOST}/`,
    sites: [{ name: 'Ferrow & Finch Books', host: HOST }],
    operations: [
      {
        name: 'book_price',
        label: 'Book price',
        description: 'The price, currency and stock of one book, by its 13-digit ISBN.',
        cost_credits: 1,
        input_schema: { type: 'object', additionalProperties: false, required: ['isbn13'], properties: { isbn13: ISBN13 } },
        output_schema: {
          type: 'object',
          additionalProperties: false,
          required: ['isbn13', 'title', 'authors', 'price', 'currency', 'in_stock'],
          properties: {
            isbn13: ISBN13,
            title: { type: 'string' },
            authors: { type: 'array', items: { type: 'string' } },
            price: { type: 'number', minimum: 0 },
            currency: { type: 'string', pattern: '^[A-Z]{3}$' },
            in_stock: { type: 'boolean' },
          },
        },
        recipe: {
          engine: 'http',
          hosts: [HOST],
          steps: [
            { type: 'navigate', name: 'Open the book page', url: `http://${HOST}/books/{{input.isbn13}}`, not_found_status: [404, 410] },
            { type: 'not_found', when: { selector_absent: 'article.book-detail' }, message: 'No book with that ISBN' },
            {
              type: 'extract',
              name: 'Read the price',
              scope: 'article.book-detail',
              fields: {
                isbn13: { type: 'text', selector: '.isbn13' },
                title: { type: 'text', selector: 'h1.title' },
                authors: { type: 'list', selector: '.authors .author', item: { type: 'text' } },
                price: { type: 'number', selector: '.buy-box .price' },
                currency: { type: 'attribute', selector: '.buy-box .price', attribute: 'data-currency' },
                in_stock: { type: 'boolean', selector: '.buy-box .availability', attribute: 'data-stock', true_values: ['in_stock', 'low_stock'] },
              },
              save_as: 'book',
            },
          ],
          output: '{{vars.book}}',
        },
        examples: [
          {
            title: 'A mystery that is nearly sold out',
            input: { isbn13: '9782918455943' },
            output: { isbn13: '9782918455943', title: 'Murder on the Night Ferry', authors: ['Clara Whitcombe'], price: 7.99, currency: 'GBP', in_stock: true },
          },
        ],
      },
    ],
  };
}
