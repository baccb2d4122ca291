// Requests: the organization's requests (filters, cursor pages) and one request's page with its
// receipt, stages, retained result and the feedback control (the API's rules: shared/db/feedback.ts).
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import { z } from 'zod';
import { REQUEST_ID_PATTERN } from '../../../../shared/ids.ts';
import { ServiceError } from '../../../../shared/errors.ts';
import { findStatusForOrg } from '../../../../shared/db/requests.ts';
import { loadRatingContext, setFeedback } from '../../../../shared/db/feedback.ts';
import { requestStatusOf } from '../../routes/requests.ts';
import { ConsolePageError, needSession, notFound, sessionOf, type ConsoleContext } from '../context.ts';
import { decodeCursor, listRequests, requestedApis, REQUEST_STATUSES } from '../reads.ts';

const Filters = z.object({
  status: z.enum(REQUEST_STATUSES as [string, ...string[]]).optional().or(z.literal('').transform(() => undefined)),
  workflow: z.string().regex(/^@[a-z0-9][a-z0-9_-]{0,99}$/).optional().or(z.literal('').transform(() => undefined)),
  cursor: z.string().max(200).optional(),
});
const FeedbackForm = z.object({ _csrf: z.string(), value: z.enum(['up', 'down', 'clear']) });

const REASONS: Record<string, string> = {
  own_api: 'Your organization owns this workflow, so its ratings would not be independent.',
  private_api: 'Private workflows are not rated.',
  request_incomplete: 'Only finished requests can be rated.',
  expired: 'Requests can be rated for 30 days.',
  not_independent: 'Your organization has already rated this workflow the most times allowed.',
};

/**
 * The gate's refusal (organization_concurrency_limit) as the console answers it: the 429 page with
 * Retry-After, nothing changed. Anything else goes on to the console's error handler as it was.
 */
function busy(err: unknown): unknown {
  if (!(err instanceof ServiceError) || err.code !== 'organization_concurrency_limit') return err;
  const retry = err.headers?.['retry-after'] ?? '1';
  return new ConsolePageError(
    429,
    'Too many ratings at once',
    `Your organization is sending more ratings at once than this server takes. Nothing was changed. Try again in ${retry} second${retry === '1' ? '' : 's'}.`,
    { 'retry-after': retry },
  );
}

/** The stages a request went through, from what its row records. */
function stagesOf(r: { status: string; billing_status: string; created_at: Date; completed_at: Date | null }) {
  const stages: Array<{ name: string; at: Date | null; detail: string }> = [{ name: 'Received', at: r.created_at, detail: 'credits reserved before the run' }];
  if (r.status !== 'reserving') stages.push({ name: 'Ran', at: null, detail: r.status === 'rejected' ? 'refused before running' : 'dispatched to a workflow' });
  if (r.completed_at) stages.push({ name: 'Finished', at: r.completed_at, detail: r.status });
  stages.push({ name: 'Billing', at: null, detail: r.billing_status });
  return stages;
}

export default async function requestPages(app: FastifyInstance, ctx: ConsoleContext) {
  app.get('/console/requests', { schema: { hide: true }, preHandler: needSession }, async (request, reply) => {
    const s = sessionOf(request);
    const f = Filters.safeParse(request.query);
    const cursor = f.success ? decodeCursor(f.data.cursor) : 'bad';
    if (!f.success || cursor === 'bad') throw new ConsolePageError(400, 'Bad filter', 'Those filters are not valid. Clear them and try again.');
    const page = await listRequests(app.db, s.orgId, { status: f.data.status, api: f.data.workflow, after: cursor, limit: 25 });
    const nextQuery = page.next ? new URLSearchParams({ ...(f.data.status ? { status: f.data.status } : {}), ...(f.data.workflow ? { workflow: f.data.workflow } : {}), cursor: page.next }).toString() : null;
    return ctx.render(request, reply, 'requests.eta', {
      title: 'Requests',
      rows: page.rows,
      nextQuery,
      statuses: REQUEST_STATUSES,
      workflows: await requestedApis(app.db, s.orgId),
      filter: { status: f.data.status ?? '', workflow: f.data.workflow ?? '' },
      paged: Boolean(f.data.cursor),
    });
  });

  async function requestPage(request: FastifyRequest, reply: FastifyReply, id: string, notice: string | null, status = 200) {
    const s = sessionOf(request);
    if (!REQUEST_ID_PATTERN.test(id)) throw notFound();
    // The retained result only when the page shows it (keyed, within its retention): never an expired one.
    const row = await findStatusForOrg(app.db, s.orgId, id);
    const rating = row && (await loadRatingContext(app.db, s.orgId, id));
    if (!row || !rating) throw notFound();
    const view = requestStatusOf(row, s.orgId, rating);
    return ctx.render(request, reply, 'request.eta', {
      title: `Request ${row.id}`,
      row,
      view,
      stages: stagesOf(row),
      resultJson: view.result ? JSON.stringify(view.result, null, 2) : null,
      reasonText: view.feedback_unavailable_reason ? REASONS[view.feedback_unavailable_reason] : null,
      notice,
    }, status);
  }

  app.get<{ Params: { request_id: string } }>('/console/requests/:request_id', { schema: { hide: true }, preHandler: needSession }, async (request, reply) =>
    requestPage(request, reply, request.params.request_id, null),
  );

  app.post<{ Params: { request_id: string } }>('/console/requests/:request_id/feedback', { schema: { hide: true }, preHandler: needSession }, async (request, reply) => {
    const s = sessionOf(request);
    const id = request.params.request_id;
    if (!REQUEST_ID_PATTERN.test(id)) throw notFound();
    const form = FeedbackForm.safeParse(request.body);
    if (!form.success) throw new ConsolePageError(400, 'Bad request', 'Choose a rating.');
    const value = form.data.value === 'up' ? 1 : form.data.value === 'down' ? -1 : null;
    // In turn with the organization's API feedback calls (the same per-organization bound).
    const done = await ctx.feedbackGate.run(s.orgId, () => setFeedback(app.db, s.orgId, id, value)).catch((err: unknown) => {
      throw busy(err);
    });
    if (!done) throw notFound();
    if (!done.ok) return requestPage(request, reply, id, REASONS[done.reason] ?? 'This request cannot be rated.', 409);
    return reply.redirect(`/console/requests/${id}`, 303);
  });
}
