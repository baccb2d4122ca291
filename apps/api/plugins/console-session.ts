// Console sessions on the request: the cookie names and options, loading the session of a request,
// and starting/ending one. Registered only inside the console's scope (apps/api/console), so no API
// route ever looks at a cookie: a session is never an API or MCP credential.
import { createHmac, randomBytes, timingSafeEqual } from 'node:crypto';
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import { servesHttps, type Config } from '../../../shared/config.ts';
import { createSession, deleteSession, isSessionId, loadSession, type Session, type SessionTimes } from '../../../shared/accounts/sessions.ts';
import { ConsolePageError } from '../console/context.ts';
import { contentEncodingRefusal } from './content-encoding.ts';

declare module 'fastify' {
  interface FastifyRequest {
    /** The signed-in console user on the session's organization, or null. Console routes only. */
    consoleSession: Session | null;
  }
}

export interface CookiePolicy {
  session: string;
  csrf: string;
  secure: boolean;
}

/**
 * Browsers accept `__Host-` cookies only with Secure, and Secure cookies only from https origins; so
 * on an https base URL the cookies are `__Host-wqs_session` / `__Host-wqs_csrf` (Secure, Path=/, no
 * Domain), and on the plain-http embedded default they are `wqs_session` / `wqs_csrf` without Secure.
 */
export function cookiePolicy(config: Pick<Config, 'PUBLIC_BASE_URL'>): CookiePolicy {
  const secure = servesHttps(config);
  return secure ? { session: '__Host-wqs_session', csrf: '__Host-wqs_csrf', secure } : { session: 'wqs_session', csrf: 'wqs_csrf', secure };
}

/**
 * Form tokens of a signed-in browser: bound to its session, not to a cookie anyone who can set
 * cookies for this host could plant, and to the organization the session was in when the page was
 * made. `s.<salt>.<HMAC-SHA256 keyed by the session id over the organization and the salt>`: the
 * session id (32 random bytes, in an HttpOnly cookie; PostgreSQL holds only its SHA-256) is the
 * secret, so a token is worth nothing in another session and cannot be made without the id, and the
 * id cannot be read back from a token. The organization: a session switches organization in place
 * (same id), so a page of organization A still open in one tab must not act on B after another tab
 * switched to B (a key made, a member removed, someone invited, a connection's secret stored in the
 * organization the page was not about); such a form is void, like one from before the sign-in. A
 * fresh salt per page keeps the token from being the same bytes in every response (no compression
 * side channel learns it). The id is 43 characters, below
 * HMAC's 64-byte block, so it is the key as is (not its SHA-256, which the database holds).
 */
const SESSION_TOKEN_RE = /^s\.([A-Za-z0-9_-]{16})\.([A-Za-z0-9_-]{43})$/;
const sessionTokenMac = (sessionId: string, orgId: string, salt: string) =>
  createHmac('sha256', sessionId).update(`wqs console form v2\0${orgId}\0${salt}`).digest('base64url');

/** A form token of the session whose id is `sessionId`, while it is in organization `orgId`. */
export function sessionFormToken(sessionId: string, orgId: string): string {
  const salt = randomBytes(12).toString('base64url');
  return `s.${salt}.${sessionTokenMac(sessionId, orgId, salt)}`;
}

/** Whether `token` is a form token of the session `sessionId` made in organization `orgId` (compared in constant time). */
export function isSessionFormToken(sessionId: string, orgId: string, token: string): boolean {
  const m = SESSION_TOKEN_RE.exec(token);
  if (!m) return false;
  const want = Buffer.from(sessionTokenMac(sessionId, orgId, m[1]!));
  const got = Buffer.from(m[2]!);
  return got.length === want.length && timingSafeEqual(got, want);
}

/** A token of the shape session tokens have (whatever session it was made for). */
export const looksLikeSessionFormToken = (token: string) => SESSION_TOKEN_RE.test(token);

export const sessionTimes = (c: Pick<Config, 'CONSOLE_SESSION_IDLE_MINUTES' | 'CONSOLE_SESSION_MAX_HOURS'>): SessionTimes => ({
  idleMs: c.CONSOLE_SESSION_IDLE_MINUTES * 60_000,
  maxMs: c.CONSOLE_SESSION_MAX_HOURS * 3_600_000,
});

export function registerConsoleSession(app: FastifyInstance, config: Config) {
  const policy = cookiePolicy(config);
  const times = sessionTimes(config);
  const cookieOptions = { path: '/', httpOnly: true, sameSite: 'lax' as const, secure: policy.secure };
  app.decorateRequest('consoleSession', null);
  // The session cookie is a credential, checked as API keys are (services/credential-guard.ts):
  // lookups of sessions this process has not seen pass are bounded in flight, and failed ones per
  // client address (a flood of invented, well-formed cookies is refused before PostgreSQL; sessions
  // in use are spared). A cookie of no live session is cleared, so a browser does not keep
  // counting against its address with a session that expired.
  app.addHook('onRequest', async (request, reply) => {
    const id = request.cookies[policy.session];
    request.consoleSession = null;
    if (!id || !isSessionId(id)) return;
    const checked = await app.credentialGuard.check(request.ip, `console session ${id}`, async () => {
      const session = await loadSession(app.db, id, times);
      return session ? { ok: true as const, orgId: session.orgId, session } : { ok: false as const };
    });
    if (checked.ok) request.consoleSession = checked.session;
    else reply.clearCookie(policy.session, cookieOptions);
  });
  // A compressed form is refused (415) as on every route (plugins/content-encoding.ts), here as the
  // console's error page: the API's preParsing refusal would reach this scope's error handler as
  // an envelope error it does not know (a 500 page). onRequest, so before that hook runs; after the
  // session is loaded, so the page shows who is signed in. Browsers never compress a form.
  app.addHook('onRequest', async (request) => {
    if (!contentEncodingRefusal(request)) return;
    throw new ConsolePageError(415, 'Unsupported encoding', 'The form was sent compressed (Content-Encoding). Send it again as it is, without compression.');
  });
  return {
    policy,
    times,
    /** A fresh session id for every sign-in (the old one, if any, is deleted): no fixation. */
    async start(request: FastifyRequest, reply: FastifyReply, userId: string, orgId: string) {
      await deleteSession(app.db, request.cookies[policy.session]);
      const id = await createSession(app.db, userId, orgId, times);
      reply.setCookie(policy.session, id, { ...cookieOptions, maxAge: Math.floor(times.maxMs / 1000) });
      // Signed in, forms carry tokens of this session only (sessionFormToken); the signed-out CSRF
      // cookie has no use any more, and no token made with it is accepted from now on.
      reply.clearCookie(policy.csrf, cookieOptions);
    },
    async end(request: FastifyRequest, reply: FastifyReply) {
      await deleteSession(app.db, request.cookies[policy.session]);
      reply.clearCookie(policy.session, cookieOptions);
    },
    sessionId: (request: FastifyRequest) => request.cookies[policy.session],
    cookieOptions,
  };
}

export type ConsoleSessions = ReturnType<typeof registerConsoleSession>;
