// What every console page module gets: rendering inside the layout, the guards, the session helpers.
import type { FastifyReply, FastifyRequest } from 'fastify';
import type { Client } from '@temporalio/client';
import type { Config } from '../../../shared/config.ts';
import type { Db } from '../../../shared/db/pool.ts';
import type { Session } from '../../../shared/accounts/sessions.ts';
import { canManage, membershipsOf } from '../../../shared/accounts/users.ts';
import { escapeHtml } from '../../../shared/format/html.ts';
import type { ConsoleSessions } from '../plugins/console-session.ts';
import type { FeedbackGate } from '../routes/feedback.ts';
import { NAV } from './nav.ts';

/** A page answer other than 200: rendered by the console's error handler as an HTML page. */
export class ConsolePageError extends Error {
  constructor(
    readonly statusCode: number,
    readonly title: string,
    message: string,
    readonly headers: Record<string, string> = {},
  ) {
    super(message);
    this.name = 'ConsolePageError';
  }
}

/** The console's Content-Security-Policy; `formAction` is widened only where a form must leave the origin. */
export const consoleCsp = (formAction = "'self'") =>
  `default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; form-action ${formAction}; frame-ancestors 'none'; base-uri 'none'; connect-src 'self'`;

/**
 * The page answered when even the layout cannot be rendered (its database is unreachable): no
 * template, so escaped here. A title or message may carry request text (an OAuth client's id).
 */
export const barePage = (title: string, message: string) =>
  `<!doctype html><html lang="en"><title>${escapeHtml(title)}</title><main><h1>${escapeHtml(title)}</h1><p>${escapeHtml(message)}</p></main></html>`;

export const notFound = () => new ConsolePageError(404, 'Not found', 'There is nothing here for this organization.');

export interface ConsoleContext {
  config: Config;
  sessions: ConsoleSessions;
  /** The API's lazily connected Temporal client: the Workflows pages' test runs go through it. */
  temporal: () => Promise<Client>;
  /** The API's per-organization bound on feedback writes (routes/feedback.ts): the rating form takes its turn there too. */
  feedbackGate: FeedbackGate;
  render(request: FastifyRequest, reply: FastifyReply, view: string, data: Record<string, unknown>, status?: number): Promise<FastifyReply>;
}

/** The signed-in session of a request that passed `needSession` (the guard redirects otherwise). */
export function sessionOf(request: FastifyRequest): Session {
  if (!request.consoleSession) throw new ConsolePageError(401, 'Sign in', 'Sign in to use the console.');
  return request.consoleSession;
}

/** preHandler: no session → the sign-in page (an API key in Authorization opens nothing here). */
export async function needSession(request: FastifyRequest, reply: FastifyReply) {
  if (!request.consoleSession) return reply.redirect('/console/sign-in', 303);
}

/**
 * needSession for a page a link leads to (an invitation's, an access error's add_url): signed out,
 * sign in first and come back here when `returnable` accepts this URL (sign-in's `next` accepts
 * only the same shapes: pages/auth.ts).
 */
export function needSessionOrSignIn(returnable: (url: string) => unknown) {
  return async (request: FastifyRequest, reply: FastifyReply) => {
    if (request.consoleSession) return;
    const next = returnable(request.url) ? `?next=${encodeURIComponent(request.url)}` : '';
    return reply.redirect(`/console/sign-in${next}`, 303);
  };
}

/** preHandler after needSession: Owners and Administrators only; a Member gets the 403 page. */
export async function needManager(request: FastifyRequest) {
  const s = request.consoleSession;
  if (s && !canManage(s.role)) {
    throw new ConsolePageError(403, 'Not allowed', 'Only Owners and Administrators of this organization can open this page.');
  }
}

/** The layout's data: who is signed in, the organizations they can switch to, the nav for their role. */
export async function layoutData(request: FastifyRequest, db: Db) {
  const s = request.consoleSession;
  if (!s) return { session: null, orgs: [], nav: [] };
  const orgs = await membershipsOf(db, s.userId);
  const path = request.url.split('?')[0]!;
  const nav = NAV.filter((n) => !n.managersOnly || canManage(s.role)).map((n) => ({
    ...n,
    current: n.href === '/console' ? path === '/console' : path === n.href || path.startsWith(`${n.href}/`),
  }));
  return { session: s, orgs, nav };
}

/** Dates as the console shows them: minute precision, UTC, stable in screenshots and tests. */
export function when(d: Date | string | null | undefined): string {
  if (!d) return '—';
  const date = typeof d === 'string' ? new Date(d) : d;
  return `${date.toISOString().slice(0, 16).replace('T', ' ')} UTC`;
}

export const ROLE_LABELS = { owner: 'Owner', admin: 'Administrator', member: 'Member' } as const;
