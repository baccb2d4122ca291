// books.example.test — server-rendered bookstore with search, pagination,
// detail pages and categories.
import { Router, esc, html, intParam, type Site, type DemoRequest } from '../lib/http.ts';
import { page, pagination, notFoundPage } from '../lib/layout.ts';
import { books, bookByIsbn, categories, type Book } from '../fixtures/books.ts';

const BRAND = 'Ferrow & Finch Books';
const PER_PAGE = 10;
const CSS = `
.results{list-style:none;padding:0}
.book{display:flex;gap:1rem;background:#fff;border:1px solid #e3e3e3;border-radius:6px;padding:1rem;margin-bottom:.75rem}
.book .cover{width:60px;height:90px;background:#e9dccb;border-radius:3px;flex:none}
.price{font-weight:700;color:#7a3e1d}
.availability.in-stock{color:#2e7d32}.availability.low-stock{color:#e65100}.availability.out-of-stock{color:#b00020}
.rating{color:#f9a825}
dl.product-info{display:grid;grid-template-columns:10rem 1fr;gap:.25rem 1rem}
dl.product-info dt{font-weight:600}
`;
const NAV: Array<[string, string]> = [['/search', 'Browse all'], ...Object.entries(categories).slice(0, 5).map(([s, n]): [string, string] => [`/categories/${s}`, n])];

const fmtPrice = (b: Book) => `£${b.price.toFixed(2)}`;
const stockLabel: Record<Book['stock'], string> = { in_stock: 'In stock', low_stock: 'Only a few left', out_of_stock: 'Out of stock' };
const stars = (n: number) => '★'.repeat(n) + '☆'.repeat(5 - n);
const fmtDate = (d: string) =>
  new Date(`${d}T00:00:00Z`).toLocaleDateString('en-GB', { day: 'numeric', month: 'long', year: 'numeric', timeZone: 'UTC' });

function doc(title: string, body: string, description?: string): string {
  return page({ title: `${title} | ${BRAND}`, brand: BRAND, nav: NAV, css: CSS, body, description });
}

function searchForm(q = ''): string {
  return `<form class="search-form" role="search" action="/search" method="get"><label for="q" class="visually-hidden">Search books</label><input id="q" name="q" type="search" value="${esc(q)}" placeholder="Title, author or ISBN"><button type="submit">Search</button></form>`;
}

function bookItem(b: Book): string {
  const stockClass = b.stock.replace('_', '-');
  return `<li class="book product" data-isbn="${b.isbn13}">
<div class="cover" aria-hidden="true"></div>
<div class="info">
<h3 class="title"><a href="/books/${b.isbn13}">${esc(b.title)}</a></h3>
<p class="authors">by ${b.authors.map((a) => `<span class="author">${esc(a)}</span>`).join(', ')}</p>
<p class="price" data-currency="${b.currency}" data-amount="${b.price.toFixed(2)}">${fmtPrice(b)}</p>
<p class="rating" data-rating="${b.rating}" title="${b.rating} out of 5">${stars(b.rating)}<span class="visually-hidden">${b.rating} out of 5 stars</span></p>
<p class="availability ${stockClass}">${stockLabel[b.stock]}</p>
<p class="published">Published <time datetime="${b.published}">${fmtDate(b.published)}</time></p>
</div>
</li>`;
}

function paged(list: Book[], req: DemoRequest, base: string, extra: Record<string, string>): { body: string; ok: boolean } {
  const total = list.length;
  const pages = Math.max(1, Math.ceil(total / PER_PAGE));
  const p = intParam(req.query.get('page'), 1, 1, 10_000);
  if (p === undefined) return { body: '', ok: false };
  const slice = list.slice((p - 1) * PER_PAGE, p * PER_PAGE);
  const link = (n: number) => `${base}?${new URLSearchParams({ ...extra, page: String(n) })}`;
  const from = total === 0 ? 0 : (p - 1) * PER_PAGE + 1;
  const body = `<p class="result-count" data-total="${total}">${total === 0 ? 'No books found' : `Showing ${from}–${Math.min(p * PER_PAGE, total)} of ${total} books`}</p>
${slice.length ? `<ol class="results" start="${from}">${slice.map(bookItem).join('\n')}</ol>` : total ? '<p class="no-results">This page is empty.</p>' : '<p class="no-results">Try a different search.</p>'}
${pagination(p > 1 ? link(Math.min(p - 1, pages)) : null, p < pages ? link(p + 1) : null, `Page ${p} of ${pages}`)}`;
  return { body, ok: true };
}

function matches(b: Book, q: string): boolean {
  const hay = [b.title, ...b.authors, b.isbn13, b.publisher, ...b.categories.map((c) => categories[c])].join(' ').toLowerCase().normalize('NFKD');
  return q
    .toLowerCase()
    .normalize('NFKD')
    .split(/\s+/)
    .filter(Boolean)
    .every((t) => hay.includes(t.replace(/-/g, '')) || hay.includes(t));
}

const sorters: Record<string, (a: Book, b: Book) => number> = {
  relevance: () => 0,
  price_asc: (a, b) => a.price - b.price,
  price_desc: (a, b) => b.price - a.price,
  newest: (a, b) => b.published.localeCompare(a.published),
  rating: (a, b) => b.rating - a.rating,
};

const notFound = (what: string) => html(404, notFoundPage(BRAND, CSS, what));
const badRequest = (msg: string) => html(400, doc('Bad request', `<h1>Bad request</h1><p class="error">${esc(msg)}</p>`));

const router = new Router(() => notFound('page'))
  .get('/', () => {
    const newest = [...books].sort(sorters.newest).slice(0, 5);
    const top = books.filter((b) => b.rating === 5).slice(0, 5);
    return html(
      200,
      doc(
        'Independent bookshop',
        `<section class="hero"><h1>Welcome to ${BRAND}</h1><p>An independent bookshop with ${books.length} hand-picked titles.</p>${searchForm()}</section>
<section class="new-arrivals"><h2>New arrivals</h2><ol class="results">${newest.map(bookItem).join('\n')}</ol></section>
<section class="staff-picks"><h2>Staff picks</h2><ol class="results">${top.map(bookItem).join('\n')}</ol></section>
<section class="categories"><h2>Shop by category</h2><ul class="category-list">${Object.entries(categories)
          .map(([s, n]) => `<li><a class="category" href="/categories/${s}">${esc(n)}</a></li>`)
          .join('')}</ul></section>`,
        'Independent bookshop: fiction, history, science and more.',
      ),
    );
  })
  .get('/search', (req) => {
    const q = (req.query.get('q') ?? '').trim();
    const sort = req.query.get('sort') ?? 'relevance';
    if (!sorters[sort]) return badRequest(`Unknown sort "${sort}".`);
    const found = books.filter((b) => matches(b, q)).sort(sorters[sort]);
    const extra: Record<string, string> = { q };
    if (sort !== 'relevance') extra.sort = sort;
    const r = paged(found, req, '/search', extra);
    if (!r.ok) return badRequest('Invalid page number.');
    return html(200, doc(q ? `Search results for “${q}”` : 'All books', `<h1>${q ? `Search results for “<span class="query">${esc(q)}</span>”` : 'All books'}</h1>${searchForm(q)}\n${r.body}`));
  })
  .get('/books/:isbn', (req) => {
    const b = bookByIsbn.get(req.params.isbn.replace(/-/g, ''));
    if (!b) return notFound('book');
    const stockClass = b.stock.replace('_', '-');
    return html(
      200,
      doc(
        b.title,
        `<nav class="breadcrumbs" aria-label="Breadcrumb"><a href="/">Home</a> › <a href="/categories/${b.categories[0]}">${esc(categories[b.categories[0]])}</a> › <span>${esc(b.title)}</span></nav>
<article class="book-detail product" itemscope itemtype="https://schema.org/Book" data-isbn="${b.isbn13}">
<h1 class="title" itemprop="name">${esc(b.title)}</h1>
<p class="authors">by ${b.authors.map((a) => `<a class="author" itemprop="author" href="/search?q=${encodeURIComponent(a)}">${esc(a)}</a>`).join(', ')}</p>
<div class="buy-box" itemprop="offers" itemscope itemtype="https://schema.org/Offer">
<p class="price" data-currency="${b.currency}" data-amount="${b.price.toFixed(2)}"><meta itemprop="priceCurrency" content="${b.currency}"><span itemprop="price" content="${b.price.toFixed(2)}">${fmtPrice(b)}</span></p>
<p class="availability ${stockClass}" data-stock="${b.stock}" data-stock-count="${b.stock_count}">${stockLabel[b.stock]}${b.stock === 'low_stock' ? ` (${b.stock_count} left)` : ''}</p>
<button type="button" class="add-to-basket"${b.stock === 'out_of_stock' ? ' disabled' : ''}>Add to basket</button>
</div>
<p class="rating" data-rating="${b.rating}">${stars(b.rating)} <span>${b.rating} out of 5</span></p>
<section class="description" itemprop="description"><h2>About this book</h2><p>${esc(b.description)}</p></section>
<h2>Product details</h2>
<dl class="product-info">
<dt>ISBN-13</dt><dd class="isbn13" itemprop="isbn">${b.isbn13}</dd>
<dt>Publisher</dt><dd class="publisher" itemprop="publisher">${esc(b.publisher)}</dd>
<dt>Published</dt><dd class="published"><time datetime="${b.published}" itemprop="datePublished">${fmtDate(b.published)}</time></dd>
<dt>Pages</dt><dd class="pages" itemprop="numberOfPages">${b.pages}</dd>
<dt>Categories</dt><dd class="categories">${b.categories.map((c) => `<a class="category" href="/categories/${c}" data-slug="${c}">${esc(categories[c])}</a>`).join(', ')}</dd>
</dl>
</article>`,
        b.description,
      ),
    );
  })
  .get('/categories', () =>
    html(
      200,
      doc(
        'Categories',
        `<h1>Categories</h1><ul class="category-list">${Object.entries(categories)
          .map(([s, n]) => `<li><a class="category" href="/categories/${s}">${esc(n)}</a> <span class="count">(${books.filter((b) => b.categories.includes(s)).length})</span></li>`)
          .join('')}</ul>`,
      ),
    ),
  )
  .get('/categories/:slug', (req) => {
    const name = categories[req.params.slug];
    if (!name) return notFound('category');
    const r = paged(
      books.filter((b) => b.categories.includes(req.params.slug)),
      req,
      `/categories/${req.params.slug}`,
      {},
    );
    if (!r.ok) return badRequest('Invalid page number.');
    return html(200, doc(name, `<h1 class="category-title">${esc(name)}</h1>\n${r.body}`));
  });

export const booksSite: Site = { host: 'books.example.test', name: BRAND, handle: router.handle };
