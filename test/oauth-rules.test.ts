// The pure rules of MCP sign-in with OAuth: redirect URIs (registration and matching), client-id
// URLs of metadata documents, and PKCE S256 (checked against RFC 7636's own example).
import { describe, expect, it } from 'vitest';
import { redirectUriMatches, redirectUriProblem } from '../shared/oauth/clients.ts';
import { FailureCache, isClientIdUrl } from '../shared/oauth/client-documents.ts';
import { pkceMatches } from '../shared/oauth/secrets.ts';
import { isAuthorizeReturn } from '../apps/api/console/pages/oauth.ts';

describe('redirect URIs', () => {
  it('registers https and loopback http only, without fragments or credentials', () => {
    for (const ok of ['https://app.example/cb', 'http://127.0.0.1:8080/cb', 'http://[::1]/cb', 'http://localhost:3000/cb?x=1']) expect(redirectUriProblem(ok), ok).toBeNull();
    for (const bad of ['http://app.example/cb', 'http://127.0.0.2.nip.io/cb', 'https://app.example/cb#x', 'https://u:p@app.example/cb', 'javascript:alert(1)', 'cb', 'custom-scheme://cb']) {
      expect(redirectUriProblem(bad), bad).not.toBeNull();
    }
  });

  it('match exactly; a loopback URI may change only its port', () => {
    const reg = ['https://app.example/cb', 'http://127.0.0.1:33418/callback'];
    expect(redirectUriMatches(reg, 'https://app.example/cb')).toBe(true);
    expect(redirectUriMatches(reg, 'https://app.example/cb/')).toBe(false);
    expect(redirectUriMatches(reg, 'https://app.example:444/cb')).toBe(false);
    expect(redirectUriMatches(reg, 'http://127.0.0.1:5000/callback')).toBe(true);
    expect(redirectUriMatches(reg, 'http://127.0.0.1:5000/callback?x=1')).toBe(false);
    expect(redirectUriMatches(reg, 'http://127.0.0.1:5000/other')).toBe(false);
    expect(redirectUriMatches(reg, 'http://localhost:33418/callback')).toBe(false);
    expect(redirectUriMatches(reg, 'https://127.0.0.1:33418/callback')).toBe(false);
    expect(redirectUriMatches(reg, 'http://127.0.0.1:5000/callback#x')).toBe(false);
    expect(redirectUriMatches(reg, 'http://127.0.0.1:33418/callback#')).toBe(false);
    expect(redirectUriMatches(reg, 'http://u:p@127.0.0.1:5000/callback')).toBe(false);
  });
});

describe('client-id URLs and sign-in returns', () => {
  it('a metadata-document client id is an https URL with a path', () => {
    expect(isClientIdUrl('https://client.example/oauth/client.json')).toBe(true);
    for (const bad of ['https://client.example', 'https://client.example/', 'http://client.example/c.json', 'mcpc_abc', 'https://client.example/c.json#x']) expect(isClientIdUrl(bad), bad).toBe(false);
  });

  it('sign-in returns only to an authorization request on this origin', () => {
    expect(isAuthorizeReturn('/console/oauth/authorize?client_id=x')).toBe(true);
    for (const bad of ['https://evil.example/console/oauth/authorize?x', '//evil.example/console/oauth/authorize?', '/console/keys', '/console/oauth/authorize?\r\nSet-Cookie: x', 42]) {
      expect(isAuthorizeReturn(bad), String(bad)).toBe(false);
    }
  });
});

describe('PKCE S256', () => {
  it("accepts RFC 7636 appendix B's pair and refuses anything else", () => {
    const verifier = 'dBjftJeZ4CVP-mB92K27uhbUJU1p1r_wW1gFWFOEjXk';
    const challenge = 'E9Melhoa2OwvFrEMTJguCHaoeK1t8URWbuGJSstw-cM';
    expect(pkceMatches(verifier, challenge)).toBe(true);
    expect(pkceMatches(verifier.replace('d', 'e'), challenge)).toBe(false);
    expect(pkceMatches(verifier, challenge.slice(0, -1))).toBe(false);
    expect(pkceMatches('short', challenge)).toBe(false);
  });
});

describe('the failed-fetch cache of metadata documents', () => {
  it('answers a failure until its time is up, and keeps at most its bound of entries (least recently used go first)', () => {
    const cache = new FailureCache(60_000, 3);
    cache.set('https://a.example/c.json', 'a failed', 1_000);
    expect(cache.get('https://a.example/c.json', 60_999)).toBe('a failed');
    expect(cache.get('https://a.example/c.json', 61_000)).toBeUndefined();
    expect(cache.size).toBe(0); // an expired entry is dropped when looked at
    for (const k of ['a', 'b', 'c']) cache.set(`https://${k}.example/c.json`, `${k} failed`, 1_000);
    expect(cache.get('https://a.example/c.json', 2_000)).toBe('a failed'); // a is now the most recent
    cache.set('https://d.example/c.json', 'd failed', 2_000);
    expect(cache.size).toBe(3);
    expect(cache.get('https://b.example/c.json', 2_000)).toBeUndefined();
    for (const k of ['a', 'c', 'd']) expect(cache.get(`https://${k}.example/c.json`, 2_000)).toBe(`${k} failed`);
    for (let i = 0; i < 100; i++) cache.set(`https://e.example/${i}.json`, 'e', 3_000);
    expect(cache.size).toBe(3);
  });
});
