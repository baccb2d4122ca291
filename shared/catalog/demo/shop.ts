// @shop — Northwind Outfitters (shop.example.test): products, orders placed with the caller's
// connected shop account (browser engine), and @shop-api, the shop's bearer-token JSON API.
//
// The account connection `shop_account` supplies the secrets SHOP_EMAIL and SHOP_PASSWORD.
import type { AccessRequirement, ApiDefinition, JsonSchema } from '../types.ts';
import type { Recipe, Step } from '../../recipes/schema.ts';
import { DATE, DATETIME, site } from './common.ts';

const HOST = 'shop.example.test';
const SKU = { type: 'string', pattern: '^NW-[A-Z0-9-]{2,20}$', description: 'Product SKU, e.g. NW-MUG-STL' } as const;
const ORDER_ID = { type: 'string', pattern: '^ORD-[0-9]{6}$', description: 'Order number, e.g. ORD-100001' } as const;
const SHOP_ACCOUNT: AccessRequirement[] = [{ kind: 'account', name: 'shop_account', site: HOST }];
const SHOP_SECRETS = ['SHOP_EMAIL', 'SHOP_PASSWORD'];

/** Browser steps that sign in with the connected account; `next` is a literal path. */
function signIn(next: string): Step[] {
  return [
    { type: 'navigate', name: 'Open the sign-in page', url: `http://${HOST}/login?next=${encodeURIComponent(next)}` },
    { type: 'fill', name: 'Enter the email address', selector: '#email', value: '{{secrets.SHOP_EMAIL}}' },
    { type: 'fill', name: 'Enter the password', selector: '#password', value: '{{secrets.SHOP_PASSWORD}}' },
    { type: 'click', name: 'Sign in', selector: '#sign-in', wait_for_navigation: true, expect_status: [200, 401] },
    { type: 'fail', when: { selector_present: 'main p.error[role="alert"]' }, code: 'credentials_rejected', message: 'The shop rejected the account’s email address or password' },
    { type: 'fail', when: { selector_present: '#login-form' }, code: 'auth_required', message: 'The shop asked the account to sign in again' },
  ];
}

// --- list_products ------------------------------------------------------------------------------

const listProductsRecipe: Recipe = {
  engine: 'http',
  hosts: [HOST],
  steps: [
    { type: 'navigate', name: 'Open the shop', url: `http://${HOST}/` },
    {
      type: 'extract',
      fields: {
        products: {
          type: 'list',
          selector: 'ul.products > li.product-card',
          limit: '{{input.max_results}}',
          fields: {
            sku: { type: 'attribute', attribute: 'data-sku' },
            name: { type: 'text', selector: '.product-name' },
            price: { type: 'number', selector: '.price' },
            currency: { type: 'attribute', selector: '.price', attribute: 'data-currency' },
            in_stock: { type: 'exists', selector: '.availability.in-stock' },
            url: { type: 'url', selector: '.product-name a' },
          },
        },
      },
      save_as: 'shop',
    },
  ],
  output: { products: '{{vars.shop.products}}' },
};

// --- place_order (browser, action) -----------------------------------------------------------------

const placeOrderRecipe: Recipe = {
  engine: 'browser',
  hosts: [HOST],
  secrets: SHOP_SECRETS,
  steps: [
    ...signIn('/account'),
    // The reference makes the order idempotent: submitting it again returns the same order.
    { type: 'navigate', name: 'Open the product', url: `http://${HOST}/products/{{input.sku}}?reference={{run.request_ref}}`, not_found_status: [404] },
    { type: 'fail', when: { selector_present: 'a.sign-in' }, code: 'auth_required', message: 'The shop did not keep the account signed in' },
    { type: 'not_found', when: { selector_absent: '#order-form' }, message: 'The product is out of stock' },
    { type: 'fill', name: 'Enter the quantity', selector: '#quantity', value: '{{input.quantity}}' },
    { type: 'click', name: 'Place the order', selector: '#place-order', wait_for_navigation: true, action: true, expect_status: [200, 400, 409] },
    { type: 'extract', fields: { message: { type: 'text', selector: '.product p.error' } }, save_as: 'refusal' },
    { type: 'fail', when: { selector_present: '.product p.error' }, code: 'invalid_provider_input', message: 'The shop refused the order: {{vars.refusal.message}}' },
    { type: 'fail', when: { selector_absent: '.confirmation[data-order-id]' }, code: 'action_unconfirmed', message: 'The shop did not show an order confirmation' },
    {
      type: 'extract',
      scope: '.confirmation',
      fields: {
        order_id: { type: 'text', selector: '.order-id' },
        sku: { type: 'text', selector: '.sku' },
        product_name: { type: 'text', selector: '.product-name' },
        quantity: { type: 'integer', selector: '.quantity' },
        total: { type: 'number', selector: '.total', attribute: 'data-amount' },
        currency: { type: 'attribute', selector: '.total', attribute: 'data-currency' },
        status: { type: 'text', selector: '.status' },
      },
      save_as: 'order',
    },
  ],
  output: '{{vars.order}}',
};

// --- list_orders (browser, account) ----------------------------------------------------------------

const listOrdersRecipe: Recipe = {
  engine: 'browser',
  hosts: [HOST],
  secrets: SHOP_SECRETS,
  steps: [
    ...signIn('/account/orders'),
    { type: 'wait', selector: 'h1', state: 'attached' },
    {
      type: 'extract',
      fields: {
        orders: {
          type: 'list',
          selector: 'table.orders tr.order',
          limit: '{{input.max_results}}',
          fields: {
            order_id: { type: 'text', selector: '.order-id' },
            date: { type: 'date', selector: '.order-date', attribute: 'datetime' },
            product_name: { type: 'text', selector: '.product-name' },
            sku: { type: 'text', selector: '.sku' },
            quantity: { type: 'integer', selector: '.quantity' },
            total: { type: 'number', selector: '.total' },
            status: { type: 'text', selector: '.status' },
          },
        },
        total_orders: { type: 'count', selector: 'table.orders tr.order' },
      },
      save_as: 'account',
    },
  ],
  output: { total_orders: '{{vars.account.total_orders}}', orders: '{{vars.account.orders}}' },
};

// --- @shop-api get_order (http, account) -------------------------------------------------------------

const getOrderRecipe: Recipe = {
  engine: 'http',
  hosts: [HOST],
  secrets: SHOP_SECRETS,
  steps: [
    {
      type: 'request',
      name: 'Sign in to the API',
      method: 'POST',
      url: `http://${HOST}/api/session`,
      json: { email: '{{secrets.SHOP_EMAIL}}', password: '{{secrets.SHOP_PASSWORD}}' },
      parse: 'json',
      save_as: 'session',
    },
    {
      type: 'request',
      name: 'Read the order',
      url: `http://${HOST}/api/orders/{{input.order_id}}`,
      headers: { Authorization: 'Bearer {{vars.session.token}}' },
      parse: 'json',
      not_found_status: [404],
      save_as: 'order',
    },
    {
      type: 'extract',
      from: { var: 'order' },
      fields: {
        order_id: { type: 'text', pointer: '/order_id' },
        sku: { type: 'text', pointer: '/sku' },
        product_name: { type: 'text', pointer: '/product_name' },
        quantity: { type: 'integer', pointer: '/quantity' },
        unit_price: { type: 'number', pointer: '/unit_price' },
        total: { type: 'number', pointer: '/total' },
        currency: { type: 'text', pointer: '/currency' },
        status: { type: 'text', pointer: '/status' },
        created_at: { type: 'datetime', pointer: '/created_at' },
      },
      save_as: 'o',
    },
  ],
  output: '{{vars.o}}',
};

const orderLineSchema: JsonSchema = {
  type: 'object',
  additionalProperties: false,
  required: ['order_id', 'date', 'product_name', 'sku', 'quantity', 'total', 'status'],
  properties: {
    order_id: ORDER_ID,
    date: DATE,
    product_name: { type: 'string' },
    sku: SKU,
    quantity: { type: 'integer', minimum: 1 },
    total: { type: 'number', minimum: 0 },
    status: { type: 'string' },
  },
};

export const shopApi: ApiDefinition = {
  handle: '@shop',
  name: 'Northwind Outfitters',
  description: 'Browse the Northwind Outfitters outdoor-gear shop, place orders and list past orders with your connected shop account.',
  category: 'commerce',
  website_url: `http://${HOST}/`,
  sites: [site('Northwind Outfitters', HOST)],
  operations: [
    {
      name: 'list_products',
      label: 'List products',
      description: 'Lists the products on sale at Northwind Outfitters with SKU, name, price in USD and whether each is in stock.',
      cost_credits: 1,
      default_version: 1,
      labels: ['shop', 'products', 'prices', 'outdoor gear', 'stock'],
      versions: [
        {
          version: 1,
          input_schema: {
            type: 'object',
            additionalProperties: false,
            properties: { max_results: { type: 'integer', minimum: 1, maximum: 50, description: 'Most products to return; all when left out' } },
          },
          output_schema: {
            type: 'object',
            additionalProperties: false,
            required: ['products'],
            properties: {
              products: {
                type: 'array',
                items: {
                  type: 'object',
                  additionalProperties: false,
                  required: ['sku', 'name', 'price', 'currency', 'in_stock', 'url'],
                  properties: {
                    sku: SKU,
                    name: { type: 'string' },
                    price: { type: 'number', minimum: 0 },
                    currency: { type: 'string', pattern: '^[A-Z]{3}$' },
                    in_stock: { type: 'boolean' },
                    url: { type: 'string', format: 'uri' },
                  },
                },
              },
            },
          },
          recipe: listProductsRecipe,
          examples: [
            {
              title: "The first three products",
              input: {
                max_results: 3
              },
              output: {
                products: [
                  {
                    sku: "NW-TENT-2P",
                    name: "Ridgeline 2-Person Tent",
                    price: 189,
                    currency: "USD",
                    in_stock: true,
                    url: "http://shop.example.test/products/NW-TENT-2P"
                  },
                  {
                    sku: "NW-BOOT-M42",
                    name: "Trailhead Hiking Boots (EU 42)",
                    price: 129.5,
                    currency: "USD",
                    in_stock: true,
                    url: "http://shop.example.test/products/NW-BOOT-M42"
                  },
                  {
                    sku: "NW-MUG-STL",
                    name: "Camp Steel Mug",
                    price: 14.99,
                    currency: "USD",
                    in_stock: true,
                    url: "http://shop.example.test/products/NW-MUG-STL"
                  }
                ]
              }
            },
            {
              title: "Every product",
              input: {},
              output: {
                products: [
                  {
                    sku: "NW-TENT-2P",
                    name: "Ridgeline 2-Person Tent",
                    price: 189,
                    currency: "USD",
                    in_stock: true,
                    url: "http://shop.example.test/products/NW-TENT-2P"
                  },
                  {
                    sku: "NW-BOOT-M42",
                    name: "Trailhead Hiking Boots (EU 42)",
                    price: 129.5,
                    currency: "USD",
                    in_stock: true,
                    url: "http://shop.example.test/products/NW-BOOT-M42"
                  },
                  {
                    sku: "NW-MUG-STL",
                    name: "Camp Steel Mug",
                    price: 14.99,
                    currency: "USD",
                    in_stock: true,
                    url: "http://shop.example.test/products/NW-MUG-STL"
                  },
                  {
                    sku: "NW-LAMP-300",
                    name: "Lumen 300 Headlamp",
                    price: 34.95,
                    currency: "USD",
                    in_stock: true,
                    url: "http://shop.example.test/products/NW-LAMP-300"
                  },
                  {
                    sku: "NW-BAG-28L",
                    name: "Summit 28L Daypack",
                    price: 74,
                    currency: "USD",
                    in_stock: true,
                    url: "http://shop.example.test/products/NW-BAG-28L"
                  },
                  {
                    sku: "NW-SOCK-3PK",
                    name: "Merino Hiking Socks (3 pack)",
                    price: 24.99,
                    currency: "USD",
                    in_stock: true,
                    url: "http://shop.example.test/products/NW-SOCK-3PK"
                  },
                  {
                    sku: "NW-STOVE-MINI",
                    name: "Pocket Gas Stove",
                    price: 39,
                    currency: "USD",
                    in_stock: false,
                    url: "http://shop.example.test/products/NW-STOVE-MINI"
                  },
                  {
                    sku: "NW-BOTTLE-1L",
                    name: "Trail Bottle 1 L",
                    price: 19.5,
                    currency: "USD",
                    in_stock: true,
                    url: "http://shop.example.test/products/NW-BOTTLE-1L"
                  }
                ]
              }
            }
          ],
        },
      ],
    },
    {
      name: 'place_order',
      label: 'Place an order',
      description:
        'Signs in with the connected shop account and orders a quantity of one product, returning the confirmed order number and total. Repeating the same request never creates a second order. An out-of-stock or unknown product is not_found.',
      cost_credits: 1,
      default_version: 1,
      performs_actions: true,
      access: SHOP_ACCOUNT,
      labels: ['shop', 'order', 'buy', 'purchase', 'checkout'],
      versions: [
        {
          version: 1,
          input_schema: {
            type: 'object',
            additionalProperties: false,
            required: ['sku', 'quantity'],
            properties: { sku: SKU, quantity: { type: 'integer', minimum: 1, maximum: 10 } },
          },
          output_schema: {
            type: 'object',
            additionalProperties: false,
            required: ['order_id', 'sku', 'product_name', 'quantity', 'total', 'currency', 'status'],
            properties: {
              order_id: ORDER_ID,
              sku: SKU,
              product_name: { type: 'string' },
              quantity: { type: 'integer', minimum: 1, maximum: 10 },
              total: { type: 'number', minimum: 0 },
              currency: { type: 'string', pattern: '^[A-Z]{3}$' },
              status: { type: 'string' },
            },
          },
          recipe: placeOrderRecipe,
          examples: [
            {
              title: "Two camp mugs",
              input: {
                sku: "NW-MUG-STL",
                quantity: 2
              },
              output: {
                order_id: "ORD-100101",
                sku: "NW-MUG-STL",
                product_name: "Camp Steel Mug",
                quantity: 2,
                total: 29.98,
                currency: "USD",
                status: "confirmed"
              }
            },
            {
              title: "One tent",
              input: {
                sku: "NW-TENT-2P",
                quantity: 1
              },
              output: {
                order_id: "ORD-100101",
                sku: "NW-TENT-2P",
                product_name: "Ridgeline 2-Person Tent",
                quantity: 1,
                total: 189,
                currency: "USD",
                status: "confirmed"
              }
            }
          ],
        },
      ],
    },
    {
      name: 'list_orders',
      label: 'List my orders',
      description: 'Signs in with the connected shop account and lists its orders, newest first, with date, item, quantity, total and delivery status.',
      cost_credits: 1,
      default_version: 1,
      access: SHOP_ACCOUNT,
      labels: ['shop', 'orders', 'order history', 'delivery status'],
      versions: [
        {
          version: 1,
          input_schema: {
            type: 'object',
            additionalProperties: false,
            properties: { max_results: { type: 'integer', minimum: 1, maximum: 100, description: 'Most orders to return; all when left out' } },
          },
          output_schema: {
            type: 'object',
            additionalProperties: false,
            required: ['total_orders', 'orders'],
            properties: { total_orders: { type: 'integer', minimum: 0 }, orders: { type: 'array', items: orderLineSchema } },
          },
          recipe: listOrdersRecipe,
          examples: [
            {
              title: "The latest order",
              input: {
                max_results: 1
              },
              output: {
                total_orders: 2,
                orders: [
                  {
                    order_id: "ORD-100002",
                    date: "2025-05-02",
                    product_name: "Lumen 300 Headlamp",
                    sku: "NW-LAMP-300",
                    quantity: 1,
                    total: 34.95,
                    status: "shipped"
                  }
                ]
              }
            },
            {
              title: "All orders",
              input: {},
              output: {
                total_orders: 2,
                orders: [
                  {
                    order_id: "ORD-100002",
                    date: "2025-05-02",
                    product_name: "Lumen 300 Headlamp",
                    sku: "NW-LAMP-300",
                    quantity: 1,
                    total: 34.95,
                    status: "shipped"
                  },
                  {
                    order_id: "ORD-100001",
                    date: "2025-03-14",
                    product_name: "Camp Steel Mug",
                    sku: "NW-MUG-STL",
                    quantity: 2,
                    total: 29.98,
                    status: "delivered"
                  }
                ]
              }
            }
          ],
        },
      ],
    },
  ],
};

export const shopApiApi: ApiDefinition = {
  handle: '@shop-api',
  name: 'Northwind Orders API',
  description: 'The Northwind Outfitters JSON API: read an order of your connected shop account by its number.',
  category: 'commerce',
  website_url: `http://${HOST}/api/products`,
  sites: [site('Northwind Outfitters', HOST)],
  operations: [
    {
      name: 'get_order',
      label: 'Get an order',
      description: 'Reads one order of the connected shop account through the shop’s API: item, quantity, unit price, total, status and when it was placed. An unknown order number is not_found.',
      cost_credits: 1,
      default_version: 1,
      access: SHOP_ACCOUNT,
      labels: ['shop', 'order', 'order status', 'api'],
      versions: [
        {
          version: 1,
          input_schema: { type: 'object', additionalProperties: false, required: ['order_id'], properties: { order_id: ORDER_ID } },
          output_schema: {
            type: 'object',
            additionalProperties: false,
            required: ['order_id', 'sku', 'product_name', 'quantity', 'unit_price', 'total', 'currency', 'status', 'created_at'],
            properties: {
              order_id: ORDER_ID,
              sku: SKU,
              product_name: { type: 'string' },
              quantity: { type: 'integer', minimum: 1 },
              unit_price: { type: 'number', minimum: 0 },
              total: { type: 'number', minimum: 0 },
              currency: { type: 'string', pattern: '^[A-Z]{3}$' },
              status: { type: 'string' },
              created_at: DATETIME,
            },
          },
          recipe: getOrderRecipe,
          examples: [
            {
              title: "A delivered order",
              input: {
                order_id: "ORD-100001"
              },
              output: {
                order_id: "ORD-100001",
                sku: "NW-MUG-STL",
                product_name: "Camp Steel Mug",
                quantity: 2,
                unit_price: 14.99,
                total: 29.98,
                currency: "USD",
                status: "delivered",
                created_at: "2025-03-14T10:22:00Z"
              }
            },
            {
              title: "A shipped order",
              input: {
                order_id: "ORD-100002"
              },
              output: {
                order_id: "ORD-100002",
                sku: "NW-LAMP-300",
                product_name: "Lumen 300 Headlamp",
                quantity: 1,
                unit_price: 34.95,
                total: 34.95,
                currency: "USD",
                status: "shipped",
                created_at: "2025-05-02T16:05:00Z"
              }
            }
          ],
        },
      ],
    },
  ],
};
