// Console sessions on the request: the cookie names and options, loading the session of a request,
// and starting/ending one. Registered only inside the console's scope (apps/api/console), so no API
// route ever looks at a cookie: a session is never an API or MCP credential.
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import type { Config } from '../../../shared/config.ts';
import { createSession, deleteSession, loadSession, type Session, type SessionTimes } from '../../../shared/accounts/sessions.ts';

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
  const secure = (config.PUBLIC_BASE_URL ?? '').toLowerCase().startsWith('https:');
  return secure ? { session: '__Host-wqs_session', csrf: '__Host-wqs_csrf', secure } : { session: 'wqs_session', csrf: 'wqs_csrf', secure };
}

export const sessionTimes = (c: Pick<Config, 'CONSOLE_SESSION_IDLE_MINUTES' | 'CONSOLE_SESSION_MAX_HOURS'>): SessionTimes => ({
  idleMs: c.CONSOLE_SESSION_IDLE_MINUTES * 60_000,
  maxMs: c.CONSOLE_SESSION_MAX_HOURS * 3_600_000,
});

export function registerConsoleSession(app: FastifyInstance, config: Config) {
  const policy = cookiePolicy(config);
  const times = sessionTimes(config);
  const cookieOptions = { path: '/', httpOnly: true, sameSite: 'lax' as const, secure: policy.secure };
  app.decorateRequest('consoleSession', null);
  app.addHook('onRequest', async (request) => {
    request.consoleSession = await loadSession(app.db, request.cookies[policy.session], times);
  });
  return {
    policy,
    times,
    /** A fresh session id for every sign-in (the old one, if any, is deleted): no fixation. */
    async start(request: FastifyRequest, reply: FastifyReply, userId: string, orgId: string) {
      await deleteSession(app.db, request.cookies[policy.session]);
      const id = await createSession(app.db, userId, orgId, times);
      reply.setCookie(policy.session, id, { ...cookieOptions, maxAge: Math.floor(times.maxMs / 1000) });
      // A new CSRF secret too: tokens from before the sign-in are void.
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
