// jobs.example.test — listings rendered by client-side JavaScript from
// /api/jobs. A plain HTTP fetch of / returns only an empty <ul id="jobs">.
import { Router, esc, html, intParam, json, CACHE_PUBLIC, type Site } from '../lib/http.ts';
import { page } from '../lib/layout.ts';
import { jobs, jobById, locations } from '../fixtures/jobs.ts';

const BRAND = 'Hireway Jobs';
const PER_PAGE = 10;
const CSS = `
#jobs{list-style:none;padding:0}
.job{background:#fff;border:1px solid #e3e3e3;border-radius:6px;padding:1rem;margin-bottom:.75rem}
.job .salary{font-weight:600;color:#2e7d32}
.tags{display:flex;gap:.4rem;list-style:none;padding:0}.tags li{background:#e8f5e9;border-radius:3px;padding:0 .4rem;font-size:.85rem}
#search-form{display:flex;gap:.5rem;margin-bottom:1rem}
`;

// Shared client helpers (no external resources; DOM built with textContent).
const CLIENT_COMMON = `
const fmtMoney = (n) => '£' + n.toLocaleString('en-GB');
const fmtDate = (d) => new Date(d + 'T00:00:00Z').toLocaleDateString('en-GB', { day: 'numeric', month: 'short', year: 'numeric', timeZone: 'UTC' });
const TYPES = { full_time: 'Full-time', part_time: 'Part-time', contract: 'Contract' };
function el(tag, cls, text) { const e = document.createElement(tag); if (cls) e.className = cls; if (text !== undefined) e.textContent = text; return e; }
`;

const LIST_SCRIPT = `${CLIENT_COMMON}
const list = document.getElementById('jobs');
const status = document.getElementById('results-status');
const more = document.getElementById('load-more');
const form = document.getElementById('search-form');
const params = new URLSearchParams(location.search);
document.getElementById('q').value = params.get('q') || '';
document.getElementById('location').value = params.get('location') || '';
let nextPage = null;
function card(j) {
  const li = el('li', 'job');
  li.dataset.jobId = j.id;
  const h = el('h2', 'job-title'); const a = el('a', null, j.title); a.href = '/jobs/' + encodeURIComponent(j.id); h.appendChild(a); li.appendChild(h);
  li.appendChild(el('p', 'company', j.company));
  const loc = el('p', 'location', j.location); loc.dataset.location = j.location_slug; li.appendChild(loc);
  const sal = el('p', 'salary', fmtMoney(j.salary_min) + ' – ' + fmtMoney(j.salary_max) + ' a year');
  sal.dataset.min = j.salary_min; sal.dataset.max = j.salary_max; sal.dataset.currency = j.currency; li.appendChild(sal);
  li.appendChild(el('p', 'employment-type', TYPES[j.employment_type]));
  const p = el('p', 'posted', 'Posted '); const t = el('time', null, fmtDate(j.posted_at)); t.dateTime = j.posted_at; p.appendChild(t); li.appendChild(p);
  return li;
}
async function load(page, append) {
  list.setAttribute('aria-busy', 'true');
  more.disabled = true;
  const q = document.getElementById('q').value.trim();
  const loc = document.getElementById('location').value;
  const qs = new URLSearchParams({ q, location: loc, page: String(page) });
  try {
    const res = await fetch('/api/jobs?' + qs, { headers: { accept: 'application/json' } });
    if (!res.ok) throw new Error('HTTP ' + res.status);
    const data = await res.json();
    if (!append) list.replaceChildren();
    for (const j of data.jobs) list.appendChild(card(j));
    nextPage = data.next_page;
    more.hidden = !nextPage;
    status.textContent = data.total === 0 ? 'No jobs match your search.' : 'Showing ' + list.children.length + ' of ' + data.total + ' jobs';
    status.dataset.total = data.total;
    list.dataset.loaded = 'true';
  } catch (err) {
    status.textContent = 'Could not load jobs. Please try again.';
    status.className = 'error';
    list.dataset.loaded = 'error';
  } finally {
    list.removeAttribute('aria-busy');
    more.disabled = false;
  }
}
form.addEventListener('submit', (e) => {
  e.preventDefault();
  const qs = new URLSearchParams({ q: document.getElementById('q').value.trim(), location: document.getElementById('location').value });
  history.replaceState(null, '', '/?' + qs);
  list.dataset.loaded = 'false';
  load(1, false);
});
more.addEventListener('click', () => { if (nextPage) load(nextPage, true); });
load(Number(params.get('page')) || 1, false);
`;

const DETAIL_SCRIPT = `${CLIENT_COMMON}
const box = document.getElementById('job-detail');
const id = decodeURIComponent(location.pathname.split('/').pop());
fetch('/api/jobs/' + encodeURIComponent(id)).then(async (res) => {
  box.replaceChildren();
  if (res.status === 404) { box.appendChild(el('h1', 'not-found', 'Job not found')); box.dataset.loaded = 'not-found'; return; }
  if (!res.ok) throw new Error('HTTP ' + res.status);
  const j = await res.json();
  box.dataset.jobId = j.id;
  box.appendChild(el('h1', 'job-title', j.title));
  box.appendChild(el('p', 'company', j.company));
  box.appendChild(el('p', 'location', j.location));
  const sal = el('p', 'salary', fmtMoney(j.salary_min) + ' – ' + fmtMoney(j.salary_max) + ' a year');
  sal.dataset.min = j.salary_min; sal.dataset.max = j.salary_max; sal.dataset.currency = j.currency; box.appendChild(sal);
  box.appendChild(el('p', 'employment-type', TYPES[j.employment_type]));
  const p = el('p', 'posted', 'Posted '); const t = el('time', null, fmtDate(j.posted_at)); t.dateTime = j.posted_at; p.appendChild(t); box.appendChild(p);
  const d = el('section', 'description'); d.appendChild(el('h2', null, 'About the role')); d.appendChild(el('p', null, j.description)); box.appendChild(d);
  const r = el('ul', 'requirements'); for (const x of j.requirements) r.appendChild(el('li', null, x)); box.appendChild(el('h2', null, 'What you need')); box.appendChild(r);
  const tags = el('ul', 'tags'); for (const x of j.tags) tags.appendChild(el('li', 'tag', x)); box.appendChild(tags);
  box.dataset.loaded = 'true';
}).catch(() => { box.replaceChildren(el('p', 'error', 'Could not load this job.')); box.dataset.loaded = 'error'; }).finally(() => box.removeAttribute('aria-busy'));
`;

const doc = (title: string, body: string, script: string) =>
  page({ title: `${title} | ${BRAND}`, brand: BRAND, nav: [['/', 'Find jobs']], css: CSS, body: `${body}\n<script>${script}</script>` });

function filter(q: string, loc: string) {
  const terms = q.toLowerCase().split(/\s+/).filter(Boolean);
  return jobs.filter((j) => (!loc || j.location_slug === loc) && terms.every((t) => [j.title, j.company, ...j.tags].join(' ').toLowerCase().includes(t)));
}

const router = new Router(() => html(404, doc('Not found', '<h1 class="not-found">404 – Page not found</h1>', '')))
  .get('/', () =>
    html(
      200,
      doc(
        'Find your next job',
        `<h1>Find your next job</h1>
<form id="search-form" role="search" action="/" method="get">
<label for="q" class="visually-hidden">Keywords</label><input id="q" name="q" type="search" placeholder="Job title, company or skill">
<label for="location" class="visually-hidden">Location</label><select id="location" name="location"><option value="">All locations</option>${Object.entries(locations)
          .map(([s, n]) => `<option value="${s}">${esc(n)}</option>`)
          .join('')}</select>
<button id="search" type="submit">Search</button>
</form>
<p id="results-status" role="status" aria-live="polite">Loading jobs…</p>
<ul id="jobs" class="job-list" aria-busy="true"></ul>
<button id="load-more" class="next" type="button" hidden>Load more jobs</button>
<noscript><p class="error">This site needs JavaScript to show job listings.</p></noscript>`,
        LIST_SCRIPT,
      ),
    ),
  )
  .get('/jobs/:id', () => html(200, doc('Job details', '<p><a href="/">&larr; Back to search</a></p>\n<article id="job-detail" class="job-detail" aria-busy="true"><p>Loading…</p></article>', DETAIL_SCRIPT)))
  .get('/api/jobs', (req) => {
    const q = (req.query.get('q') ?? '').trim();
    const loc = (req.query.get('location') ?? '').trim();
    if (loc && !locations[loc]) return json(400, { error: 'invalid_location', locations: Object.keys(locations) });
    const p = intParam(req.query.get('page'), 1, 1, 10_000);
    if (p === undefined) return json(400, { error: 'invalid_page' });
    const found = filter(q, loc);
    const totalPages = Math.max(1, Math.ceil(found.length / PER_PAGE));
    return json(
      200,
      { jobs: found.slice((p - 1) * PER_PAGE, p * PER_PAGE).map(({ description: _d, requirements: _r, ...j }) => j), page: p, per_page: PER_PAGE, total: found.length, total_pages: totalPages, next_page: p < totalPages ? p + 1 : null },
      { 'cache-control': CACHE_PUBLIC },
    );
  })
  .get('/api/jobs/:id', (req) => {
    const j = jobById.get(req.params.id);
    return j ? json(200, j, { 'cache-control': CACHE_PUBLIC }) : json(404, { error: 'job_not_found' });
  })
  .get('/api/locations', () => json(200, { locations }, { 'cache-control': CACHE_PUBLIC }));

export const jobsSite: Site = { host: 'jobs.example.test', name: BRAND, handle: router.handle };
