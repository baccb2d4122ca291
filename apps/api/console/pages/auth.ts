// Sign-in, sign-up, sign-out and the organization switcher.
import type { FastifyInstance } from 'fastify';
import { z } from 'zod';
import { findUserByEmail, firstMembership, AccountError } from '../../../../shared/accounts/users.ts';
import { verifyPassword } from '../../../../shared/accounts/passwords.ts';
import { deleteEndedWindows, releaseAttempt, reserveAttempt, reserveSignUp, settleSignUp, type SignUpLimits, type ThrottleLimits } from '../../../../shared/accounts/throttle.ts';
import { deleteExpiredSessions, signUp, switchOrg } from '../../../../shared/accounts/sessions.ts';
import { ConsolePageError, needSession, type ConsoleContext } from '../context.ts';
import { isAuthorizeReturn } from './oauth.ts';
import { isInvitationLink } from './invitations.ts';
import { addConnectionLink } from '../../../../shared/db/connections.ts';
import { clientAddress } from '../../services/client-address.ts';

const SignInForm = z.object({ _csrf: z.string(), email: z.string().max(254), password: z.string().max(1024), next: z.string().optional() });
const SignUpForm = z.object({ _csrf: z.string(), email: z.string().max(254), password: z.string().max(1024), organization: z.string().trim().min(1).max(100) });
const SwitchForm = z.object({ _csrf: z.string(), org_id: z.string().max(100) });

const WRONG = 'Wrong email or password.';

/** The sign-up form's field a refusal is about (marked aria-invalid, described by the alert). */
const SIGN_UP_FIELDS: Partial<Record<AccountError['code'], 'organization' | 'email' | 'password'>> = {
  invalid_name: 'organization',
  invalid_email: 'email',
  email_taken: 'email',
  weak_password: 'password',
};

/** A wait as a person reads it: minutes up to two hours, then hours. */
const waitText = (seconds: number) => {
  const minutes = Math.ceil(seconds / 60);
  return minutes <= 120 ? `${minutes} minute(s)` : `${Math.ceil(minutes / 60)} hour(s)`;
};

export default async function authPages(app: FastifyInstance, ctx: ConsoleContext) {
  const limits: ThrottleLimits = {
    windowMs: ctx.config.CONSOLE_SIGNIN_WINDOW_SECONDS * 1000,
    perIp: ctx.config.CONSOLE_SIGNIN_MAX_PER_IP,
    perEmail: ctx.config.CONSOLE_SIGNIN_MAX_PER_EMAIL,
  };
  const accounts: SignUpLimits = { windowMs: ctx.config.CONSOLE_SIGNUP_WINDOW_SECONDS * 1000, perIp: ctx.config.CONSOLE_SIGNUP_MAX_PER_IP };
  const signup = ctx.config.consoleSignup;

  const tooMany = (wait: number, what: 'sign-in' | 'sign-up' | 'accounts') =>
    new ConsolePageError(
      429,
      'Too many attempts',
      what === 'accounts'
        ? `Too many accounts were created from your network. Wait ${waitText(wait)} and try again, or ask an Owner of an existing organization to invite you.`
        : `Too many ${what} attempts. Wait ${waitText(wait)} and try again.`,
      { 'retry-after': String(wait) },
    );

  // `next`: only an OAuth authorization request (pages/oauth.ts), an invitation's link
  // (pages/invitations.ts) or an add-connection link (an access error's add_url), all paths on this
  // origin, is returned to after sign-in. Only printable ASCII, as every such path the service writes
  // is (percent-encoded): it becomes the Location header, where a control character or one beyond
  // Latin-1 (a decoded %01 or emoji in a crafted link) made Node throw, and the sign-in a bare 500.
  const nextOf = (v: unknown) => (typeof v === 'string' && /^[\x21-\x7e]+$/.test(v) && (isAuthorizeReturn(v) || isInvitationLink(v) || addConnectionLink(v)) ? v : null);
  app.get('/console/sign-in', { schema: { hide: true } }, async (request, reply) => {
    const next = nextOf((request.query as Record<string, unknown> | undefined)?.next);
    if (request.consoleSession) return reply.redirect(next ?? '/console', 303);
    return ctx.render(request, reply, 'sign-in.eta', { title: 'Sign in', email: '', error: null, signup, next });
  });

  app.post('/console/sign-in', { schema: { hide: true } }, async (request, reply) => {
    const form = SignInForm.safeParse(request.body);
    if (!form.success) return ctx.render(request, reply, 'sign-in.eta', { title: 'Sign in', email: '', error: WRONG, signup, next: null }, 400);
    const { email, password } = form.data;
    const next = nextOf(form.data.next);
    // Counted before the password is verified (given back if it is right), so a burst of
    // concurrent attempts cannot all pass the check before any of them is counted.
    const wait = await reserveAttempt(app.db, clientAddress(request), email, limits);
    if (wait > 0) throw tooMany(wait, 'sign-in');
    const user = await findUserByEmail(app.db, email);
    // Verified even when there is no such user (against a dummy hash): the same work either way.
    const ok = await verifyPassword(user?.password_hash ?? null, password);
    const home = ok && user ? await firstMembership(app.db, user.id) : undefined;
    if (!ok || !user || !home) {
      return ctx.render(request, reply, 'sign-in.eta', { title: 'Sign in', email, error: WRONG, signup, next }, 401);
    }
    await releaseAttempt(app.db, clientAddress(request), email);
    await ctx.sessions.start(request, reply, user.id, home.org_id);
    // Housekeeping of two small tables, on a few sign-ins rather than a scheduler of its own.
    if (Math.random() < 0.05) {
      await deleteExpiredSessions(app.db, ctx.sessions.times);
      await deleteEndedWindows(app.db, limits, accounts);
    }
    return reply.redirect(next ?? '/console', 303);
  });

  app.post('/console/sign-out', { schema: { hide: true } }, async (request, reply) => {
    await ctx.sessions.end(request, reply);
    return reply.redirect('/console/sign-in', 303);
  });

  app.post('/console/switch-org', { schema: { hide: true }, preHandler: needSession }, async (request, reply) => {
    const form = SwitchForm.safeParse(request.body);
    const id = ctx.sessions.sessionId(request);
    if (!form.success || !id || !(await switchOrg(app.db, id, form.data.org_id))) {
      throw new ConsolePageError(404, 'Not found', 'You are not a member of that organization.');
    }
    return reply.redirect('/console', 303);
  });

  app.get('/console/sign-up', { schema: { hide: true } }, async (request, reply) => {
    if (!signup) throw new ConsolePageError(404, 'Sign-up is closed', 'Ask an operator or an Owner of your organization for an account.');
    return ctx.render(request, reply, 'sign-up.eta', { title: 'Create an account', email: '', organization: '', error: null, invalid: null });
  });

  app.post('/console/sign-up', { schema: { hide: true } }, async (request, reply) => {
    if (!signup) throw new ConsolePageError(404, 'Sign-up is closed', 'Ask an operator or an Owner of your organization for an account.');
    const form = SignUpForm.safeParse(request.body);
    const fields = { title: 'Create an account', email: form.data?.email ?? '', organization: form.data?.organization ?? '' };
    if (!form.success) return ctx.render(request, reply, 'sign-up.eta', { ...fields, error: 'Fill in every field.', invalid: null }, 400);
    // Sign-up tells whether an address has an account (it must: the person needs to know why), so
    // its refusals count against the caller's address like failed sign-ins: no bulk probing of
    // addresses through the form that sign-in's throttle would otherwise have stopped.
    // Counted before the answer, like a sign-in (given back when the account is made), so a
    // concurrent burst of probes gets no more answers than the limit.
    // An account made counts too, in a budget of its own (CONSOLE_SIGNUP_MAX_PER_IP a day): each is
    // a new organization with CONSOLE_SIGNUP_CREDITS, which one address could otherwise collect
    // without end. Both are counted before the answer; the one that did not happen is given back.
    const ip = clientAddress(request);
    const held = await reserveSignUp(app.db, ip, limits, accounts);
    if (held.wait > 0) throw tooMany(held.wait, held.accounts ? 'accounts' : 'sign-up');
    let made: Awaited<ReturnType<typeof signUp>>;
    try {
      made = await signUp(app.db, { ...form.data, orgName: form.data.organization, credits: ctx.config.CONSOLE_SIGNUP_CREDITS });
    } catch (err) {
      await settleSignUp(app.db, ip, false);
      if (!(err instanceof AccountError)) throw err;
      // An address in use gets the same answer as any refusal would elsewhere: say what to do.
      const error = err.code === 'email_taken' ? 'That email cannot be used. Sign in instead, or use another address.' : `The ${err.message}.`;
      return ctx.render(request, reply, 'sign-up.eta', { ...fields, error, invalid: SIGN_UP_FIELDS[err.code] ?? null }, 400);
    }
    await settleSignUp(app.db, ip, true);
    await ctx.sessions.start(request, reply, made.user_id, made.org_id);
    return reply.redirect('/console', 303);
  });
}
