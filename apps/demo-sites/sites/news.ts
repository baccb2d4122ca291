// news.example.test — server-rendered news site with paginated front page
// and sections (rel=next), and article pages.
import { Router, esc, html, intParam, type DemoRequest, type Site } from '../lib/http.ts';
import { page, pagination, notFoundPage } from '../lib/layout.ts';
import { articles, articleBySlug, sections, type Article } from '../fixtures/news.ts';

const BRAND = 'The Daily Meridian';
const CSS = `
.articles{list-style:none;padding:0}
.article-summary{border-bottom:1px solid #ddd;padding:.75rem 0}
.article-summary h2{margin:.2rem 0;font-family:Georgia,serif}
article.article h1{font-family:Georgia,serif;font-size:2rem}
.byline,.meta{color:#555;font-size:.9rem}
.tags{display:flex;gap:.5rem;list-style:none;padding:0}
.section-label{text-transform:uppercase;font-size:.75rem;letter-spacing:.05em;color:#b71c1c}
`;
const FRONT_PER_PAGE = 8;
const SECTION_PER_PAGE = 5;
const sorted = [...articles].sort((a, b) => b.published_at.localeCompare(a.published_at));
const fmtTime = (iso: string) => new Date(iso).toLocaleString('en-GB', { day: 'numeric', month: 'long', year: 'numeric', hour: '2-digit', minute: '2-digit', timeZone: 'UTC' }) + ' UTC';
const doc = (title: string, body: string, description?: string) =>
  page({ title: `${title} | ${BRAND}`, brand: BRAND, nav: Object.entries(sections).map(([s, n]): [string, string] => [`/section/${s}`, n]), css: CSS, body, description });

function summary(a: Article): string {
  return `<li class="article-summary" data-slug="${a.slug}"><article>
<a class="section-label" href="/section/${a.section}">${esc(sections[a.section])}</a>
<h2 class="headline"><a href="/article/${a.slug}">${esc(a.headline)}</a></h2>
<p class="standfirst">${esc(a.summary)}</p>
<p class="meta">By <span class="author">${esc(a.author)}</span> · <time datetime="${a.published_at}">${fmtTime(a.published_at)}</time></p>
</article></li>`;
}

function listing(req: DemoRequest, list: Article[], perPage: number, base: string): string | undefined {
  const pages = Math.max(1, Math.ceil(list.length / perPage));
  const p = intParam(req.query.get('page'), 1, 1, pages);
  if (p === undefined) return undefined;
  const slice = list.slice((p - 1) * perPage, p * perPage);
  return `<ol class="articles">${slice.map(summary).join('\n')}</ol>
${pagination(p > 1 ? `${base}?page=${p - 1}` : null, p < pages ? `${base}?page=${p + 1}` : null, `Page ${p} of ${pages}`)}`;
}

const notFound = (what: string) => html(404, notFoundPage(BRAND, CSS, what));

const router = new Router(() => notFound('page'))
  .get('/', (req) => {
    const body = listing(req, sorted, FRONT_PER_PAGE, '/');
    if (!body) return notFound('page');
    return html(200, doc('Latest news', `<h1 class="visually-hidden">Latest news</h1><section class="front-page">${body}</section>`, 'Independent news from The Daily Meridian.'));
  })
  .get('/section/:slug', (req) => {
    const name = sections[req.params.slug];
    if (!name) return notFound('section');
    const body = listing(req, sorted.filter((a) => a.section === req.params.slug), SECTION_PER_PAGE, `/section/${req.params.slug}`);
    if (!body) return notFound('page');
    return html(200, doc(name, `<h1 class="section-title">${esc(name)}</h1>${body}`));
  })
  .get('/tag/:tag', (req) => {
    const list = sorted.filter((a) => a.tags.includes(req.params.tag));
    if (!list.length) return notFound('tag');
    const body = listing(req, list, SECTION_PER_PAGE, `/tag/${encodeURIComponent(req.params.tag)}`);
    if (!body) return notFound('page');
    return html(200, doc(`Tagged ${req.params.tag}`, `<h1 class="tag-title">Tagged “${esc(req.params.tag)}”</h1>${body}`));
  })
  .get('/author/:name', (req) => {
    const list = sorted.filter((a) => a.author === req.params.name);
    if (!list.length) return notFound('author');
    const body = listing(req, list, SECTION_PER_PAGE, `/author/${encodeURIComponent(req.params.name)}`);
    if (!body) return notFound('page');
    return html(200, doc(req.params.name, `<h1 class="author-name">${esc(req.params.name)}</h1>${body}`));
  })
  .get('/article/:slug', (req) => {
    const a = articleBySlug.get(req.params.slug);
    if (!a) return notFound('article');
    const related = sorted.filter((x) => x.section === a.section && x.slug !== a.slug).slice(0, 3);
    return html(
      200,
      doc(
        a.headline,
        `<article class="article" data-slug="${a.slug}" itemscope itemtype="https://schema.org/NewsArticle">
<a class="section-label" href="/section/${a.section}">${esc(sections[a.section])}</a>
<h1 class="headline" itemprop="headline">${esc(a.headline)}</h1>
<p class="standfirst">${esc(a.summary)}</p>
<p class="byline">By <a class="author" rel="author" itemprop="author" href="/author/${encodeURIComponent(a.author)}">${esc(a.author)}</a> · <time class="published" datetime="${a.published_at}" itemprop="datePublished">${fmtTime(a.published_at)}</time></p>
<div class="article-body" itemprop="articleBody">
${a.body.map((p) => `<p>${esc(p)}</p>`).join('\n')}
</div>
<footer><h2 class="visually-hidden">Tags</h2><ul class="tags">${a.tags.map((t) => `<li><a class="tag" rel="tag" href="/tag/${t}">${esc(t)}</a></li>`).join('')}</ul></footer>
</article>
<aside class="related"><h2>More in ${esc(sections[a.section])}</h2><ul>${related.map((r) => `<li><a href="/article/${r.slug}">${esc(r.headline)}</a></li>`).join('')}</ul></aside>`,
        a.summary,
      ),
    );
  });

export const newsSite: Site = { host: 'news.example.test', name: BRAND, handle: router.handle };
