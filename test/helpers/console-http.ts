// A browser-like HTTP client for the console (a cookie jar, forms with their CSRF token, no
// redirects followed), and fixtures: an organization with a console user of a given role.
import { createUserInOrg, type Role } from '../../shared/accounts/users.ts';
import { db, newOrg, stack } from './stack.ts';

export interface Page {
  status: number;
  headers: Headers;
  text: string;
  location: string | null;
  setCookies: string[];
}

export class ConsoleClient {
  readonly cookies = new Map<string, string>();
  constructor(readonly baseUrl: string = stack().baseUrl) {}

  private cookieHeader() {
    return [...this.cookies].map(([k, v]) => `${k}=${v}`).join('; ');
  }

  async request(method: string, path: string, init: { form?: Record<string, string>; headers?: Record<string, string> } = {}): Promise<Page> {
    const headers: Record<string, string> = { ...init.headers };
    if (this.cookies.size) headers.cookie = this.cookieHeader();
    let body: string | undefined;
    if (init.form) {
      headers['content-type'] = 'application/x-www-form-urlencoded';
      body = new URLSearchParams(init.form).toString();
    }
    const res = await fetch(`${this.baseUrl}${path}`, { method, headers, body, redirect: 'manual' });
    const setCookies = res.headers.getSetCookie();
    for (const c of setCookies) {
      const [pair = '', ...attrs] = c.split(';');
      const name = pair.slice(0, pair.indexOf('='));
      const value = pair.slice(pair.indexOf('=') + 1);
      const expired = attrs.some((a) => /^\s*expires=Thu, 01 Jan 1970/i.test(a)) || value === '';
      if (expired) this.cookies.delete(name);
      else this.cookies.set(name, value);
    }
    return { status: res.status, headers: res.headers, text: await res.text(), location: res.headers.get('location'), setCookies };
  }

  get = (path: string, headers?: Record<string, string>) => this.request('GET', path, { headers });

  /** The CSRF token of the first form on a page. */
  async token(path: string): Promise<string> {
    const page = await this.get(path);
    const m = /name="_csrf" value="([^"]+)"/.exec(page.text);
    if (!m) throw new Error(`no form token on ${path} (status ${page.status})`);
    return m[1]!;
  }

  /** Post a form with a fresh token read from `from` (the page that shows the form). */
  async submit(from: string, action: string, form: Record<string, string>): Promise<Page> {
    return this.request('POST', action, { form: { _csrf: await this.token(from), ...form } });
  }

  async signIn(email: string, password: string): Promise<Page> {
    return this.submit('/console/sign-in', '/console/sign-in', { email, password });
  }
}

export const PASSWORD = 'correct horse battery staple';

/** A new organization (with credits and its API key) and a console user of `role` in it. */
export async function orgWithUser(role: Role = 'owner', credits = 100) {
  const org = await newOrg(credits, 'Console org');
  const email = `${role}-${Math.random().toString(36).slice(2, 10)}@example.com`;
  const user = await createUserInOrg(db(), { email, password: PASSWORD, orgId: org.org_id, role });
  return { org, email, userId: user.user_id, password: PASSWORD };
}

/** A signed-in client for a new user of `role` in `orgId` (or a new organization). */
export async function signedIn(role: Role = 'owner', orgId?: string, baseUrl?: string) {
  let fixture: Awaited<ReturnType<typeof orgWithUser>>;
  if (orgId) {
    const email = `${role}-${Math.random().toString(36).slice(2, 10)}@example.com`;
    const user = await createUserInOrg(db(), { email, password: PASSWORD, orgId, role });
    fixture = { org: { org_id: orgId } as Awaited<ReturnType<typeof newOrg>>, email, userId: user.user_id, password: PASSWORD };
  } else fixture = await orgWithUser(role);
  const client = new ConsoleClient(baseUrl);
  const res = await client.signIn(fixture.email, PASSWORD);
  if (res.status !== 303) throw new Error(`sign-in failed: ${res.status} ${res.text.slice(0, 200)}`);
  return { client, ...fixture };
}
