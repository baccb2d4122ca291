// Shared HTML document shell. Each site passes its own brand, nav and CSS.
import { esc } from './http.ts';

export interface PageOpts {
  title: string;
  brand: string;
  nav?: Array<[href: string, label: string]>;
  css?: string;
  head?: string;
  body: string;
  description?: string;
  footer?: string;
}

export function page(o: PageOpts): string {
  const nav = (o.nav ?? []).map(([href, label]) => `<li><a href="${esc(href)}">${esc(label)}</a></li>`).join('');
  return `<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>${esc(o.title)}</title>
${o.description ? `<meta name="description" content="${esc(o.description)}">` : ''}
<link rel="icon" href="/favicon.svg" type="image/svg+xml">
<style>
body{font-family:system-ui,-apple-system,"Segoe UI",Roboto,sans-serif;margin:0;color:#1f2328;background:#fafafa;line-height:1.5}
header.site-header{display:flex;align-items:center;gap:2rem;padding:.75rem 1.5rem;background:#fff;border-bottom:1px solid #ddd}
header.site-header .brand{font-weight:700;font-size:1.25rem;text-decoration:none;color:inherit}
header.site-header nav ul{display:flex;gap:1rem;list-style:none;margin:0;padding:0}
main{max-width:960px;margin:1.5rem auto;padding:0 1.5rem}
footer.site-footer{max-width:960px;margin:3rem auto 1rem;padding:1rem 1.5rem;color:#666;font-size:.85rem;border-top:1px solid #ddd}
.visually-hidden{position:absolute;width:1px;height:1px;overflow:hidden;clip:rect(0 0 0 0)}
.error{color:#b00020;background:#fde7ea;padding:.5rem 1rem;border-radius:4px}
nav.pagination{display:flex;gap:1rem;margin:1.5rem 0}
${o.css ?? ''}
</style>
${o.head ?? ''}
</head>
<body>
<header class="site-header">
<a class="brand" href="/"><img src="/favicon.svg" alt="" width="24" height="24"> ${esc(o.brand)}</a>
<nav aria-label="Main"><ul>${nav}</ul></nav>
</header>
<main id="content">
${o.body}
</main>
<footer class="site-footer">${o.footer ?? `&copy; 2025 ${esc(o.brand)}. A demo site for testing.`}</footer>
</body>
</html>
`;
}

export function pagination(prevHref: string | null, nextHref: string | null, label: string): string {
  if (!prevHref && !nextHref) return '';
  return `<nav class="pagination" aria-label="Pagination">${prevHref ? `<a rel="prev" class="prev" href="${esc(prevHref)}">&larr; Previous</a>` : ''}<span class="page-status">${esc(label)}</span>${nextHref ? `<a rel="next" class="next" href="${esc(nextHref)}">Next &rarr;</a>` : ''}</nav>`;
}

export function notFoundPage(brand: string, css = '', what = 'page'): string {
  return page({
    title: `Not found – ${brand}`,
    brand,
    css,
    body: `<section class="not-found"><h1>404 – Not found</h1><p>Sorry, we couldn't find that ${esc(what)}.</p><p><a href="/">Back to the home page</a></p></section>`,
  });
}
