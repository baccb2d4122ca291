// Prompt mode's validation rules over real HTTP (issue 10): each is refused with the precise
// `param` and `details.issues`, before any routing, with no request row and nothing charged.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { balanceOf, call, closeDb, db, ledgerOf, newOrg, query, stack } from './helpers/stack.ts';
import { startPgByteCounter } from './helpers/pg-bytes.ts';
import { createPool, type Db } from '../shared/db/pool.ts';
import { createFile } from '../shared/db/files.ts';
import { CONTEXT_TEXT_BYTES, PromptRouting } from '../apps/api/services/prompt-routing.ts';
import type { PromptAttachment, PromptRouter } from '../shared/router/types.ts';

const DAY = 86_400_000;
const fileId = (n: number) => `file_${n.toString(16).padStart(32, '0')}`;
const handles = (n: number, prefix = 'h') => Array.from({ length: n }, (_, i) => `@${prefix}${i}`);

let org: Awaited<ReturnType<typeof newOrg>>;
let other: Awaited<ReturnType<typeof newOrg>>;

beforeAll(async () => {
  [org, other] = await Promise.all([newOrg(50), newOrg(50)]);
});
afterAll(async () => {
  // Nothing in this file reached the ledger or left a request.
  expect(await ledgerOf(org.org_id)).toEqual([]);
  expect(await balanceOf(org.org_id)).toEqual({ granted: 50, available: 50, reserved: 0, charged: 0 });
  expect((await db().query('SELECT count(*)::int AS n FROM requests WHERE org_id = $1', [org.org_id])).rows[0].n).toBe(0);
  await closeDb();
});

function expectError(res: { status: number; body: any }, status: number, code: string, param?: string) {
  expect(res.status, JSON.stringify(res.body)).toBe(status);
  expect(res.body.success).toBe(false);
  expect(res.body.error.code).toBe(code);
  expect(res.body.error.status).toBe(status);
  expect(res.body.error.doc_url).toMatch(new RegExp(`/docs/errors#${code}$`));
  expect(res.body.error).not.toHaveProperty('receipt');
  if (param !== undefined) expect(res.body.error.param).toBe(param);
}

const issuePaths = (res: { body: any }) => res.body.error.details.issues.map((i: { path: string }) => i.path);

describe('prompt-mode request shape (400 invalid_input)', () => {
  const cases: Array<[string, unknown, string, string[]]> = [
    ['operation with prompt', { prompt: 'weather in London', operation: 'current_weather' }, 'operation', ['operation']],
    ['input with prompt', { prompt: 'weather in London', input: { city: 'London' } }, 'input', ['input']],
    ['version with prompt', { prompt: 'weather in London', version: 1 }, 'version', ['version']],
    ['all three direct fields with prompt, each listed', { prompt: 'x', operation: 'a', input: {}, version: 1 }, 'operation', ['operation', 'input', 'version']],
    ['empty prompt', { prompt: '' }, 'prompt', ['prompt']],
    ['prompt over 10,000 characters', { prompt: 'a'.repeat(10_001) }, 'prompt', ['prompt']],
    ['prompt not a string', { prompt: 42 }, 'prompt', ['prompt']],
    ['allowed_apis empty', { prompt: 'x', allowed_apis: [] }, 'allowed_apis', ['allowed_apis']],
    ['allowed_apis over 100', { prompt: 'x', allowed_apis: handles(101) }, 'allowed_apis', ['allowed_apis']],
    ['allowed_apis duplicates', { prompt: 'x', allowed_apis: ['@weather', '@weather'] }, 'allowed_apis', ['allowed_apis']],
    ['allowed_apis bad handle', { prompt: 'x', allowed_apis: ['weather'] }, 'allowed_apis.0', ['allowed_apis.0']],
    ['blocked_apis empty', { prompt: 'x', blocked_apis: [] }, 'blocked_apis', ['blocked_apis']],
    ['blocked_apis over 100', { prompt: 'x', blocked_apis: handles(101) }, 'blocked_apis', ['blocked_apis']],
    ['blocked_apis duplicates', { prompt: 'x', blocked_apis: ['@books', '@books'] }, 'blocked_apis', ['blocked_apis']],
    ['blocked_apis bad handle', { prompt: 'x', blocked_apis: ['@Books'] }, 'blocked_apis.0', ['blocked_apis.0']],
    ['allowed and blocked overlap', { prompt: 'x', allowed_apis: ['@weather', '@books'], blocked_apis: ['@books'] }, 'allowed_apis.1', ['allowed_apis.1']],
    ['api in blocked_apis', { prompt: 'x', api: '@weather', blocked_apis: ['@weather'] }, 'api', ['api']],
    ['api outside allowed_apis', { prompt: 'x', api: '@weather', allowed_apis: ['@books'] }, 'api', ['api']],
    ['visibility without api', { prompt: 'x', visibility: 'public' }, 'visibility', ['visibility']],
    ['five attachments', { prompt: 'x', attachments: [1, 2, 3, 4, 5].map((n) => ({ id: fileId(n) })) }, 'attachments', ['attachments']],
    ['attachment id pattern', { prompt: 'x', attachments: [{ id: 'file_XYZ' }] }, 'attachments.0.id', ['attachments.0.id']],
    ['attachment without id', { prompt: 'x', attachments: [{ purpose: 'input' }] }, 'attachments.0.id', ['attachments.0.id']],
    ['attachment purpose', { prompt: 'x', attachments: [{ id: fileId(1), purpose: 'output' }] }, 'attachments.0.purpose', ['attachments.0.purpose']],
    ['attachment unknown field', { prompt: 'x', attachments: [{ id: fileId(1), url: 'https://x' }] }, 'attachments.0.url', ['attachments.0.url']],
    ['unknown top-level field', { prompt: 'x', model: 'gpt' }, 'model', ['model']],
    ['prompt-mode fields in direct mode', { api: '@weather', operation: 'current_weather', input: { city: 'London' }, allowed_apis: ['@weather'], attachments: [] }, 'allowed_apis', ['allowed_apis', 'attachments']],
  ];
  for (const [name, body, param, paths] of cases) {
    it(name, async () => {
      const res = await query(org.api_key, body);
      expectError(res, 400, 'invalid_input', param);
      expect(res.body.error.type).toBe('validation_error');
      for (const p of paths) expect(issuePaths(res)).toContain(p);
    });
  }

  it('bounds are inclusive: 10,000 characters, 100 handles and 4 attachments pass the shape check', async () => {
    // Each goes on past validation (to the attachment check, which finds no such file).
    const res = await query(org.api_key, {
      prompt: 'a'.repeat(10_000),
      allowed_apis: handles(100, 'a'),
      blocked_apis: handles(100, 'b'),
      attachments: [1, 2, 3, 4].map((n) => ({ id: fileId(n) })),
    });
    expectError(res, 404, 'file_not_found', 'attachments.0.id');
  });
});

describe('attachments must be the organization\'s own, unexpired files', () => {
  it('an unknown file is 404 file_not_found naming the attachment', async () => {
    const own = await createFile(db(), { orgId: org.org_id, name: 'notes.txt', contentType: 'text/plain', bytes: Buffer.from('London') });
    const res = await query(org.api_key, { prompt: 'weather', attachments: [{ id: own.id }, { id: fileId(7), purpose: 'context' }] });
    expectError(res, 404, 'file_not_found', 'attachments.1.id');
    expect(issuePaths(res)).toEqual(['attachments.1.id']);
  });

  it("another organization's file is indistinguishable from a missing one", async () => {
    const theirs = await createFile(db(), { orgId: other.org_id, name: 'secret.txt', contentType: 'text/plain', bytes: Buffer.from('secret') });
    const res = await query(org.api_key, { prompt: 'weather', attachments: [{ id: theirs.id }] });
    expectError(res, 404, 'file_not_found', 'attachments.0.id');
    expect(res.text).not.toContain('secret');
    expect(res.body.error.message).toBe(`No file ${theirs.id} for this organization`);
  });

  it('an expired file of the organization is 410 file_expired', async () => {
    // The maintenance Schedule purges expired files every minute: a purge between the insert and
    // the query would turn 410 into 404, so that case (and only that one) tries again.
    for (let attempt = 0; ; attempt++) {
      const old = await createFile(db(), { orgId: org.org_id, name: 'old.txt', contentType: 'text/plain', bytes: Buffer.from('old'), now: new Date(Date.now() - 31 * DAY) });
      const res = await query(org.api_key, { prompt: 'weather', attachments: [{ id: old.id, purpose: 'input' }] });
      const purged = (await db().query('SELECT 1 FROM files WHERE id = $1', [old.id])).rowCount === 0;
      if (res.status === 404 && purged && attempt < 3) continue;
      expectError(res, 410, 'file_expired', 'attachments.0.id');
      expect(issuePaths(res)).toEqual(['attachments.0.id']);
      expect(res.body.error.retryable).toBe(false);
      break;
    }
  });
});

describe('an attachment is read only as far as routing can use it', () => {
  // A router that records what it was handed, and abstains.
  const recording = (through: Db = db()) => {
    const seen: PromptAttachment[][] = [];
    const router: PromptRouter = {
      rank: async (_prompt, _scope, attachments) => (seen.push(attachments ?? []), { chosen: null, candidates: [], router: 'offline' }),
      fill: async () => ({ input: {}, missing: [] }),
    };
    return { seen, routing: new PromptRouting({ db: through, router: async () => router, maxInputBytes: 100_000 }) };
  };

  /** `fn` with a router reading files through a proxy that counts what PostgreSQL sends; returns those bytes. */
  async function bytesRead(fn: (r: ReturnType<typeof recording>) => Promise<void>): Promise<number> {
    const counter = await startPgByteCounter(stack().databaseUrl);
    const counted = createPool(counter.url, 1);
    try {
      await counted.query('SELECT 1'); // connected before counting
      const before = counter.received();
      await fn(recording(counted));
      return counter.received() - before;
    } finally {
      await counted.end();
      await counter.close();
    }
  }
  // What an input file is read to (maxInputBytes 100,000 and the margin), and a context file.
  const INPUT_READ = 100_000 + 1_024;
  const tenMbText = () => Buffer.from('London weather. '.repeat(655_360));

  it('a file listed four times is read once, as far as its furthest use, in base64 rather than hex', async () => {
    const big = await createFile(db(), { orgId: org.org_id, name: 'big.txt', contentType: 'text/plain', bytes: tenMbText() });
    let seen: PromptAttachment[] = [];
    const read = await bytesRead(async (r) => {
      const attachments = (['input', 'input', 'context', 'input'] as const).map((purpose) => ({ id: big.id, purpose }));
      await expect(r.routing.plan(org.org_id, { prompt: 'weather', attachments })).rejects.toMatchObject({ code: 'prompt_unroutable' });
      seen = r.seen[0]!;
    });
    // Once, as base64 (4/3 and a newline every 76): not four times, nor as hex (2 characters a byte).
    expect(read).toBeGreaterThan(INPUT_READ);
    expect(read).toBeLessThan(INPUT_READ * 1.45);
    expect(Buffer.byteLength(seen[0]!.text!)).toBeGreaterThan(100_000);
    for (const later of seen.slice(1)) expect(Buffer.byteLength(later.text!)).toBeLessThanOrEqual(CONTEXT_TEXT_BYTES);
    expect(seen.map((a) => [a.id, a.purpose])).toEqual([[big.id, 'input'], [big.id, 'input'], [big.id, 'context'], [big.id, 'input']]);
  });

  it('four files: only the first input file is read as far as an input can use; the others as context', async () => {
    const files = await Promise.all([1, 2, 3, 4].map((n) => createFile(db(), { orgId: org.org_id, name: `big${n}.txt`, contentType: 'text/plain', bytes: tenMbText() })));
    let seen: PromptAttachment[] = [];
    const read = await bytesRead(async (r) => {
      const attachments = files.map((f, i) => ({ id: f.id, purpose: i === 2 ? ('context' as const) : ('input' as const) }));
      await expect(r.routing.plan(org.org_id, { prompt: 'weather', attachments })).rejects.toMatchObject({ code: 'prompt_unroutable' });
      seen = r.seen[0]!;
    });
    expect(read).toBeLessThan((INPUT_READ + 3 * CONTEXT_TEXT_BYTES) * 1.45);
    expect(seen.map((a) => a.id)).toEqual(files.map((f) => f.id));
    expect(Buffer.byteLength(seen[0]!.text!)).toBeGreaterThan(100_000);
    for (const other of seen.slice(1)) {
      expect(other.text!.length).toBeGreaterThanOrEqual(500);
      expect(Buffer.byteLength(other.text!)).toBeLessThanOrEqual(CONTEXT_TEXT_BYTES);
    }
  });

  it('a file that is not text has none of its bytes read', async () => {
    const blob = await createFile(db(), { orgId: org.org_id, name: 'blob.bin', contentType: 'application/octet-stream', bytes: Buffer.alloc(10 * 1024 * 1024, 7) });
    let seen: PromptAttachment[] = [];
    const read = await bytesRead(async (r) => {
      await expect(r.routing.plan(org.org_id, { prompt: 'weather', attachments: [{ id: blob.id, purpose: 'input' }] })).rejects.toMatchObject({ code: 'prompt_unroutable' });
      seen = r.seen[0]!;
    });
    expect(read).toBeLessThan(5_000);
    expect(seen).toEqual([{ id: blob.id, purpose: 'input', name: 'blob.bin', content_type: 'application/octet-stream', text: null }]);
  });

  it('a 10 MB file attached four times: the start of its text as context, as input no more than a query can carry', async () => {
    const text = 'London weather. '.repeat(655_360); // 10 MB of text
    const big = await createFile(db(), { orgId: org.org_id, name: 'big.txt', contentType: 'text/plain', bytes: Buffer.from(text) });
    const { seen, routing } = recording();
    const attachments = [
      { id: big.id, purpose: 'context' as const },
      { id: big.id, purpose: 'input' as const },
      { id: big.id, purpose: 'input' as const },
      { id: big.id, purpose: 'context' as const },
    ];
    await expect(routing.plan(org.org_id, { prompt: 'weather', attachments })).rejects.toMatchObject({ code: 'prompt_unroutable' });
    const [ctx, input] = seen[0]!;
    // Ranking reads 500 characters of a context file; 2,000 bytes hold them.
    expect(ctx!.text!.length).toBeGreaterThanOrEqual(500);
    expect(Buffer.byteLength(ctx!.text!)).toBeLessThanOrEqual(CONTEXT_TEXT_BYTES);
    expect(text.startsWith(ctx!.text!)).toBe(true);
    // An input text past the query's limit is still past it (payload_too_large as before), never more.
    expect(Buffer.byteLength(input!.text!)).toBeGreaterThan(100_000);
    expect(Buffer.byteLength(input!.text!)).toBeLessThanOrEqual(100_000 + 1_024);
    expect(text.startsWith(input!.text!)).toBe(true);
    expect(seen[0]!.map((a) => [a.id, a.name, a.content_type])).toEqual(attachments.map((a) => [a.id, 'big.txt', 'text/plain']));
  });

  it('a character cut at the end of what is read is left out, not taken for binary', async () => {
    const euros = await createFile(db(), { orgId: org.org_id, name: 'euros.txt', contentType: 'text/plain', bytes: Buffer.from('€'.repeat(1_000)) });
    const { seen, routing } = recording();
    await expect(routing.plan(org.org_id, { prompt: 'weather', attachments: [{ id: euros.id, purpose: 'context' }] })).rejects.toMatchObject({ code: 'prompt_unroutable' });
    expect(seen[0]![0]!.text).toBe('€'.repeat(Math.floor(CONTEXT_TEXT_BYTES / 3)));
  });

  it('a file that fits is read whole', async () => {
    const small = await createFile(db(), { orgId: org.org_id, name: 'notes.txt', contentType: 'text/plain', bytes: Buffer.from('Oslo €') });
    const { seen, routing } = recording();
    await expect(routing.plan(org.org_id, { prompt: 'weather', attachments: [{ id: small.id, purpose: 'input' }] })).rejects.toMatchObject({ code: 'prompt_unroutable' });
    expect(seen[0]![0]!.text).toBe('Oslo €');
  });
});

describe('a prompt that names an API', () => {
  it('an API the organization cannot reach is 404 unknown_api_slug, as in direct mode', async () => {
    expectError(await query(org.api_key, { prompt: 'weather in London', api: '@nope' }), 404, 'unknown_api_slug', 'api');
    // @weather is public: the private side has no such API for this organization.
    expectError(await query(org.api_key, { prompt: 'weather in London', api: '@weather', visibility: 'private' }), 404, 'unknown_api_slug', 'api');
  });
});

describe('documented', () => {
  it('the new codes are in the error guide, and the request status documents routing', async () => {
    const guide = await call('GET', '/docs/errors.json');
    const byCode = Object.fromEntries(guide.body.data.items.map((i: { code: string }) => [i.code, i]));
    expect(byCode.prompt_unroutable).toMatchObject({ status: 422, type: 'validation_error', retryable: false });
    expect(byCode.prompt_input_missing).toMatchObject({ status: 422, type: 'validation_error', retryable: false });
    expect(byCode.file_not_found).toMatchObject({ status: 404, retryable: false });
    expect(byCode.file_expired).toMatchObject({ status: 410, retryable: false });
    const html = await call('GET', '/docs/errors');
    for (const code of ['prompt_unroutable', 'prompt_input_missing', 'file_not_found', 'file_expired']) expect(html.text).toContain(`id="${code}"`);

    const doc = (await call('GET', '/openapi.json')).body;
    const routing = doc.components.schemas.RequestStatus.properties.routing;
    const object = (routing.anyOf ?? routing.oneOf).find((s: { type?: string }) => s.type === 'object');
    expect(object.required).toEqual(expect.arrayContaining(['router', 'score', 'candidates', 'search_credits']));
    expect(object.properties.candidates.items.required).toEqual(expect.arrayContaining(['api', 'operation', 'label', 'score']));
  });
});
