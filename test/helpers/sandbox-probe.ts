// Runs one browser recipe through a BrowserPool with CHROMIUM_SANDBOX=$SANDBOX, then reports whether
// the pool says its pages are sandboxed and what the kernel says of its renderer processes (their
// seccomp mode: 2 is Chromium's sandbox filter, 0 none). test/engines-browser.test.ts starts it as
// an unprivileged user, as a deployed worker runs (the image's `node` user).
import fs from 'node:fs';
import { BrowserPool, type SandboxMode } from '../../activities/engines/browser-engine.ts';
import { parseRecipe } from '../../shared/recipes/schema.ts';

/** Processes descending from this one, with their command line and seccomp mode. */
function descendants(): Array<{ pid: number; cmdline: string; seccomp: number | null }> {
  const parent = new Map<number, number>();
  for (const d of fs.readdirSync('/proc')) {
    if (!/^\d+$/.test(d)) continue;
    try {
      const ppid = /PPid:\s+(\d+)/.exec(fs.readFileSync(`/proc/${d}/status`, 'utf8'))?.[1];
      if (ppid) parent.set(Number(d), Number(ppid));
    } catch {
      /* gone */
    }
  }
  const mine = (pid: number): boolean => {
    for (let p = parent.get(pid); p !== undefined && p > 1; p = parent.get(p)) if (p === process.pid) return true;
    return false;
  };
  return [...parent.keys()].filter(mine).flatMap((pid) => {
    try {
      const status = fs.readFileSync(`/proc/${pid}/status`, 'utf8');
      return [{ pid, cmdline: fs.readFileSync(`/proc/${pid}/cmdline`, 'utf8').replace(/\0/g, ' '), seccomp: Number(/Seccomp:\s+(\d)/.exec(status)?.[1] ?? NaN) }];
    } catch {
      return [];
    }
  });
}

const pool = new BrowserPool({
  hostMap: JSON.parse(process.env.HOST_MAP ?? '{}'),
  chromiumPath: process.env.CHROMIUM,
  concurrency: 1,
  allowPrivateNetwork: false,
  sandbox: (process.env.SANDBOX ?? 'auto') as SandboxMode,
});
const recipe = parseRecipe({
  engine: 'browser',
  hosts: ['news.example.test'],
  steps: [{ type: 'navigate', url: 'http://news.example.test/' }, { type: 'extract', fields: { first: { type: 'text', selector: 'li.article-summary .headline a' } }, save_as: 'p' }],
  output: '{{vars.p.first}}',
});
const signal = new AbortController().signal;
let output: unknown = null;
let error: string | null = null;
let renderers: Array<{ seccomp: number | null }> = [];
try {
  output = await pool.run(recipe, {}, { signal, heartbeat() {}, requestRef: 'req_sandbox_probe1' }, signal);
  // The next run's page, made ahead, keeps a renderer after this run's closed.
  for (const end = Date.now() + 5_000; renderers.length === 0 && Date.now() < end; await new Promise((r) => setTimeout(r, 100))) {
    renderers = descendants().filter((p) => p.cmdline.includes('--type=renderer')).map((p) => ({ seccomp: p.seccomp }));
  }
} catch (err) {
  error = err instanceof Error ? err.message : String(err);
}
await pool.close();
console.log(JSON.stringify({ uid: process.getuid?.(), output, error, sandboxed: pool.sandboxed, renderers }));
