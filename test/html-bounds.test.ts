// The bound on a parsed page's nodes (MAX_HTML_NODES, activities/engines/extract.ts): pure parsing,
// no stack. Every element, text run and comment the parser makes counts once, as it is made.
import { describe, expect, it } from 'vitest';
import { MAX_HTML_NODES, loadHtml } from '../activities/engines/extract.ts';
import { ServiceError } from '../shared/errors.ts';

/** The parse's refusal, or undefined when it parses. */
async function refusal(html: string): Promise<ServiceError | undefined> {
  try {
    await loadHtml(html);
    return undefined;
  } catch (e) {
    if (!(e instanceof ServiceError)) throw e;
    return e;
  }
}

// html, head and body are made by the parser even when the page leaves them out: 3 nodes.
const brs = (n: number) => '<br>'.repeat(n - 3);

describe('nodes per parsed page', () => {
  it('a page of exactly MAX_HTML_NODES nodes is read; one more is document_too_complex', async () => {
    const $ = await loadHtml(brs(MAX_HTML_NODES));
    expect($('br').length).toBe(MAX_HTML_NODES - 3);
    const e = await refusal(brs(MAX_HTML_NODES + 1));
    expect(e?.code).toBe('upstream_http_error');
    expect(e?.details).toEqual({ reason: 'document_too_complex' });
    expect(e?.message).toBe(`The website's page is too complex to read (more than ${MAX_HTML_NODES} elements, texts and comments)`);
  });

  it('text runs and comments count, one node each, however the parser feeds a run of text', async () => {
    // Each "x" is a text node of its own between two elements.
    expect((await refusal(`${'x<br>'.repeat(MAX_HTML_NODES / 2 - 1)}`))?.details).toEqual({ reason: 'document_too_complex' });
    expect((await refusal(`${'<!---->'.repeat(MAX_HTML_NODES)}`))?.details).toEqual({ reason: 'document_too_complex' });
    // One text run cut by slices, entities and a character reference is still one node.
    const run = 'a &amp; b &#x1F600; c '.repeat(5_000);
    const $ = await loadHtml(`${brs(MAX_HTML_NODES - 1)}<p>${run}</p>`.replace('<br>', ''), undefined, 7);
    expect($('p').text()).toBe(run.replace(/&amp;/g, '&').replace(/&#x1F600;/g, '\u{1F600}'));
  });

  it('5 MiB of tiny elements is refused before it is built, and quickly', async () => {
    const page = `<html><body>${'<p>x</p>'.repeat((5 * 1024 * 1024 - 100) / 8)}</body></html>`;
    const started = performance.now();
    const e = await refusal(page);
    expect(e?.details).toEqual({ reason: 'document_too_complex' });
    // 200,000 nodes are about a sixth of the page: the parse stops there instead of building 1.3 million.
    expect(performance.now() - started).toBeLessThan(10_000);
  });
});
