// A website's page cannot take the worker's memory, on the real stack (API and worker processes of
// this file's own, the demo sites' probe pages as the website). A page of 600,000 tiny elements
// (4.8 MB) cost the parser about 600 MiB of heap; three at once took a worker to 2 GiB, past its
// container's 768 MiB, and every organization's runs on it died with it. Now each run stops
// reading the page at MAX_HTML_NODES, at most DOCUMENT_SLOTS pages are held in the process at once,
// the worker stays up well within its memory, and its next query is answered.
import { existsSync, readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { publishApi } from '../shared/db/catalog.ts';
import { validateOperationVersion } from '../shared/catalog/validate.ts';
import type { ApiDefinition } from '../shared/catalog/types.ts';
import { balanceOf, newOrg, query, db } from './helpers/stack.ts';
import { ownPairPool } from './helpers/own-pair.ts';

// document_too_complex is the site's failure (upstream_http_error, retryable): the run tries again
// until the query's deadline, and the caller is told execution_timeout, uncharged. A short deadline
// keeps the file short. The worker's heap is bounded the way a container of 768 MiB bounds it: past
// that, V8 ends the process (what unbounded pages did to the shared worker).
const pool = ownPairPool('memory', { QUERY_DEADLINE_MS: '20000', NODE_OPTIONS: '--max-old-space-size=384' });

/** A private workflow of `orgId` on books.example.test running `steps`, answering `output`. */
async function workflow(orgId: string, steps: unknown[], output: unknown, properties: Record<string, unknown> = {}): Promise<string> {
  const handle = `@memory-${Math.random().toString(36).slice(2, 8)}`;
  const def: ApiDefinition = {
    handle,
    name: 'Large pages',
    description: 'A website with very large pages.',
    category: 'other',
    website_url: 'http://books.example.test/',
    sites: [{ name: 'Large', host: 'books.example.test' }],
    operations: [
      {
        name: 'read',
        label: 'Read',
        description: 'Reads a page.',
        cost_credits: 1,
        default_version: 1,
        versions: [
          {
            version: 1,
            input_schema: { type: 'object', additionalProperties: false, properties },
            output_schema: { type: 'object' },
            examples: [],
            recipe: { engine: 'http', hosts: ['books.example.test'], steps, output },
          },
        ],
      },
    ],
  };
  await publishApi(db(), def, { ownerOrgId: orgId, validateRecipe: validateOperationVersion });
  return handle;
}

/** Peak resident memory of a process so far (VmHWM), in MiB. */
function peakRssMiB(pid: number): number {
  const m = /VmHWM:\s+(\d+) kB/.exec(readFileSync(`/proc/${pid}/status`, 'utf8'));
  return Number(m![1]) / 1024;
}

describe("a website's page within the worker's memory", () => {
  it("three organizations' runs at once on a page of 600,000 elements: uncharged, the worker stays well within its memory and answers the next query", async () => {
    const [api, worker] = await Promise.all([pool.spawn('api'), pool.spawn('worker')]);
    const base = String(api.started.url);
    const steps = [
      { type: 'navigate', url: 'http://books.example.test/__probe/bulk?n={{input.n}}' },
      { type: 'extract', fields: { title: { type: 'text', selector: 'h1' }, n: { type: 'count', selector: 'p' } }, save_as: 'r' },
    ];
    const bulk = async () => {
      const org = await newOrg(10);
      const handle = await workflow(org.org_id, steps, { title: '{{vars.r.title}}', n: '{{vars.r.n}}' }, { n: { type: 'integer' } });
      return { org, handle };
    };
    const owner = await bulk();
    const read = (n: number, o = owner) => query(o.org.api_key, { api: o.handle, operation: 'read', input: { n } }, {}, base);
    // The workflow works, on a page of ordinary size.
    const first = await read(1_000);
    expect(first.status, first.text).toBe(200);
    const before = peakRssMiB(worker.proc.pid!);
    // Three organizations at once, each trying again and again until the deadline (20 s).
    const orgs = await Promise.all([bulk(), bulk(), bulk()]);
    const answers = await Promise.all(orgs.map((o) => read(600_000, o)));
    for (const res of answers) {
      expect(res.status, res.text).toBe(504);
      expect(res.body.error.code).toBe('execution_timeout');
    }
    for (const o of orgs) expect((await balanceOf(o.org.org_id)).charged).toBe(0);
    // The worker lived through it, far from its container's 768 MiB (unbounded, it passed 2 GiB).
    const alive = worker.proc.exitCode === null && worker.proc.signalCode === null && existsSync(`/proc/${worker.proc.pid}/status`);
    expect(alive, `the worker died:\n${worker.output().slice(-1500)}`).toBe(true);
    const peak = peakRssMiB(worker.proc.pid!);
    expect(peak, `the worker's peak RSS went from ${Math.round(before)} to ${Math.round(peak)} MiB`).toBeLessThan(768);
    // and it answers an ordinary page of the same site at once.
    const ok = await read(1_000);
    expect(ok.status, ok.text).toBe(200);
    expect(ok.body.data.output).toEqual({ title: 'Bulk', n: 1_000 });
    expect(first.body.data.output).toEqual({ title: 'Bulk', n: 1_000 });
  });
});
