// @books — Ferrow & Finch Books (books.example.test), a server-rendered bookshop.
import type { ApiDefinition, JsonSchema } from '../types.ts';
import type { Field, Recipe } from '../../recipes/schema.ts';
import { DATE, site } from './common.ts';

const HOST = 'books.example.test';
const ISBN13 = { type: 'string', pattern: '^97[89][0-9]{10}$', description: '13-digit ISBN without hyphens, e.g. 9781234567897' } as const;

// --- search_books ------------------------------------------------------------------------------

const bookSummaryFields: Record<string, Field> = {
  isbn13: { type: 'attribute', attribute: 'data-isbn' },
  title: { type: 'text', selector: '.title a' },
  authors: { type: 'list', selector: '.authors .author', item: { type: 'text' } },
  price: { type: 'number', selector: '.price' },
  currency: { type: 'attribute', selector: '.price', attribute: 'data-currency' },
  rating: { type: 'integer', selector: '.rating', attribute: 'data-rating' },
  availability: { type: 'text', selector: '.availability' },
  in_stock: { type: 'boolean', selector: '.availability', true_values: ['In stock', 'Only a few left'] },
  published: { type: 'date', selector: '.published time' },
  url: { type: 'url', selector: '.title a' },
};

const searchRecipe: Recipe = {
  engine: 'http',
  hosts: [HOST],
  steps: [
    { type: 'navigate', name: 'Open search results', url: `http://${HOST}/search?q={{input.query}}` },
    { type: 'extract', name: 'Read result count', fields: { total: { type: 'integer', selector: '.result-count', attribute: 'data-total', default: 0 } }, save_as: 'summary' },
    {
      type: 'paginate',
      name: 'Collect results across pages',
      limit: '{{input.max_results}}',
      default_limit: 10,
      max_pages: 10,
      collect: 'page.items',
      save_as: 'books',
      next: { kind: 'link', selector: 'nav.pagination a[rel="next"]' },
      steps: [{ type: 'extract', fields: { items: { type: 'list', selector: 'ol.results > li.book', fields: bookSummaryFields } }, save_as: 'page' }],
    },
  ],
  output: { query: '{{input.query}}', total_results: '{{vars.summary.total}}', returned: '{{vars.books.length}}', books: '{{vars.books}}' },
};

const bookSummarySchema: JsonSchema = {
  type: 'object',
  additionalProperties: false,
  required: ['isbn13', 'title', 'authors', 'price', 'currency', 'rating', 'availability', 'in_stock', 'published', 'url'],
  properties: {
    isbn13: ISBN13,
    title: { type: 'string' },
    authors: { type: 'array', items: { type: 'string' } },
    price: { type: 'number', minimum: 0, description: 'Price in major units of `currency`' },
    currency: { type: 'string', pattern: '^[A-Z]{3}$' },
    rating: { type: 'integer', minimum: 1, maximum: 5 },
    availability: { type: 'string', description: 'Stock label as shown on the site' },
    in_stock: { type: 'boolean' },
    published: DATE,
    url: { type: 'string', format: 'uri' },
  },
};

// --- get_book ---------------------------------------------------------------------------------

const bookDetailFields: Record<string, Field> = {
  isbn13: { type: 'text', selector: '.isbn13' },
  title: { type: 'text', selector: 'h1.title' },
  authors: { type: 'list', selector: '.authors .author', item: { type: 'text' } },
  price: { type: 'number', selector: '.buy-box .price' },
  currency: { type: 'attribute', selector: '.buy-box .price', attribute: 'data-currency' },
  availability: { type: 'text', selector: '.buy-box .availability' },
  in_stock: { type: 'boolean', selector: '.buy-box .availability', attribute: 'data-stock', true_values: ['in_stock', 'low_stock'] },
  stock_count: { type: 'integer', selector: '.buy-box .availability', attribute: 'data-stock-count' },
  rating: { type: 'integer', selector: '.rating', attribute: 'data-rating' },
  publisher: { type: 'text', selector: '.product-info .publisher' },
  published: { type: 'date', selector: '.product-info .published time', attribute: 'datetime' },
  pages: { type: 'integer', selector: '.product-info .pages' },
  categories: { type: 'list', selector: '.product-info .categories a.category', item: { type: 'text' } },
  description: { type: 'text', selector: '.description p' },
};

function getBookRecipe(output: Record<string, string>): Recipe {
  return {
    engine: 'http',
    hosts: [HOST],
    steps: [
      { type: 'navigate', name: 'Open the book page', url: `http://${HOST}/books/{{input.isbn13}}`, not_found_status: [404, 410] },
      { type: 'not_found', when: { selector_absent: 'article.book-detail' }, message: 'No book with that ISBN' },
      { type: 'extract', name: 'Read book details', scope: 'article.book-detail', fields: bookDetailFields, save_as: 'book' },
    ],
    output,
  };
}

const getBookV1Output = {
  isbn13: '{{vars.book.isbn13}}',
  title: '{{vars.book.title}}',
  authors: '{{vars.book.authors}}',
  price: '{{vars.book.price}}',
  currency: '{{vars.book.currency}}',
  availability: '{{vars.book.availability}}',
  in_stock: '{{vars.book.in_stock}}',
  rating: '{{vars.book.rating}}',
  publisher: '{{vars.book.publisher}}',
  published: '{{vars.book.published}}',
  pages: '{{vars.book.pages}}',
  categories: '{{vars.book.categories}}',
  description: '{{vars.book.description}}',
};

// v2: `published` is renamed `published_date`, and `stock_count` is added.
const { published: _published, ...getBookV2Base } = getBookV1Output;
const getBookV2Output = { ...getBookV2Base, published_date: '{{vars.book.published}}', stock_count: '{{vars.book.stock_count}}' };

const bookDetailProps = {
  isbn13: ISBN13,
  title: { type: 'string' },
  authors: { type: 'array', items: { type: 'string' }, minItems: 1 },
  price: { type: 'number', minimum: 0 },
  currency: { type: 'string', pattern: '^[A-Z]{3}$' },
  availability: { type: 'string' },
  in_stock: { type: 'boolean' },
  rating: { type: 'integer', minimum: 1, maximum: 5 },
  publisher: { type: 'string' },
  pages: { type: 'integer', minimum: 1 },
  categories: { type: 'array', items: { type: 'string' } },
  description: { type: 'string' },
};

const getBookV1Schema: JsonSchema = {
  type: 'object',
  additionalProperties: false,
  required: [...Object.keys(bookDetailProps), 'published'],
  properties: { ...bookDetailProps, published: DATE },
};
const getBookV2Schema: JsonSchema = {
  type: 'object',
  additionalProperties: false,
  required: [...Object.keys(bookDetailProps), 'published_date', 'stock_count'],
  properties: { ...bookDetailProps, published_date: DATE, stock_count: { type: 'integer', minimum: 0, description: 'Copies left in stock' } },
};

const getBookInput: JsonSchema = {
  type: 'object',
  additionalProperties: false,
  required: ['isbn13'],
  properties: { isbn13: ISBN13 },
};

export const booksApi: ApiDefinition = {
  handle: '@books',
  name: 'Ferrow & Finch Books',
  description: 'Search the catalogue of the Ferrow & Finch independent bookshop and read a book’s price, stock, rating and details.',
  category: 'media',
  website_url: `http://${HOST}/`,
  sites: [site('Ferrow & Finch Books', HOST)],
  operations: [
    {
      name: 'search_books',
      label: 'Search books',
      description:
        'Searches the bookshop by title, author, ISBN, publisher or category and returns up to max_results books (following the result pages) with price, rating, stock and publication date.',
      cost_credits: 1,
      default_version: 1,
      labels: ['books', 'bookshop', 'search', 'isbn', 'author', 'price', 'stock'],
      versions: [
        {
          version: 1,
          input_schema: {
            type: 'object',
            additionalProperties: false,
            required: ['query'],
            properties: {
              query: { type: 'string', minLength: 1, maxLength: 200, description: 'Words from the title, author, ISBN, publisher or category' },
              max_results: { type: 'integer', minimum: 1, maximum: 50, default: 10, description: 'Most books to return (pages are followed as needed)' },
            },
          },
          output_schema: {
            type: 'object',
            additionalProperties: false,
            required: ['query', 'total_results', 'returned', 'books'],
            properties: {
              query: { type: 'string' },
              total_results: { type: 'integer', minimum: 0, description: 'Matches on the site (may exceed the books returned)' },
              returned: { type: 'integer', minimum: 0 },
              books: { type: 'array', items: bookSummarySchema },
            },
          },
          recipe: searchRecipe,
          examples: [
            {
              title: "Books by an author, first three",
              input: {
                query: "Clara Whitcombe",
                max_results: 3
              },
              output: {
                query: "Clara Whitcombe",
                total_results: 4,
                returned: 3,
                books: [
                  {
                    isbn13: "9782918455943",
                    title: "Murder on the Night Ferry",
                    authors: [
                      "Clara Whitcombe"
                    ],
                    price: 7.99,
                    currency: "GBP",
                    rating: 4,
                    availability: "Only a few left",
                    in_stock: true,
                    published: "2018-11-22",
                    url: "http://books.example.test/books/9782918455943"
                  },
                  {
                    isbn13: "9788632396135",
                    title: "Cold Case at Kettle Lane",
                    authors: [
                      "Clara Whitcombe"
                    ],
                    price: 7.99,
                    currency: "GBP",
                    rating: 3,
                    availability: "In stock",
                    in_stock: true,
                    published: "2020-02-06",
                    url: "http://books.example.test/books/9788632396135"
                  },
                  {
                    isbn13: "9784938452759",
                    title: "The Silent Partner",
                    authors: [
                      "Clara Whitcombe"
                    ],
                    price: 8.49,
                    currency: "GBP",
                    rating: 4,
                    availability: "In stock",
                    in_stock: true,
                    published: "2024-05-23",
                    url: "http://books.example.test/books/9784938452759"
                  }
                ]
              }
            },
            {
              title: "A broad search that follows the result pages",
              input: {
                query: "the",
                max_results: 12
              },
              output: {
                query: "the",
                total_results: 23,
                returned: 12,
                books: [
                  {
                    isbn13: "9784080273349",
                    title: "The Lighthouse at Ferrow Point",
                    authors: [
                      "Margaret Ellison"
                    ],
                    price: 8.99,
                    currency: "GBP",
                    rating: 4,
                    availability: "In stock",
                    in_stock: true,
                    published: "2019-04-11",
                    url: "http://books.example.test/books/9784080273349"
                  },
                  {
                    isbn13: "9789150142396",
                    title: "A Quiet Theory of Everything",
                    authors: [
                      "Dr. Samuel Okafor"
                    ],
                    price: 14.5,
                    currency: "GBP",
                    rating: 5,
                    availability: "In stock",
                    in_stock: true,
                    published: "2021-09-02",
                    url: "http://books.example.test/books/9789150142396"
                  },
                  {
                    isbn13: "9782918455943",
                    title: "Murder on the Night Ferry",
                    authors: [
                      "Clara Whitcombe"
                    ],
                    price: 7.99,
                    currency: "GBP",
                    rating: 4,
                    availability: "Only a few left",
                    in_stock: true,
                    published: "2018-11-22",
                    url: "http://books.example.test/books/9782918455943"
                  },
                  {
                    isbn13: "9785957191391",
                    title: "The Salt Roads",
                    authors: [
                      "Idris Calloway"
                    ],
                    price: 18,
                    currency: "GBP",
                    rating: 3,
                    availability: "In stock",
                    in_stock: true,
                    published: "2016-03-15",
                    url: "http://books.example.test/books/9785957191391"
                  },
                  {
                    isbn13: "9786848214618",
                    title: "Walking the Long Coast",
                    authors: [
                      "Thomas Reyes"
                    ],
                    price: 12.99,
                    currency: "GBP",
                    rating: 3,
                    availability: "Out of stock",
                    in_stock: false,
                    published: "2017-06-08",
                    url: "http://books.example.test/books/9786848214618"
                  },
                  {
                    isbn13: "9785962166827",
                    title: "The Fox Who Counted Stars",
                    authors: [
                      "Ellie Marsh",
                      "Ben Adeyemi"
                    ],
                    price: 6.99,
                    currency: "GBP",
                    rating: 5,
                    availability: "In stock",
                    in_stock: true,
                    published: "2023-02-14",
                    url: "http://books.example.test/books/9785962166827"
                  },
                  {
                    isbn13: "9789611748198",
                    title: "Weather of the Heart",
                    authors: [
                      "Anaïs Moreau"
                    ],
                    price: 10,
                    currency: "GBP",
                    rating: 4,
                    availability: "In stock",
                    in_stock: true,
                    published: "2015-05-05",
                    url: "http://books.example.test/books/9789611748198"
                  },
                  {
                    isbn13: "9781578200252",
                    title: "The Margin of Error",
                    authors: [
                      "Priya Raman"
                    ],
                    price: 16.99,
                    currency: "GBP",
                    rating: 4,
                    availability: "In stock",
                    in_stock: true,
                    published: "2021-04-27",
                    url: "http://books.example.test/books/9781578200252"
                  },
                  {
                    isbn13: "9785729157075",
                    title: "The Glass Orchard",
                    authors: [
                      "Margaret Ellison"
                    ],
                    price: 8.99,
                    currency: "GBP",
                    rating: 4,
                    availability: "In stock",
                    in_stock: true,
                    published: "2022-07-19",
                    url: "http://books.example.test/books/9785729157075"
                  },
                  {
                    isbn13: "9781115904650",
                    title: "Signals from the Deep Field",
                    authors: [
                      "Yuki Tanabe"
                    ],
                    price: 11.99,
                    currency: "GBP",
                    rating: 4,
                    availability: "In stock",
                    in_stock: true,
                    published: "2024-03-12",
                    url: "http://books.example.test/books/9781115904650"
                  },
                  {
                    isbn13: "9786648977775",
                    title: "The Honest Spreadsheet",
                    authors: [
                      "Priya Raman",
                      "Leo Fischer"
                    ],
                    price: 24.99,
                    currency: "GBP",
                    rating: 2,
                    availability: "In stock",
                    in_stock: true,
                    published: "2019-08-15",
                    url: "http://books.example.test/books/9786648977775"
                  },
                  {
                    isbn13: "9780010815887",
                    title: "Small Gods of the Garden",
                    authors: [
                      "Henrietta Bloom"
                    ],
                    price: 13.5,
                    currency: "GBP",
                    rating: 5,
                    availability: "In stock",
                    in_stock: true,
                    published: "2018-04-03",
                    url: "http://books.example.test/books/9780010815887"
                  }
                ]
              }
            }
          ],
        },
      ],
    },
    {
      name: 'get_book',
      label: 'Get a book by ISBN',
      description:
        'Reads one book’s page by its 13-digit ISBN: title, authors, price, stock, rating, publisher, publication date, pages, categories and description. An unknown ISBN is not_found.',
      cost_credits: 1,
      default_version: 1,
      labels: ['books', 'isbn', 'book details', 'price', 'stock', 'publisher'],
      versions: [
        {
          version: 1,
          input_schema: getBookInput,
          output_schema: getBookV1Schema,
          recipe: getBookRecipe(getBookV1Output),
          examples: [
            {
              title: "A mystery that is nearly sold out",
              input: {
                isbn13: "9782918455943"
              },
              output: {
                isbn13: "9782918455943",
                title: "Murder on the Night Ferry",
                authors: [
                  "Clara Whitcombe"
                ],
                price: 7.99,
                currency: "GBP",
                availability: "Only a few left (3 left)",
                in_stock: true,
                rating: 4,
                publisher: "Blackmoor",
                published: "2018-11-22",
                pages: 320,
                categories: [
                  "Mystery & Thriller",
                  "Fiction"
                ],
                description: "A detective, a storm and nine passengers with secrets."
              }
            },
            {
              title: "A business thriller in stock",
              input: {
                isbn13: "9784938452759"
              },
              output: {
                isbn13: "9784938452759",
                title: "The Silent Partner",
                authors: [
                  "Clara Whitcombe"
                ],
                price: 8.49,
                currency: "GBP",
                availability: "In stock",
                in_stock: true,
                rating: 4,
                publisher: "Blackmoor",
                published: "2024-05-23",
                pages: 344,
                categories: [
                  "Mystery & Thriller",
                  "Business"
                ],
                description: "A merger, a missing CFO and a very quiet boardroom."
              }
            }
          ],
        },
        {
          version: 2,
          input_schema: getBookInput,
          output_schema: getBookV2Schema,
          recipe: getBookRecipe(getBookV2Output),
          examples: [
            {
              title: "A mystery that is nearly sold out",
              input: {
                isbn13: "9782918455943"
              },
              output: {
                isbn13: "9782918455943",
                title: "Murder on the Night Ferry",
                authors: [
                  "Clara Whitcombe"
                ],
                price: 7.99,
                currency: "GBP",
                availability: "Only a few left (3 left)",
                in_stock: true,
                rating: 4,
                publisher: "Blackmoor",
                pages: 320,
                categories: [
                  "Mystery & Thriller",
                  "Fiction"
                ],
                description: "A detective, a storm and nine passengers with secrets.",
                published_date: "2018-11-22",
                stock_count: 3
              }
            },
            {
              title: "A business thriller in stock",
              input: {
                isbn13: "9784938452759"
              },
              output: {
                isbn13: "9784938452759",
                title: "The Silent Partner",
                authors: [
                  "Clara Whitcombe"
                ],
                price: 8.49,
                currency: "GBP",
                availability: "In stock",
                in_stock: true,
                rating: 4,
                publisher: "Blackmoor",
                pages: 344,
                categories: [
                  "Mystery & Thriller",
                  "Business"
                ],
                description: "A merger, a missing CFO and a very quiet boardroom.",
                published_date: "2024-05-23",
                stock_count: 13
              }
            }
          ],
        },
      ],
    },
  ],
};
