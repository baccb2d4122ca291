// @news — The Daily Meridian (news.example.test), a server-rendered news site.
import type { ApiDefinition, JsonSchema } from '../types.ts';
import type { Field, Recipe } from '../../recipes/schema.ts';
import { DATETIME, site } from './common.ts';

const HOST = 'news.example.test';
const SECTIONS = ['world', 'technology', 'business', 'science', 'sport', 'culture'];
const SLUG = { type: 'string', pattern: '^[a-z0-9]+(-[a-z0-9]+)*$', maxLength: 200, description: 'Article slug from its address, e.g. chipmaker-opens-first-plant-outside-asia' } as const;

const summaryFields: Record<string, Field> = {
  slug: { type: 'attribute', attribute: 'data-slug' },
  headline: { type: 'text', selector: '.headline a' },
  section: { type: 'text', selector: '.section-label' },
  summary: { type: 'text', selector: '.standfirst' },
  author: { type: 'text', selector: '.author' },
  published_at: { type: 'datetime', selector: '.meta time', attribute: 'datetime' },
  url: { type: 'url', selector: '.headline a' },
};

function listingRecipe(path: string): Recipe {
  return {
    engine: 'http',
    hosts: [HOST],
    steps: [
      { type: 'navigate', name: 'Open the listing', url: `http://${HOST}${path}`, not_found_status: [404] },
      {
        type: 'paginate',
        name: 'Collect headlines across pages',
        limit: '{{input.max_results}}',
        default_limit: 10,
        max_pages: 10,
        collect: 'page.articles',
        save_as: 'articles',
        next: { kind: 'link', selector: 'nav.pagination a[rel="next"]' },
        steps: [{ type: 'extract', fields: { articles: { type: 'list', selector: 'ol.articles > li.article-summary', fields: summaryFields } }, save_as: 'page' }],
      },
    ],
    output: { articles: '{{vars.articles}}' },
  };
}

const articleRecipe: Recipe = {
  engine: 'http',
  hosts: [HOST],
  steps: [
    { type: 'navigate', name: 'Open the article', url: `http://${HOST}/article/{{input.slug}}`, not_found_status: [404, 410] },
    { type: 'not_found', when: { selector_absent: 'article.article' } },
    {
      type: 'extract',
      scope: 'article.article',
      fields: {
        slug: { type: 'attribute', attribute: 'data-slug' },
        headline: { type: 'text', selector: 'h1.headline' },
        section: { type: 'text', selector: '.section-label' },
        summary: { type: 'text', selector: '.standfirst' },
        author: { type: 'text', selector: '.byline .author' },
        published_at: { type: 'datetime', selector: 'time.published', attribute: 'datetime' },
        paragraphs: { type: 'list', selector: '.article-body > p', item: { type: 'text' } },
        tags: { type: 'list', selector: '.tags a.tag', item: { type: 'text' } },
      },
      save_as: 'article',
    },
  ],
  output: '{{vars.article}}',
};

const summarySchema: JsonSchema = {
  type: 'object',
  additionalProperties: false,
  required: ['slug', 'headline', 'section', 'summary', 'author', 'published_at', 'url'],
  properties: {
    slug: SLUG,
    headline: { type: 'string' },
    section: { type: 'string' },
    summary: { type: 'string' },
    author: { type: 'string' },
    published_at: DATETIME,
    url: { type: 'string', format: 'uri' },
  },
};
const listingOutput: JsonSchema = {
  type: 'object',
  additionalProperties: false,
  required: ['articles'],
  properties: { articles: { type: 'array', items: summarySchema } },
};
const maxResults = { type: 'integer', minimum: 1, maximum: 24, default: 10, description: 'Most articles to return (pages are followed as needed)' };

export const newsApi: ApiDefinition = {
  handle: '@news',
  name: 'The Daily Meridian',
  description: 'Latest headlines, section front pages and full articles from The Daily Meridian, an independent news site.',
  category: 'news',
  website_url: `http://${HOST}/`,
  sites: [site('The Daily Meridian', HOST)],
  operations: [
    {
      name: 'latest_headlines',
      label: 'Latest headlines',
      description: 'The newest articles on the front page, newest first, following the pages until max_results: headline, section, summary, author and publication time.',
      cost_credits: 1,
      default_version: 1,
      labels: ['news', 'headlines', 'latest', 'front page'],
      versions: [
        {
          version: 1,
          input_schema: { type: 'object', additionalProperties: false, properties: { max_results: maxResults } },
          output_schema: listingOutput,
          recipe: listingRecipe('/'),
          examples: [
            {
              title: "The three newest",
              input: {
                max_results: 3
              },
              output: {
                articles: [
                  {
                    slug: "coastal-towns-vote-to-share-flood-defence-costs",
                    headline: "Coastal towns vote to share flood defence costs",
                    section: "World",
                    summary: "Eleven councils agree a joint fund after a winter of record tides.",
                    author: "Hannah Price",
                    published_at: "2025-06-01T07:45:00Z",
                    url: "http://news.example.test/article/coastal-towns-vote-to-share-flood-defence-costs"
                  },
                  {
                    slug: "chipmaker-opens-first-plant-outside-asia",
                    headline: "Chipmaker opens first plant outside Asia",
                    section: "Technology",
                    summary: "The factory is expected to employ 1,200 people by 2027.",
                    author: "Marcus Dell",
                    published_at: "2025-06-01T06:30:00Z",
                    url: "http://news.example.test/article/chipmaker-opens-first-plant-outside-asia"
                  },
                  {
                    slug: "underdogs-reach-cup-final-after-penalty-drama",
                    headline: "Underdogs reach cup final after penalty drama",
                    section: "Sport",
                    summary: "A 19-year-old goalkeeper saved three spot kicks.",
                    author: "Jamie Collins",
                    published_at: "2025-05-31T21:40:00Z",
                    url: "http://news.example.test/article/underdogs-reach-cup-final-after-penalty-drama"
                  }
                ]
              }
            },
            {
              title: "Across two pages",
              input: {
                max_results: 10
              },
              output: {
                articles: [
                  {
                    slug: "coastal-towns-vote-to-share-flood-defence-costs",
                    headline: "Coastal towns vote to share flood defence costs",
                    section: "World",
                    summary: "Eleven councils agree a joint fund after a winter of record tides.",
                    author: "Hannah Price",
                    published_at: "2025-06-01T07:45:00Z",
                    url: "http://news.example.test/article/coastal-towns-vote-to-share-flood-defence-costs"
                  },
                  {
                    slug: "chipmaker-opens-first-plant-outside-asia",
                    headline: "Chipmaker opens first plant outside Asia",
                    section: "Technology",
                    summary: "The factory is expected to employ 1,200 people by 2027.",
                    author: "Marcus Dell",
                    published_at: "2025-06-01T06:30:00Z",
                    url: "http://news.example.test/article/chipmaker-opens-first-plant-outside-asia"
                  },
                  {
                    slug: "underdogs-reach-cup-final-after-penalty-drama",
                    headline: "Underdogs reach cup final after penalty drama",
                    section: "Sport",
                    summary: "A 19-year-old goalkeeper saved three spot kicks.",
                    author: "Jamie Collins",
                    published_at: "2025-05-31T21:40:00Z",
                    url: "http://news.example.test/article/underdogs-reach-cup-final-after-penalty-drama"
                  },
                  {
                    slug: "interest-rates-held-for-a-third-month",
                    headline: "Interest rates held for a third month",
                    section: "Business",
                    summary: "The central bank cited sticky services inflation.",
                    author: "Priya Raman",
                    published_at: "2025-05-31T12:00:00Z",
                    url: "http://news.example.test/article/interest-rates-held-for-a-third-month"
                  },
                  {
                    slug: "telescope-captures-the-faintest-galaxy-yet",
                    headline: "Telescope captures the faintest galaxy yet",
                    section: "Science",
                    summary: "Light from the galaxy left it 13.4 billion years ago.",
                    author: "Dr. Samuel Okafor",
                    published_at: "2025-05-31T09:15:00Z",
                    url: "http://news.example.test/article/telescope-captures-the-faintest-galaxy-yet"
                  },
                  {
                    slug: "museum-returns-bronze-masks-to-their-makers",
                    headline: "Museum returns bronze masks to their makers",
                    section: "Culture",
                    summary: "The repatriation follows a six-year review of the collection.",
                    author: "Anaïs Moreau",
                    published_at: "2025-05-30T16:20:00Z",
                    url: "http://news.example.test/article/museum-returns-bronze-masks-to-their-makers"
                  },
                  {
                    slug: "open-source-browser-engine-hits-version-1-0",
                    headline: "Open-source browser engine hits version 1.0",
                    section: "Technology",
                    summary: "Volunteers spent nine years building it from scratch.",
                    author: "Leo Fischer",
                    published_at: "2025-05-30T11:05:00Z",
                    url: "http://news.example.test/article/open-source-browser-engine-hits-version-1-0"
                  },
                  {
                    slug: "rail-strike-called-off-after-late-night-talks",
                    headline: "Rail strike called off after late-night talks",
                    section: "World",
                    summary: "Unions accepted a revised offer on working hours.",
                    author: "Hannah Price",
                    published_at: "2025-05-30T05:55:00Z",
                    url: "http://news.example.test/article/rail-strike-called-off-after-late-night-talks"
                  },
                  {
                    slug: "bees-use-a-simple-map-to-find-home-study-finds",
                    headline: "Bees use a simple map to find home, study finds",
                    section: "Science",
                    summary: "Researchers tracked 400 bees with tiny radar tags.",
                    author: "Henrietta Bloom",
                    published_at: "2025-05-29T14:30:00Z",
                    url: "http://news.example.test/article/bees-use-a-simple-map-to-find-home-study-finds"
                  },
                  {
                    slug: "grocery-prices-fall-for-the-first-time-in-two-years",
                    headline: "Grocery prices fall for the first time in two years",
                    section: "Business",
                    summary: "Cheaper dairy and vegetables led the decline.",
                    author: "Priya Raman",
                    published_at: "2025-05-29T08:00:00Z",
                    url: "http://news.example.test/article/grocery-prices-fall-for-the-first-time-in-two-years"
                  }
                ]
              }
            }
          ],
        },
      ],
    },
    {
      name: 'section_headlines',
      label: 'Section headlines',
      description: 'The newest articles in one section (world, technology, business, science, sport or culture), newest first.',
      cost_credits: 1,
      default_version: 1,
      labels: ['news', 'section', 'technology', 'business', 'sport', 'science'],
      versions: [
        {
          version: 1,
          input_schema: {
            type: 'object',
            additionalProperties: false,
            required: ['section'],
            properties: { section: { type: 'string', enum: SECTIONS }, max_results: maxResults },
          },
          output_schema: listingOutput,
          recipe: listingRecipe('/section/{{input.section}}'),
          examples: [
            {
              title: "Technology",
              input: {
                section: "technology",
                max_results: 2
              },
              output: {
                articles: [
                  {
                    slug: "chipmaker-opens-first-plant-outside-asia",
                    headline: "Chipmaker opens first plant outside Asia",
                    section: "Technology",
                    summary: "The factory is expected to employ 1,200 people by 2027.",
                    author: "Marcus Dell",
                    published_at: "2025-06-01T06:30:00Z",
                    url: "http://news.example.test/article/chipmaker-opens-first-plant-outside-asia"
                  },
                  {
                    slug: "open-source-browser-engine-hits-version-1-0",
                    headline: "Open-source browser engine hits version 1.0",
                    section: "Technology",
                    summary: "Volunteers spent nine years building it from scratch.",
                    author: "Leo Fischer",
                    published_at: "2025-05-30T11:05:00Z",
                    url: "http://news.example.test/article/open-source-browser-engine-hits-version-1-0"
                  }
                ]
              }
            },
            {
              title: "All sport stories",
              input: {
                section: "sport",
                max_results: 6
              },
              output: {
                articles: [
                  {
                    slug: "underdogs-reach-cup-final-after-penalty-drama",
                    headline: "Underdogs reach cup final after penalty drama",
                    section: "Sport",
                    summary: "A 19-year-old goalkeeper saved three spot kicks.",
                    author: "Jamie Collins",
                    published_at: "2025-05-31T21:40:00Z",
                    url: "http://news.example.test/article/underdogs-reach-cup-final-after-penalty-drama"
                  },
                  {
                    slug: "marathon-record-falls-in-cool-morning-conditions",
                    headline: "Marathon record falls in cool morning conditions",
                    section: "Sport",
                    summary: "The winner finished 41 seconds inside the old mark.",
                    author: "Jamie Collins",
                    published_at: "2025-05-28T10:10:00Z",
                    url: "http://news.example.test/article/marathon-record-falls-in-cool-morning-conditions"
                  },
                  {
                    slug: "cricket-rain-washes-out-the-opening-day",
                    headline: "Cricket: rain washes out the opening day",
                    section: "Sport",
                    summary: "Not a single ball was bowled at the ground.",
                    author: "Jamie Collins",
                    published_at: "2025-05-25T17:50:00Z",
                    url: "http://news.example.test/article/cricket-rain-washes-out-the-opening-day"
                  },
                  {
                    slug: "tennis-home-favourite-through-to-quarter-finals",
                    headline: "Tennis: home favourite through to quarter-finals",
                    section: "Sport",
                    summary: "She won in straight sets in under an hour.",
                    author: "Jamie Collins",
                    published_at: "2025-05-20T18:30:00Z",
                    url: "http://news.example.test/article/tennis-home-favourite-through-to-quarter-finals"
                  }
                ]
              }
            }
          ],
        },
      ],
    },
    {
      name: 'get_article',
      label: 'Read an article',
      description: 'The full text of one article by its slug, with headline, author, publication time, paragraphs and tags. An unknown slug is not_found.',
      cost_credits: 1,
      default_version: 1,
      labels: ['news', 'article', 'full text'],
      versions: [
        {
          version: 1,
          input_schema: { type: 'object', additionalProperties: false, required: ['slug'], properties: { slug: SLUG } },
          output_schema: {
            type: 'object',
            additionalProperties: false,
            required: ['slug', 'headline', 'section', 'summary', 'author', 'published_at', 'paragraphs', 'tags'],
            properties: {
              slug: SLUG,
              headline: { type: 'string' },
              section: { type: 'string' },
              summary: { type: 'string' },
              author: { type: 'string' },
              published_at: DATETIME,
              paragraphs: { type: 'array', items: { type: 'string' }, minItems: 1 },
              tags: { type: 'array', items: { type: 'string' } },
            },
          },
          recipe: articleRecipe,
          examples: [
            {
              title: "A technology story",
              input: {
                slug: "chipmaker-opens-first-plant-outside-asia"
              },
              output: {
                slug: "chipmaker-opens-first-plant-outside-asia",
                headline: "Chipmaker opens first plant outside Asia",
                section: "Technology",
                summary: "The factory is expected to employ 1,200 people by 2027.",
                author: "Marcus Dell",
                published_at: "2025-06-01T06:30:00Z",
                paragraphs: [
                  "The factory is expected to employ 1,200 people by 2027.",
                  "Marcus Dell reports that the story has been developing for several weeks, with officials and experts offering different views on what should happen next.",
                  "“We have been waiting a long time for this,” one person close to the matter said. “Now the hard work starts.”",
                  "Further details are expected in the coming days. This article will be updated as more information becomes available."
                ],
                tags: [
                  "semiconductors",
                  "manufacturing"
                ]
              }
            },
            {
              title: "A culture story",
              input: {
                slug: "museum-returns-bronze-masks-to-their-makers"
              },
              output: {
                slug: "museum-returns-bronze-masks-to-their-makers",
                headline: "Museum returns bronze masks to their makers",
                section: "Culture",
                summary: "The repatriation follows a six-year review of the collection.",
                author: "Anaïs Moreau",
                published_at: "2025-05-30T16:20:00Z",
                paragraphs: [
                  "The repatriation follows a six-year review of the collection.",
                  "Anaïs Moreau reports that the story has been developing for several weeks, with officials and experts offering different views on what should happen next.",
                  "“We have been waiting a long time for this,” one person close to the matter said. “Now the hard work starts.”",
                  "Further details are expected in the coming days. This article will be updated as more information becomes available."
                ],
                tags: [
                  "museums",
                  "heritage"
                ]
              }
            }
          ],
        },
      ],
    },
  ],
};
