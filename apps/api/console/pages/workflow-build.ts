// Build / update a workflow: the definition as JSON in a textarea, its issues next to it, a test run
// of every example (through Temporal, on the real engines) shown against the expected outputs, and
// Publish, enabled only when a passing test run of exactly this definition exists. The draft is
// posted back with every action, so nothing typed is lost. Members can build (issue 9).
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import { z } from 'zod';
import {
  PRIVATE_BUILD_CREDITS,
  TEST_RUN_VALID_HOURS,
  definitionHash,
  definitionIssues,
  getVersion,
  listVersions,
  publish,
  testRun,
  workflowTemplate,
  type BuilderDefinition,
  type TestRunResult,
} from '../../../../shared/builder/index.ts';
import { browserTaskQueue } from '../../../../shared/config.ts';
import { ServiceError } from '../../../../shared/errors.ts';
import { ConsolePageError, needSession, notFound, sessionOf, type ConsoleContext } from '../context.ts';
import { hasPassingTestRun } from '../reads.ts';
import { HANDLE_RE, refusalMessage } from './workflow-messages.ts';

const BuildForm = z.object({
  _csrf: z.string(),
  definition: z.string(),
  share: z.literal('on').optional(),
  action: z.enum(['check', 'test', 'publish']),
});

interface Issue {
  path: string;
  message: string;
}

interface Draft {
  text: string;
  share: boolean;
  /** The handle being updated (null for a new workflow); only changes the page's wording. */
  editing: string | null;
  issues: Issue[];
  run: TestRunResult | null;
  message: string | null;
}

/** The draft as JSON, or the one issue that it is not JSON. */
function parseDraft(text: string): { json: unknown; issues: Issue[] } {
  try {
    return { json: JSON.parse(text), issues: [] };
  } catch (err) {
    return { json: undefined, issues: [{ path: '/', message: `is not valid JSON: ${err instanceof Error ? err.message : 'parse error'}` }] };
  }
}

const pretty = (def: BuilderDefinition) => JSON.stringify(def, null, 2);

export default async function workflowBuildPages(app: FastifyInstance, ctx: ConsoleContext) {
  const guard = { schema: { hide: true }, preHandler: needSession };

  async function page(request: FastifyRequest, reply: FastifyReply, d: Draft, status = 200) {
    const s = sessionOf(request);
    // Publish is enabled exactly when publish() would accept this text: valid, and a passing test run of its hash.
    const { json, issues: jsonIssues } = parseDraft(d.text);
    const valid = jsonIssues.length === 0 && definitionIssues(json).length === 0;
    const publishable = valid && (await hasPassingTestRun(app.db, s.orgId, definitionHash(json as BuilderDefinition), TEST_RUN_VALID_HOURS));
    const title = d.editing ? `Update ${d.editing}` : 'Build a workflow';
    return ctx.render(request, reply, 'workflow-build.eta', { title, ...d, publishable, cost: PRIVATE_BUILD_CREDITS, validHours: TEST_RUN_VALID_HOURS }, status);
  }

  app.get<{ Querystring: { api?: string } }>('/console/workflows/build', guard, async (request, reply) => {
    const s = sessionOf(request);
    const handle = request.query.api;
    if (handle === undefined) {
      return page(request, reply, { text: pretty(workflowTemplate()), share: false, editing: null, issues: [], run: null, message: null });
    }
    // An update starts from the latest version of the organization's own workflow; anyone else's is 404.
    if (typeof handle !== 'string' || !HANDLE_RE.test(handle)) throw notFound();
    try {
      const [latest] = await listVersions(app.db, s.orgId, handle);
      const def = await getVersion(app.db, s.orgId, handle, latest!.version);
      return page(request, reply, { text: pretty(def), share: latest!.visibility === 'public', editing: handle, issues: [], run: null, message: null });
    } catch (err) {
      if (err instanceof ServiceError && err.code === 'unknown_api_slug') throw notFound();
      throw err;
    }
  });

  app.post('/console/workflows/build', guard, async (request, reply) => {
    const s = sessionOf(request);
    const parsed = BuildForm.safeParse(request.body);
    if (!parsed.success) throw new ConsolePageError(400, 'Bad request', 'The form was incomplete: send the definition with one of Check, Test run or Publish.');
    const f = parsed.data;
    const { json, issues: jsonIssues } = parseDraft(f.definition);
    const handle = json && typeof json === 'object' && 'handle' in json && typeof json.handle === 'string' ? json.handle : null;
    const editing = handle && HANDLE_RE.test(handle) && (await isOwn(s.orgId, handle)) ? handle : null;
    const draft: Draft = { text: f.definition, share: f.share === 'on', editing, issues: [], run: null, message: null };

    draft.issues = jsonIssues.length ? jsonIssues : definitionIssues(json).slice(0, 50);
    if (draft.issues.length) return page(request, reply, draft, 400);
    if (f.action === 'check') return page(request, reply, { ...draft, message: 'No problems found. Run the test next.' });

    if (f.action === 'test') {
      try {
        const temporal = await ctx.temporal();
        draft.run = await testRun({ db: app.db, temporal, taskQueue: ctx.config.TEMPORAL_TASK_QUEUE, browserTaskQueue: browserTaskQueue(ctx.config) }, s.orgId, json);
      } catch (err) {
        // One test run per organization at a time (shared/builder/test-run.ts): say so, keep the draft.
        if (err instanceof ServiceError && err.code === 'organization_concurrency_limit') {
          return page(request, reply, { ...draft, message: 'A test run of this organization is already running (started here or by another member). Wait for it to finish, then run this one.' }, 429);
        }
        request.log.warn({ err }, 'console test run failed');
        return page(request, reply, { ...draft, message: 'The test run could not be completed (the engines are unavailable). Nothing was recorded; try again in a moment.' }, 503);
      }
      return page(request, reply, draft);
    }

    try {
      const done = await publish(app.db, s.orgId, json, { share: draft.share });
      return reply.redirect(`/console/workflows/${encodeURIComponent(done.api)}?published=${done.version}`, 303);
    } catch (err) {
      if (!(err instanceof ServiceError)) throw err;
      const shown = refusalMessage(err);
      if (!shown) throw err;
      return page(request, reply, { ...draft, message: shown.message, issues: shown.issues }, shown.status);
    }
  });

  async function isOwn(orgId: string, handle: string): Promise<boolean> {
    return (await listVersions(app.db, orgId, handle).then(() => true, () => false));
  }
}
