// shop.example.test — login-protected shop with an order action that is
// idempotent by client reference, plus a bearer-token JSON API.
import { randomBytes } from 'node:crypto';
import { Router, bodyFields, esc, html, json, redirect, NO_STORE, type DemoRequest, type Reply, type Site } from '../lib/http.ts';
import { page, notFoundPage } from '../lib/layout.ts';

const BRAND = 'Northwind Outfitters';
const CSS = `
.products{display:grid;grid-template-columns:repeat(auto-fill,minmax(200px,1fr));gap:1rem;list-style:none;padding:0}
.product-card{background:#fff;border:1px solid #e3e3e3;border-radius:6px;padding:1rem}
.price,.total{font-weight:700;color:#6a1b9a}
table.orders{border-collapse:collapse;width:100%}table.orders th,table.orders td{border-bottom:1px solid #ddd;padding:.4rem;text-align:left}
.confirmation{background:#e8f5e9;border:1px solid #a5d6a7;border-radius:6px;padding:1rem 1.5rem}
.notice{background:#fff8e1;padding:.5rem 1rem;border-radius:4px}
form.stacked label{display:block;margin-top:.75rem}
`;

interface Product { sku: string; name: string; price: number; description: string; in_stock: boolean }
const products: Product[] = [
  { sku: 'NW-TENT-2P', name: 'Ridgeline 2-Person Tent', price: 189.0, description: 'Freestanding three-season tent, 2.1 kg packed.', in_stock: true },
  { sku: 'NW-BOOT-M42', name: 'Trailhead Hiking Boots (EU 42)', price: 129.5, description: 'Waterproof leather boots with Vibram soles.', in_stock: true },
  { sku: 'NW-MUG-STL', name: 'Camp Steel Mug', price: 14.99, description: 'Double-wall stainless steel, 350 ml.', in_stock: true },
  { sku: 'NW-LAMP-300', name: 'Lumen 300 Headlamp', price: 34.95, description: '300 lumens, USB-C rechargeable, red night mode.', in_stock: true },
  { sku: 'NW-BAG-28L', name: 'Summit 28L Daypack', price: 74.0, description: 'Ventilated back panel, hydration sleeve, rain cover.', in_stock: true },
  { sku: 'NW-SOCK-3PK', name: 'Merino Hiking Socks (3 pack)', price: 24.99, description: 'Cushioned merino blend, sizes M–L.', in_stock: true },
  { sku: 'NW-STOVE-MINI', name: 'Pocket Gas Stove', price: 39.0, description: 'Folding canister stove, boils 1 L in 3.5 min.', in_stock: false },
  { sku: 'NW-BOTTLE-1L', name: 'Trail Bottle 1 L', price: 19.5, description: 'BPA-free, leakproof lid.', in_stock: true },
];
const productBySku = new Map(products.map((p) => [p.sku, p]));

export const SHOP_USERS = [
  { email: 'demo@shop.example.test', password: 'correct-horse', name: 'Dana Demo' },
  { email: 'alice@shop.example.test', password: 'wonderland-42', name: 'Alice Liddell' },
];

interface Order { order_id: string; email: string; sku: string; product_name: string; quantity: number; unit_price: number; total: number; currency: 'USD'; reference: string | null; status: string; created_at: string }

const seedOrders: Order[] = [
  { order_id: 'ORD-100001', email: SHOP_USERS[0].email, sku: 'NW-MUG-STL', product_name: 'Camp Steel Mug', quantity: 2, unit_price: 14.99, total: 29.98, currency: 'USD', reference: null, status: 'delivered', created_at: '2025-03-14T10:22:00Z' },
  { order_id: 'ORD-100002', email: SHOP_USERS[0].email, sku: 'NW-LAMP-300', product_name: 'Lumen 300 Headlamp', quantity: 1, unit_price: 34.95, total: 34.95, currency: 'USD', reference: null, status: 'shipped', created_at: '2025-05-02T16:05:00Z' },
];

/** Each server instance gets its own orders and sessions. */
export function createShopSite(): Site {
  let orders: Order[] = [];
  let created = 0;
  let sessions = new Map<string, string>(); // cookie sid -> email
  let tokens = new Map<string, string>(); // bearer token -> email
  let expiredTokens = new Set<string>();
  let expiredSids = new Set<string>();

  function reset(): void {
    orders = seedOrders.map((o) => ({ ...o }));
    created = 0;
    sessions = new Map();
    tokens = new Map();
    expiredTokens = new Set();
    expiredSids = new Set();
  }
  reset();

  const money = (n: number) => `$${n.toFixed(2)}`;
  const userByEmail = (e: string) => SHOP_USERS.find((u) => u.email === e.trim().toLowerCase());
  const NAV: Array<[string, string]> = [['/', 'Shop'], ['/account', 'My account'], ['/account/orders', 'Orders']];
  const doc = (title: string, body: string) => page({ title: `${title} | ${BRAND}`, brand: BRAND, nav: NAV, css: CSS, body });
  const priv = (status: number, body: string, headers: Record<string, string | string[]> = {}) => html(status, body, { 'cache-control': NO_STORE, ...headers });
  const REF_RE = /^[A-Za-z0-9._:-]{1,64}$/;

  function sessionUser(req: DemoRequest): string | undefined {
    return sessions.get(req.cookies.sid ?? '');
  }
  function bearerUser(req: DemoRequest): { email?: string; error?: string } {
    const auth = String(req.headers.authorization ?? '');
    const m = /^Bearer\s+(\S+)$/i.exec(auth);
    if (!m) {
      const s = sessionUser(req);
      return s ? { email: s } : { error: 'missing_token' };
    }
    const email = tokens.get(m[1]);
    if (email) return { email };
    return { error: expiredTokens.has(m[1]) ? 'token_expired' : 'invalid_token' };
  }
  function requireLogin(req: DemoRequest, next: string): Reply | undefined {
    if (sessionUser(req)) return undefined;
    const expired = expiredSids.has(req.cookies.sid ?? '');
    return redirect(req.method === 'GET' || req.method === 'HEAD' ? 302 : 303, `/login?next=${encodeURIComponent(next)}${expired ? '&expired=1' : ''}`);
  }

  function loginPage(status: number, opts: { error?: string; email?: string; next?: string; notice?: string }): Reply {
    return priv(
      status,
      doc(
        'Sign in',
        `<h1>Sign in to your account</h1>
  ${opts.notice ? `<p class="notice" role="status">${esc(opts.notice)}</p>` : ''}${opts.error ? `<p class="error" role="alert">${esc(opts.error)}</p>` : ''}
  <form id="login-form" class="stacked" method="post" action="/login">
  <input type="hidden" name="next" value="${esc(opts.next ?? '/account')}">
  <label for="email">Email address</label><input id="email" name="email" type="email" autocomplete="username" required value="${esc(opts.email ?? '')}">
  <label for="password">Password</label><input id="password" name="password" type="password" autocomplete="current-password" required>
  <p><button id="sign-in" type="submit">Sign in</button></p>
  </form>`,
      ),
    );
  }

  type CreateResult = { order: Order; replayed: boolean } | { error: string; status: number; message: string };
  function createOrder(email: string, f: Record<string, string>): CreateResult {
    const p = productBySku.get((f.sku ?? '').trim());
    if (!p) return { error: 'unknown_sku', status: 404, message: `No product with SKU "${f.sku ?? ''}".` };
    const ref = (f.reference ?? '').trim() || null;
    if (ref !== null && !REF_RE.test(ref)) return { error: 'invalid_reference', status: 400, message: 'Reference must be 1–64 characters of letters, digits, . _ : -' };
    if (ref !== null) {
      const existing = orders.find((o) => o.email === email && o.reference === ref);
      if (existing) return { order: existing, replayed: true };
    }
    const q = (f.quantity ?? '1').trim();
    if (!/^\d+$/.test(q) || Number(q) < 1 || Number(q) > 10) return { error: 'invalid_quantity', status: 400, message: 'Quantity must be between 1 and 10.' };
    if (!p.in_stock) return { error: 'out_of_stock', status: 409, message: `${p.name} is out of stock.` };
    const quantity = Number(q);
    created++;
    const order: Order = {
      order_id: `ORD-${100100 + created}`,
      email,
      sku: p.sku,
      product_name: p.name,
      quantity,
      unit_price: p.price,
      total: Math.round(p.price * quantity * 100) / 100,
      currency: 'USD',
      reference: ref,
      status: 'confirmed',
      created_at: new Date().toISOString(),
    };
    orders.push(order);
    return { order, replayed: false };
  }

  const publicOrder = ({ email: _e, ...o }: Order) => o;

  function confirmation(o: Order): Reply {
    return priv(
      200,
      doc(
        `Order ${o.order_id} confirmed`,
        `<section class="confirmation" data-order-id="${o.order_id}" role="status">
  <h1>Thank you! Your order is confirmed.</h1>
  <dl class="order-summary">
  <dt>Order number</dt><dd class="order-id">${o.order_id}</dd>
  <dt>Item</dt><dd class="product-name">${esc(o.product_name)}</dd>
  <dt>SKU</dt><dd class="sku">${esc(o.sku)}</dd>
  <dt>Quantity</dt><dd class="quantity">${o.quantity}</dd>
  <dt>Total</dt><dd class="total" data-amount="${o.total.toFixed(2)}" data-currency="${o.currency}">${money(o.total)}</dd>
  <dt>Reference</dt><dd class="reference">${esc(o.reference ?? '')}</dd>
  <dt>Status</dt><dd class="status">${esc(o.status)}</dd>
  <dt>Placed</dt><dd><time class="placed-at" datetime="${o.created_at}">${o.created_at.slice(0, 16).replace('T', ' ')} UTC</time></dd>
  </dl>
  <p><a href="/account/orders">View all orders</a></p>
  </section>`,
      ),
    );
  }

  function productPage(req: DemoRequest, p: Product, status = 200, error?: string): Reply {
    const user = sessionUser(req);
    const ref = req.query.get('reference') ?? '';
    const qty = req.query.get('quantity') ?? '1';
    const form = !user
      ? `<p class="sign-in-prompt"><a class="sign-in" href="/login?next=${encodeURIComponent(`/products/${p.sku}`)}">Sign in to order</a></p>`
      : !p.in_stock
        ? '<p class="availability out-of-stock">Out of stock</p>'
        : `<form id="order-form" class="stacked" method="post" action="/orders">
  <input type="hidden" name="sku" value="${esc(p.sku)}">
  <input type="hidden" id="reference" name="reference" value="${esc(ref)}">
  <label for="quantity">Quantity</label><input id="quantity" name="quantity" type="number" min="1" max="10" value="${esc(qty)}" required>
  <p><button id="place-order" type="submit">Place order</button></p>
  </form>`;
    return priv(
      status,
      doc(
        p.name,
        `<article class="product" data-sku="${p.sku}">
  <h1 class="product-name">${esc(p.name)}</h1>
  <p class="sku">SKU: <span>${p.sku}</span></p>
  <p class="price" data-amount="${p.price.toFixed(2)}" data-currency="USD">${money(p.price)}</p>
  <p class="description">${esc(p.description)}</p>
  <p class="availability ${p.in_stock ? 'in-stock' : 'out-of-stock'}">${p.in_stock ? 'In stock' : 'Out of stock'}</p>
  ${error ? `<p class="error" role="alert">${esc(error)}</p>` : ''}${form}
  </article>`,
      ),
    );
  }

  const notFound = (what: string) => priv(404, notFoundPage(BRAND, CSS, what));
  const apiAuthError = (error: string) => json(401, { error, message: 'Sign in with POST /api/session and send Authorization: Bearer <token>.' }, { 'www-authenticate': `Bearer error="${error === 'missing_token' ? 'invalid_request' : 'invalid_token'}"` });

  const router = new Router(() => notFound('page'))
    .get('/', () =>
      html(
        200,
        doc(
          'Outdoor gear',
          `<h1>Outdoor gear for every trail</h1><ul class="products">${products
            .map(
              (p) =>
                `<li class="product-card" data-sku="${p.sku}"><h2 class="product-name"><a href="/products/${p.sku}">${esc(p.name)}</a></h2><p class="price" data-amount="${p.price.toFixed(2)}" data-currency="USD">${money(p.price)}</p><p class="availability ${p.in_stock ? 'in-stock' : 'out-of-stock'}">${p.in_stock ? 'In stock' : 'Out of stock'}</p></li>`,
            )
            .join('')}</ul>`,
        ),
      ),
    )
    .get('/products/:sku', (req) => {
      const p = productBySku.get(req.params.sku);
      return p ? productPage(req, p) : notFound('product');
    })
    .get('/login', (req) => {
      const next = req.query.get('next') ?? '/account';
      return loginPage(200, { next, notice: req.query.get('expired') ? 'Your session has expired. Please sign in again.' : undefined });
    })
    .post('/login', (req) => {
      const f = bodyFields(req);
      const next = f.next && f.next.startsWith('/') && !f.next.startsWith('//') ? f.next : '/account';
      const u = userByEmail(f.email ?? '');
      if (!u || u.password !== f.password) return loginPage(401, { error: 'Incorrect email address or password.', email: f.email, next });
      const sid = randomBytes(18).toString('base64url');
      sessions.set(sid, u.email);
      return redirect(303, next, { 'set-cookie': `sid=${sid}; Path=/; HttpOnly; SameSite=Lax` });
    })
    .post('/logout', (req) => {
      sessions.delete(req.cookies.sid ?? '');
      return redirect(303, '/', { 'set-cookie': 'sid=; Path=/; HttpOnly; SameSite=Lax; Max-Age=0' });
    })
    .get('/account', (req) => {
      const deny = requireLogin(req, '/account');
      if (deny) return deny;
      const u = userByEmail(sessionUser(req)!)!;
      const n = orders.filter((o) => o.email === u.email).length;
      return priv(200, doc('My account', `<h1>My account</h1><section class="account" data-email="${esc(u.email)}"><p class="welcome">Welcome back, <span class="name">${esc(u.name)}</span></p><p class="email">${esc(u.email)}</p><p><a href="/account/orders">Your orders</a> (<span class="order-count">${n}</span>)</p><form method="post" action="/logout"><button id="sign-out" type="submit">Sign out</button></form></section>`));
    })
    .get('/account/orders', (req) => {
      const deny = requireLogin(req, '/account/orders');
      if (deny) return deny;
      const mine = orders.filter((o) => o.email === sessionUser(req)).slice().reverse();
      const rows = mine
        .map((o) => `<tr class="order" data-order-id="${o.order_id}"><td class="order-id"><a href="/orders/${o.order_id}/confirmation">${o.order_id}</a></td><td><time class="order-date" datetime="${o.created_at}">${o.created_at.slice(0, 10)}</time></td><td class="product-name">${esc(o.product_name)}</td><td class="sku">${o.sku}</td><td class="quantity">${o.quantity}</td><td class="total" data-amount="${o.total.toFixed(2)}">${money(o.total)}</td><td class="status">${esc(o.status)}</td><td class="reference">${esc(o.reference ?? '')}</td></tr>`)
        .join('\n');
      return priv(200, doc('Your orders', `<h1>Your orders</h1>${mine.length ? `<table class="orders"><thead><tr><th>Order</th><th>Date</th><th>Item</th><th>SKU</th><th>Qty</th><th>Total</th><th>Status</th><th>Reference</th></tr></thead><tbody>\n${rows}\n</tbody></table>` : '<p class="empty">You have no orders yet.</p>'}`));
    })
    .post('/orders', (req) => {
      const f = bodyFields(req);
      const deny = requireLogin(req, f.sku ? `/products/${f.sku}` : '/');
      if (deny) return deny;
      const r = createOrder(sessionUser(req)!, f);
      if ('error' in r) {
        const p = productBySku.get(f.sku ?? '');
        return p ? productPage(req, p, r.status, r.message) : notFound('product');
      }
      return redirect(303, `/orders/${r.order.order_id}/confirmation`);
    })
    .get('/orders/by-reference/:reference', (req) => {
      const deny = requireLogin(req, req.path);
      if (deny) return deny;
      const o = orders.find((x) => x.email === sessionUser(req) && x.reference === req.params.reference);
      return o ? confirmation(o) : notFound('order');
    })
    .get('/orders/:id/confirmation', (req) => {
      const deny = requireLogin(req, req.path);
      if (deny) return deny;
      const o = orders.find((x) => x.email === sessionUser(req) && x.order_id === req.params.id);
      return o ? confirmation(o) : notFound('order');
    })
    // ---- JSON API ----
    .get('/api/products', () => json(200, { products }))
    .post('/api/session', (req) => {
      const f = bodyFields(req);
      const u = userByEmail(f.email ?? '');
      if (!u || u.password !== f.password) return json(401, { error: 'invalid_credentials', message: 'Incorrect email address or password.' });
      const token = `shp_${randomBytes(24).toString('base64url')}`;
      tokens.set(token, u.email);
      return json(200, { token, token_type: 'Bearer', email: u.email });
    })
    .get('/api/me', (req) => {
      const a = bearerUser(req);
      if (!a.email) return apiAuthError(a.error!);
      const u = userByEmail(a.email)!;
      return json(200, { email: u.email, name: u.name });
    })
    .get('/api/orders', (req) => {
      const a = bearerUser(req);
      if (!a.email) return apiAuthError(a.error!);
      const ref = req.query.get('reference');
      return json(200, { orders: orders.filter((o) => o.email === a.email && (ref === null || o.reference === ref)).map(publicOrder) });
    })
    .post('/api/orders', (req) => {
      const a = bearerUser(req);
      if (!a.email) return apiAuthError(a.error!);
      const f = bodyFields(req);
      if (!f.reference && req.headers['idempotency-key']) f.reference = String(req.headers['idempotency-key']);
      const r = createOrder(a.email, f);
      if ('error' in r) return json(r.status, { error: r.error, message: r.message });
      return json(r.replayed ? 200 : 201, { ...publicOrder(r.order), replayed: r.replayed }, { location: `/api/orders/${r.order.order_id}` });
    })
    .get('/api/orders/:id', (req) => {
      const a = bearerUser(req);
      if (!a.email) return apiAuthError(a.error!);
      const o = orders.find((x) => x.email === a.email && x.order_id === req.params.id);
      return o ? json(200, publicOrder(o)) : json(404, { error: 'order_not_found' });
    });

  return {
    host: 'shop.example.test',
    name: BRAND,
    handle: router.handle,
    reset,
    stats: () => ({ orders: created, shop_sessions: sessions.size + tokens.size }),
    expireSessions() {
      const n = sessions.size + tokens.size;
      for (const s of sessions.keys()) expiredSids.add(s);
      for (const t of tokens.keys()) expiredTokens.add(t);
      sessions = new Map();
      tokens = new Map();
      return n;
    },
  };
}
