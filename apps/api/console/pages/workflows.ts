// Workflows: the organization's own APIs (private, and public ones it owns), and a built workflow's
// page: its versions, how to pin one, Restore, and a diff between two versions. Building and
// updating is pages/workflow-build.ts. Members can do all of it (issue 9: Members can build).
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import { z } from 'zod';
import { PRIVATE_BUILD_CREDITS, diffVersions, getVersion, listVersions, restore } from '../../../../shared/builder/index.ts';
import { ServiceError } from '../../../../shared/errors.ts';
import { ConsolePageError, needSession, notFound, sessionOf, type ConsoleContext } from '../context.ts';
import { diffLines } from '../diff-lines.ts';
import { ownedApis } from '../reads.ts';
import { HANDLE_RE, refusalMessage } from './workflow-messages.ts';

const Version = z.coerce.number().int().min(1).max(1_000_000);
const PageQuery = z.object({ from: Version.optional(), to: Version.optional(), published: Version.optional() });
const RestoreForm = z.object({ _csrf: z.string(), version: Version });

type Params = { Params: { handle: string } };

export default async function workflowPages(app: FastifyInstance, ctx: ConsoleContext) {
  const guard = { schema: { hide: true }, preHandler: needSession };

  app.get('/console/workflows', guard, async (request, reply) => {
    const s = sessionOf(request);
    return ctx.render(request, reply, 'workflows.eta', { title: 'Workflows', apis: await ownedApis(app.db, s.orgId) });
  });

  /** The organization's own built workflow, or the 404 page (another organization's looks the same as none). */
  async function versionsOf(orgId: string, handle: string) {
    if (!HANDLE_RE.test(handle)) throw notFound();
    try {
      return await listVersions(app.db, orgId, handle);
    } catch (err) {
      if (err instanceof ServiceError && err.code === 'unknown_api_slug') throw notFound();
      throw err;
    }
  }

  async function page(request: FastifyRequest<Params>, reply: FastifyReply, q: z.infer<typeof PageQuery>, message: string | null, status = 200) {
    const s = sessionOf(request);
    const handle = request.params.handle;
    const versions = await versionsOf(s.orgId, handle);
    const latest = versions[0]!;
    const def = await getVersion(app.db, s.orgId, handle, latest.version);
    const numbers = new Set(versions.map((v) => v.version));
    let diff = null;
    if (q.from !== undefined || q.to !== undefined) {
      if (q.from === undefined || q.to === undefined || !numbers.has(q.from) || !numbers.has(q.to)) {
        throw new ConsolePageError(400, 'Bad request', 'Choose two versions of this workflow to compare.');
      }
      const d = await diffVersions(app.db, s.orgId, handle, q.from, q.to);
      diff = { from: q.from, to: q.to, lines: diffLines(d.patch) };
    }
    const published = q.published !== undefined ? versions.find((v) => v.version === q.published) ?? null : null;
    return ctx.render(
      request,
      reply,
      'workflow.eta',
      {
        title: handle,
        handle,
        name: def.name,
        visibility: latest.visibility,
        versions,
        operations: def.operations.map((o) => ({ name: o.name, input: o.examples[0]?.input ?? {} })),
        diff,
        from: q.from ?? versions[1]?.version ?? latest.version,
        to: q.to ?? latest.version,
        published,
        message,
        cost: PRIVATE_BUILD_CREDITS,
        encoded: encodeURIComponent(handle),
      },
      status,
    );
  }

  app.get<Params & { Querystring: Record<string, string> }>('/console/workflows/:handle', guard, async (request, reply) => {
    const q = PageQuery.safeParse(request.query);
    if (!q.success) {
      await versionsOf(sessionOf(request).orgId, request.params.handle);
      throw new ConsolePageError(400, 'Bad request', 'Versions are whole numbers from 1.');
    }
    return page(request, reply, q.data, null);
  });

  app.post<Params>('/console/workflows/:handle/restore', guard, async (request, reply) => {
    const s = sessionOf(request);
    const handle = request.params.handle;
    await versionsOf(s.orgId, handle);
    const f = RestoreForm.safeParse(request.body);
    if (!f.success) throw new ConsolePageError(400, 'Bad request', 'Choose a version to restore.');
    try {
      const done = await restore(app.db, s.orgId, handle, f.data.version);
      return reply.redirect(`/console/workflows/${encodeURIComponent(handle)}?published=${done.version}`, 303);
    } catch (err) {
      if (!(err instanceof ServiceError)) throw err;
      const shown = refusalMessage(err);
      if (!shown) throw err;
      return page(request, reply, {}, shown.message.replace('Not published', 'Not restored'), shown.status);
    }
  });
}
