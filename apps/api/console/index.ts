// The web console (/console): server-rendered pages on the same database as the API, in a scope of
// their own. Cookies, form bodies, CSRF and HTML error pages exist only inside this scope: no API
// route parses a cookie or a form, and no console route accepts an API key.
import fs from 'node:fs/promises';
import { createRequire } from 'node:module';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import type { FastifyError, FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import type { Client } from '@temporalio/client';
import cookie from '@fastify/cookie';
import formbody from '@fastify/formbody';
import csrf from '@fastify/csrf-protection';
import view from '@fastify/view';
import { Eta } from 'eta';
import type { Config } from '../../../shared/config.ts';
import type { FeedbackGate } from '../routes/feedback.ts';
import { isDatabaseUnavailable } from '../../../shared/db/unavailable.ts';
import { ERRORS, ServiceError } from '../../../shared/errors.ts';
import { isSessionFormToken, looksLikeSessionFormToken, registerConsoleSession, sessionFormToken } from '../plugins/console-session.ts';
import { ConsolePageError, barePage, consoleCsp, layoutData, when, ROLE_LABELS, type ConsoleContext } from './context.ts';
import { PAGES } from './pages/index.ts';
import { shownText } from '../../../shared/accounts/display-text.ts';
import { holdsNul } from '../../../shared/nul.ts';

const here = path.dirname(fileURLToPath(import.meta.url));
const require = createRequire(import.meta.url);

/** A form's CSRF token: only the form field (the console has no script that would send a header). */
function formToken(request: FastifyRequest): string {
  const body = request.body as Record<string, unknown> | undefined;
  return typeof body?._csrf === 'string' ? body._csrf : '';
}

const FORM_EXPIRED = { title: 'Form expired', message: 'This form is no longer valid. Go back, reload the page and send it again.' };
const formExpired = () => new ConsolePageError(403, FORM_EXPIRED.title, FORM_EXPIRED.message);

export default async function consolePlugin(app: FastifyInstance, opts: { config: Config; temporal: () => Promise<Client>; feedbackGate: FeedbackGate }) {
  await app.register(cookie);
  // Pages post url-encoded forms, nothing else: the API's JSON parser (inherited from the root) threw
  // its envelope error here, which this scope's error handler answered with a 500 page (and an
  // error in the log) for any JSON body someone sent, sign-in included. Another type is now 415.
  app.removeContentTypeParser('application/json');
  await app.register(formbody, { bodyLimit: 64 * 1024 });
  const sessions = registerConsoleSession(app, opts.config);
  await app.register(csrf, {
    cookieKey: sessions.policy.csrf,
    cookieOpts: sessions.cookieOptions,
    getToken: formToken,
  });
  await app.register(view, {
    engine: { eta: new Eta({ autoEscape: true, autoTrim: [false, 'nl'] }) },
    root: path.join(here, 'views'),
    layout: 'layout.eta',
    // `shown`: names others chose (organizations, OAuth clients) with direction and invisible characters made visible.
    defaultContext: { when, ROLE_LABELS, shown: shownText },
  });

  // A NUL in any field or query parameter is refused before a page reads it: PostgreSQL text cannot
  // hold one, so a form or link carrying one (an email, an organization or client id) ended in a
  // 500 page and an error in the log. No person types one; the API's own routes refuse it alike.
  app.addHook('preValidation', async (request) => {
    for (const part of [request.query, request.body, request.params]) {
      if (holdsNul(part)) throw new ConsolePageError(400, 'Bad request', 'The request contains a character that cannot be used (NUL).');
    }
  });

  // Every state-changing form carries a token. Signed in, only a token of this session counts: a
  // token bound to a cookie (all a browser without a session has) is refused, so whoever can plant
  // cookies for this host (a sibling subdomain, plain http on the way) cannot forge a signed-in
  // form, and a form from before the sign-in is void after it. The token names the organization
  // too: a page of another organization (before a switch in another tab) acts on nothing. Signed
  // out (sign-in, sign-up): a token bound to the HttpOnly CSRF cookie (`__Host-` on https).
  app.addHook('preHandler', (request, reply, done) => {
    if (request.method !== 'POST') return done();
    const token = formToken(request);
    if (request.consoleSession) {
      return isSessionFormToken(sessions.sessionId(request)!, request.consoleSession.orgId, token) ? done() : done(formExpired());
    }
    // A signed-in form whose session has ended (signed out, expired): nothing is done; sign in again,
    // as a page of that form would have said.
    if (looksLikeSessionFormToken(token)) return void reply.redirect('/console/sign-in', 303);
    app.csrfProtection(request, reply, done);
  });
  app.addHook('onSend', async (_request, reply) => {
    if (!reply.hasHeader('cache-control')) reply.header('cache-control', 'no-store');
    reply.header('x-frame-options', 'DENY');
    reply.header('referrer-policy', 'same-origin');
    reply.header('x-content-type-options', 'nosniff');
    // A page may widen form-action (the OAuth consent form answers with a redirect to its client).
    if (!reply.hasHeader('content-security-policy')) reply.header('content-security-policy', consoleCsp());
  });

  const ctx: ConsoleContext = {
    config: opts.config,
    sessions,
    temporal: opts.temporal,
    feedbackGate: opts.feedbackGate,
    async render(request, reply, viewName, data, status = 200) {
      const layout = await layoutData(request, app.db);
      // Signed in: a token of the session in its organization; signed out: one of the CSRF cookie
      // (set here if missing).
      const id = request.consoleSession ? sessions.sessionId(request) : undefined;
      const csrf = id ? sessionFormToken(id, request.consoleSession!.orgId) : reply.generateCsrf();
      const page = { ...layout, csrf, path: request.url, ...data };
      return reply.code(status).type('text/html; charset=utf-8').view(viewName, page);
    },
  };

  app.setErrorHandler(async (error: FastifyError | ConsolePageError, request, reply) => {
    let status = 500;
    let title = 'Something went wrong';
    let message = 'The console could not answer. Try again in a moment.';
    if (error instanceof ConsolePageError) {
      ({ statusCode: status, title, message } = error);
      reply.headers(error.headers);
    } else if (error.code === 'FST_CSRF_INVALID_TOKEN' || error.code === 'FST_CSRF_MISSING_SECRET') {
      status = 403;
      ({ title, message } = FORM_EXPIRED);
    } else if (error instanceof ServiceError) {
      if (error.code !== 'authentication_rate_limited' && error.code !== 'api_key_verification_unavailable') {
        request.log.error({ err: error }, 'console page failed');
        return renderError(request, reply, status, title, message);
      }
      // The session cookie's check (plugins/console-session.ts, bounded like an API key's).
      status = ERRORS[error.code].status;
      reply.headers(error.headers ?? {});
      const retry = error.headers?.['retry-after'];
      const after = retry ? `Try again in ${retry} second${retry === '1' ? '' : 's'}.` : 'Try again in a moment.';
      if (error.code === 'authentication_rate_limited') {
        title = 'Too many attempts';
        message = `Too many requests from your network carried a sign-in that is not valid. ${after}`;
      } else {
        title = 'Temporarily unavailable';
        message = `Sign-ins cannot be checked right now. ${after}`;
      }
    } else if (isDatabaseUnavailable(error)) {
      status = 503;
      title = 'Temporarily unavailable';
      message = 'The console cannot reach its database right now. Try again in a moment.';
      reply.header('retry-after', '5');
    } else if (typeof error.statusCode === 'number' && error.statusCode >= 400 && error.statusCode < 500) {
      status = error.statusCode;
      // Fastify's own refusals before a page runs: say which part of the request was wrong.
      if (status === 415) {
        title = 'Unsupported form type';
        message = 'Console forms are sent as application/x-www-form-urlencoded. Go back, reload the page and send the form from it.';
      } else if (status === 413) {
        title = 'Form too large';
        message = 'The form is larger than the console takes. Go back and send a shorter one.';
      } else {
        title = 'Bad request';
        message = 'The request could not be understood.';
      }
    } else {
      request.log.error({ err: error }, 'console page failed');
    }
    return renderError(request, reply, status, title, message);
  });

  async function renderError(request: FastifyRequest, reply: FastifyReply, status: number, title: string, message: string) {
    try {
      return await ctx.render(request, reply, 'error.eta', { title, message }, status);
    } catch {
      // The layout itself needs the database; answer a bare page rather than nothing.
      return reply.code(status).type('text/html; charset=utf-8').send(barePage(title, message));
    }
  }

  // Assets from this origin: the stylesheet and htmx (read once from the installed package).
  const css = await fs.readFile(path.join(here, 'assets', 'console.css'));
  const htmx = await fs.readFile(require.resolve('htmx.org/dist/htmx.min.js'));
  app.get('/console/assets/console.css', { schema: { hide: true } }, async (_q, reply) =>
    reply.type('text/css; charset=utf-8').header('cache-control', 'public, max-age=3600').send(css),
  );
  app.get('/console/assets/htmx.min.js', { schema: { hide: true } }, async (_q, reply) =>
    reply.type('text/javascript; charset=utf-8').header('cache-control', 'public, max-age=3600').send(htmx),
  );

  for (const page of PAGES) await page(app, ctx);
}
