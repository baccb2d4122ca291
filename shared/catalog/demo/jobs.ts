// @jobs — Hireway Jobs (jobs.example.test). Listings are rendered by client-side JavaScript, so
// these operations run on the browser engine.
import type { ApiDefinition, JsonSchema } from '../types.ts';
import type { Field, Recipe } from '../../recipes/schema.ts';
import { DATE, site } from './common.ts';

const HOST = 'jobs.example.test';
const LOCATIONS = ['london', 'manchester', 'edinburgh', 'bristol', 'remote'];
const JOB_ID = { type: 'string', pattern: '^J[0-9]{4,6}$', description: 'Job id as shown in the job’s address, e.g. J4101' } as const;

const salaryFields: Record<string, Field> = {
  salary_min: { type: 'integer', selector: '.salary', attribute: 'data-min' },
  salary_max: { type: 'integer', selector: '.salary', attribute: 'data-max' },
  currency: { type: 'attribute', selector: '.salary', attribute: 'data-currency' },
};

const jobCardFields: Record<string, Field> = {
  job_id: { type: 'attribute', attribute: 'data-job-id' },
  title: { type: 'text', selector: '.job-title' },
  company: { type: 'text', selector: '.company' },
  location: { type: 'text', selector: '.location' },
  ...salaryFields,
  employment_type: { type: 'text', selector: '.employment-type' },
  posted: { type: 'date', selector: '.posted time', attribute: 'datetime' },
  url: { type: 'url', selector: '.job-title a' },
};

const searchRecipe: Recipe = {
  engine: 'browser',
  hosts: [HOST],
  steps: [
    { type: 'navigate', name: 'Open the job board', url: `http://${HOST}/` },
    { type: 'wait', name: 'Wait for the first listings', selector: '#jobs[data-loaded="true"]', state: 'attached' },
    { type: 'fill', name: 'Type keywords', selector: '#q', value: '{{input.keywords}}' },
    { type: 'select', name: 'Choose a location', selector: '#location', value: '{{input.location}}' },
    { type: 'click', name: 'Search', selector: '#search' },
    { type: 'wait', name: 'Wait for the results', selector: '#jobs[data-loaded="true"]:not([aria-busy])', state: 'attached' },
    { type: 'fail', when: { selector_present: '#results-status.error' }, code: 'upstream_http_error', message: 'The job board could not load its listings' },
    { type: 'extract', fields: { total: { type: 'integer', selector: '#results-status', attribute: 'data-total', default: 0 } }, save_as: 'summary' },
    {
      type: 'paginate',
      name: 'Load more jobs',
      limit: '{{input.max_results}}',
      default_limit: 10,
      max_pages: 5,
      collect: 'page.jobs',
      save_as: 'jobs',
      cumulative: true,
      stop: { selector_present: '#load-more[hidden]' },
      next: { kind: 'link', selector: '#load-more:not([hidden])', wait_for: '#jobs:not([aria-busy])' },
      steps: [{ type: 'extract', fields: { jobs: { type: 'list', selector: '#jobs > li.job', fields: jobCardFields } }, save_as: 'page' }],
    },
  ],
  output: { total_results: '{{vars.summary.total}}', returned: '{{vars.jobs.length}}', jobs: '{{vars.jobs}}' },
};

const getJobRecipe: Recipe = {
  engine: 'browser',
  hosts: [HOST],
  steps: [
    { type: 'navigate', name: 'Open the job', url: `http://${HOST}/jobs/{{input.job_id}}`, not_found_status: [404] },
    { type: 'wait', name: 'Wait for the job to load', selector: '#job-detail[data-loaded]', state: 'attached' },
    { type: 'not_found', when: { selector_present: '#job-detail[data-loaded="not-found"]' }, message: 'No job with that id' },
    { type: 'fail', when: { selector_present: '#job-detail[data-loaded="error"]' }, code: 'upstream_http_error', message: 'The job board could not load the job' },
    {
      type: 'extract',
      scope: '#job-detail',
      fields: {
        job_id: { type: 'attribute', attribute: 'data-job-id' },
        title: { type: 'text', selector: 'h1.job-title' },
        company: { type: 'text', selector: '.company' },
        location: { type: 'text', selector: '.location' },
        ...salaryFields,
        employment_type: { type: 'text', selector: '.employment-type' },
        posted: { type: 'date', selector: '.posted time', attribute: 'datetime' },
        description: { type: 'text', selector: '.description p' },
        requirements: { type: 'list', selector: 'ul.requirements > li', item: { type: 'text' } },
        tags: { type: 'list', selector: 'ul.tags > li.tag', item: { type: 'text' } },
      },
      save_as: 'job',
    },
  ],
  output: '{{vars.job}}',
};

const jobProps = {
  job_id: JOB_ID,
  title: { type: 'string' },
  company: { type: 'string' },
  location: { type: 'string' },
  salary_min: { type: 'integer', minimum: 0, description: 'Yearly salary, lower bound' },
  salary_max: { type: 'integer', minimum: 0, description: 'Yearly salary, upper bound' },
  currency: { type: 'string', pattern: '^[A-Z]{3}$' },
  employment_type: { type: 'string', enum: ['Full-time', 'Part-time', 'Contract'] },
  posted: DATE,
};

const jobCardSchema: JsonSchema = {
  type: 'object',
  additionalProperties: false,
  required: [...Object.keys(jobProps), 'url'],
  properties: { ...jobProps, url: { type: 'string', format: 'uri' } },
};

export const jobsApi: ApiDefinition = {
  handle: '@jobs',
  name: 'Hireway Jobs',
  description: 'Search job listings on the Hireway job board by keyword and location, and read a job’s full description, salary and requirements.',
  category: 'jobs',
  website_url: `http://${HOST}/`,
  sites: [site('Hireway Jobs', HOST)],
  operations: [
    {
      name: 'search_jobs',
      label: 'Search jobs',
      description:
        'Searches the Hireway job board (rendered in the browser) by keywords in the title, company or skills and an optional location, loading more listings until max_results. Returns salary range, employment type and posting date.',
      cost_credits: 1,
      default_version: 1,
      labels: ['jobs', 'vacancies', 'hiring', 'salary', 'careers', 'search'],
      versions: [
        {
          version: 1,
          input_schema: {
            type: 'object',
            additionalProperties: false,
            properties: {
              keywords: { type: 'string', maxLength: 100, description: 'Words that must appear in the title, company or skills; empty for all jobs' },
              location: { type: 'string', enum: LOCATIONS, description: 'Only jobs in this location' },
              max_results: { type: 'integer', minimum: 1, maximum: 30, default: 10 },
            },
          },
          output_schema: {
            type: 'object',
            additionalProperties: false,
            required: ['total_results', 'returned', 'jobs'],
            properties: {
              total_results: { type: 'integer', minimum: 0 },
              returned: { type: 'integer', minimum: 0 },
              jobs: { type: 'array', items: jobCardSchema },
            },
          },
          recipe: searchRecipe,
          examples: [
            {
              title: "Engineering jobs, loading more listings",
              input: {
                keywords: "engineer",
                max_results: 12
              },
              output: {
                total_results: 19,
                returned: 12,
                jobs: [
                  {
                    job_id: "J4101",
                    title: "Senior Backend Engineer",
                    company: "Ledgerly",
                    location: "London",
                    salary_min: 75000,
                    salary_max: 95000,
                    currency: "GBP",
                    employment_type: "Full-time",
                    posted: "2025-05-30",
                    url: "http://jobs.example.test/jobs/J4101"
                  },
                  {
                    job_id: "J4115",
                    title: "Data Engineer",
                    company: "Tidewater Analytics",
                    location: "Bristol",
                    salary_min: 55000,
                    salary_max: 70000,
                    currency: "GBP",
                    employment_type: "Full-time",
                    posted: "2025-05-29",
                    url: "http://jobs.example.test/jobs/J4115"
                  },
                  {
                    job_id: "J4122",
                    title: "Site Reliability Engineer",
                    company: "Northwind Cloud",
                    location: "Remote (UK)",
                    salary_min: 70000,
                    salary_max: 90000,
                    currency: "GBP",
                    employment_type: "Full-time",
                    posted: "2025-05-28",
                    url: "http://jobs.example.test/jobs/J4122"
                  },
                  {
                    job_id: "J4136",
                    title: "Engineering Manager",
                    company: "Ledgerly",
                    location: "London",
                    salary_min: 95000,
                    salary_max: 120000,
                    currency: "GBP",
                    employment_type: "Full-time",
                    posted: "2025-05-27",
                    url: "http://jobs.example.test/jobs/J4136"
                  },
                  {
                    job_id: "J4143",
                    title: "QA Automation Engineer",
                    company: "Skyline Weather",
                    location: "Edinburgh",
                    salary_min: 45000,
                    salary_max: 60000,
                    currency: "GBP",
                    employment_type: "Contract",
                    posted: "2025-05-27",
                    url: "http://jobs.example.test/jobs/J4143"
                  },
                  {
                    job_id: "J4150",
                    title: "Machine Learning Engineer",
                    company: "Tidewater Analytics",
                    location: "Remote (UK)",
                    salary_min: 80000,
                    salary_max: 105000,
                    currency: "GBP",
                    employment_type: "Full-time",
                    posted: "2025-05-26",
                    url: "http://jobs.example.test/jobs/J4150"
                  },
                  {
                    job_id: "J4157",
                    title: "Junior Software Engineer",
                    company: "Pinecone Health",
                    location: "Manchester",
                    salary_min: 30000,
                    salary_max: 38000,
                    currency: "GBP",
                    employment_type: "Full-time",
                    posted: "2025-05-26",
                    url: "http://jobs.example.test/jobs/J4157"
                  },
                  {
                    job_id: "J4164",
                    title: "DevOps Engineer",
                    company: "Harbourline Logistics",
                    location: "Bristol",
                    salary_min: 60000,
                    salary_max: 75000,
                    currency: "GBP",
                    employment_type: "Full-time",
                    posted: "2025-05-25",
                    url: "http://jobs.example.test/jobs/J4164"
                  },
                  {
                    job_id: "J4178",
                    title: "Security Engineer",
                    company: "Ledgerly",
                    location: "London",
                    salary_min: 85000,
                    salary_max: 110000,
                    currency: "GBP",
                    employment_type: "Full-time",
                    posted: "2025-05-23",
                    url: "http://jobs.example.test/jobs/J4178"
                  },
                  {
                    job_id: "J4199",
                    title: "Full Stack Engineer",
                    company: "Skyline Weather",
                    location: "Remote (UK)",
                    salary_min: 60000,
                    salary_max: 80000,
                    currency: "GBP",
                    employment_type: "Full-time",
                    posted: "2025-05-21",
                    url: "http://jobs.example.test/jobs/J4199"
                  },
                  {
                    job_id: "J4206",
                    title: "Platform Engineer",
                    company: "Tidewater Analytics",
                    location: "London",
                    salary_min: 75000,
                    salary_max: 92000,
                    currency: "GBP",
                    employment_type: "Full-time",
                    posted: "2025-05-20",
                    url: "http://jobs.example.test/jobs/J4206"
                  },
                  {
                    job_id: "J4213",
                    title: "Customer Support Engineer",
                    company: "Northwind Cloud",
                    location: "Edinburgh",
                    salary_min: 32000,
                    salary_max: 40000,
                    currency: "GBP",
                    employment_type: "Full-time",
                    posted: "2025-05-19",
                    url: "http://jobs.example.test/jobs/J4213"
                  }
                ]
              }
            },
            {
              title: "TypeScript jobs in London",
              input: {
                keywords: "typescript",
                location: "london"
              },
              output: {
                total_results: 1,
                returned: 1,
                jobs: [
                  {
                    job_id: "J4101",
                    title: "Senior Backend Engineer",
                    company: "Ledgerly",
                    location: "London",
                    salary_min: 75000,
                    salary_max: 95000,
                    currency: "GBP",
                    employment_type: "Full-time",
                    posted: "2025-05-30",
                    url: "http://jobs.example.test/jobs/J4101"
                  }
                ]
              }
            }
          ],
        },
      ],
    },
    {
      name: 'get_job',
      label: 'Get a job',
      description: 'Reads one job on the Hireway job board by its id: title, company, location, salary range, employment type, description, requirements and skill tags. An unknown id is not_found.',
      cost_credits: 1,
      default_version: 1,
      labels: ['jobs', 'job description', 'salary', 'requirements'],
      versions: [
        {
          version: 1,
          input_schema: { type: 'object', additionalProperties: false, required: ['job_id'], properties: { job_id: JOB_ID } },
          output_schema: {
            type: 'object',
            additionalProperties: false,
            required: [...Object.keys(jobProps), 'description', 'requirements', 'tags'],
            properties: {
              ...jobProps,
              description: { type: 'string' },
              requirements: { type: 'array', items: { type: 'string' } },
              tags: { type: 'array', items: { type: 'string' } },
            },
          },
          recipe: getJobRecipe,
          examples: [
            {
              title: "A senior backend role",
              input: {
                job_id: "J4101"
              },
              output: {
                job_id: "J4101",
                title: "Senior Backend Engineer",
                company: "Ledgerly",
                location: "London",
                salary_min: 75000,
                salary_max: 95000,
                currency: "GBP",
                employment_type: "Full-time",
                posted: "2025-05-30",
                description: "Ledgerly is hiring a Senior Backend Engineer to join a small, friendly team in London. You will ship features end to end and help shape how we work.",
                requirements: [
                  "Experience with typescript and node",
                  "Clear written communication",
                  "Curiosity and a habit of writing tests"
                ],
                tags: [
                  "typescript",
                  "node",
                  "postgres"
                ]
              }
            },
            {
              title: "A part-time role",
              input: {
                job_id: "J4171"
              },
              output: {
                job_id: "J4171",
                title: "Technical Writer",
                company: "Northwind Cloud",
                location: "Remote (UK)",
                salary_min: 28000,
                salary_max: 35000,
                currency: "GBP",
                employment_type: "Part-time",
                posted: "2025-05-24",
                description: "Northwind Cloud is hiring a Technical Writer to join a small, friendly team working remotely across the UK. You will ship features end to end and help shape how we work.",
                requirements: [
                  "Experience with docs and api",
                  "Clear written communication",
                  "Curiosity and a habit of writing tests"
                ],
                tags: [
                  "docs",
                  "api"
                ]
              }
            }
          ],
        },
      ],
    },
  ],
};
