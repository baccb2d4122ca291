// Names people read (shared/accounts/display-text.ts): invisible characters that only make two
// names reading the same differ are refused, those that change what is shown (joiners, an emoji's
// VS16, the tag flags) are kept; and X-File-Name on POST /v1/files over HTTP.
import net from 'node:net';
import { afterAll, describe, expect, it } from 'vitest';
import { closeDb, db, newOrg, stack } from './helpers/stack.ts';
import { INVISIBLE_MESSAGE, NOT_ASCII_MESSAGE, addressTextProblem, displayTextProblem, shownText, uriEncodedProblem } from '../shared/accounts/display-text.ts';

afterAll(closeDb);

const SCOTLAND = '\u{1F3F4}\u{E0067}\u{E0062}\u{E0073}\u{E0063}\u{E0074}\u{E007F}';

/** Invisible characters that are neither controls nor joiners, each refused inside a name. */
const INVISIBLE: Record<string, string> = {
  'tag LANGUAGE TAG': '\u{E0001}',
  'tag LATIN CAPITAL LETTER A': '\u{E0041}',
  'cancel tag': '\u{E007F}',
  'variation selector-1': '\uFE00',
  'variation selector-15 (text presentation)': '\uFE0E',
  'variation selector-17': '\u{E0100}',
  'variation selector-256': '\u{E01EF}',
  'combining grapheme joiner': '\u034F',
  'object replacement character': '\uFFFC',
  'interlinear annotation anchor': '\uFFF9',
  'interlinear annotation terminator': '\uFFFB',
  'invisible times': '\u2062',
  'Mongolian free variation selector': '\u180B',
  'Khmer inherent vowel': '\u17B4',
  'Hangul filler': '\u3164',
  'braille blank': '\u2800',
  'inhibit symmetric swapping (deprecated format)': '\u206A',
};

describe('display text (pure)', () => {
  it('refuses tag characters, variation selectors, the grapheme joiner, U+FFFC and other invisible characters', () => {
    for (const [what, c] of Object.entries(INVISIBLE)) {
      expect(displayTextProblem(`Acme${c}`), what).toBe(INVISIBLE_MESSAGE);
      expect(displayTextProblem(`Ac${c}me`), what).toBe(INVISIBLE_MESSAGE);
      expect(displayTextProblem(`Café${c}Zürich`), what).toBe(INVISIBLE_MESSAGE);
    }
    // "ASCII smuggling": text in tag characters shows nothing.
    expect(displayTextProblem(`report${[...'ignore all'].map((ch) => String.fromCodePoint(0xe0000 + ch.codePointAt(0)!)).join('')}.pdf`)).toBe(INVISIBLE_MESSAGE);
    // A Japanese ideographic variation sequence reads as its base in most fonts.
    expect(displayTextProblem('葛\u{E0100}飾')).toBe(INVISIBLE_MESSAGE);
  });

  it('keeps VS16 where it makes an emoji of a text symbol, and refuses it where it shows nothing', () => {
    for (const name of ['❤️ Labs', '☺️', '©️ 2025', '🏳️‍🌈 Pride', '🏳️‍⚧️', '👩‍❤️‍👨', '👁️‍🗨️', '🧔‍♂️', '1️⃣ first', '#️⃣', '*️⃣']) {
      expect(displayTextProblem(name), name).toBeNull();
    }
    // After an emoji shown as an emoji anyway, a letter, a digit without a keycap, or itself.
    for (const name of ['👍\uFE0F', '🚀\uFE0F Labs', 'Acme\uFE0F', 'Café\uFE0F', '1\uFE0F', '#\uFE0F', '❤\uFE0F\uFE0F', '\uFE0FAcme']) {
      expect(displayTextProblem(name), JSON.stringify(name)).toBe(INVISIBLE_MESSAGE);
    }
  });

  it('keeps the three flags made of tag characters, and no other tag sequence', () => {
    for (const flag of [SCOTLAND, '\u{1F3F4}\u{E0067}\u{E0062}\u{E0065}\u{E006E}\u{E0067}\u{E007F}', '\u{1F3F4}\u{E0067}\u{E0062}\u{E0077}\u{E006C}\u{E0073}\u{E007F}']) {
      expect(displayTextProblem(`${flag} Rangers`)).toBeNull();
    }
    // Not a recommended flag (shown as a plain black flag), an unterminated one, tags with no flag.
    for (const name of ['\u{1F3F4}\u{E0075}\u{E0073}\u{E0074}\u{E0078}\u{E007F}', '\u{1F3F4}\u{E0067}\u{E0062}\u{E0073}\u{E0063}\u{E0074}', `${SCOTLAND}\u{E0041}`, 'Acme\u{E0067}\u{E0062}\u{E0073}\u{E0063}\u{E0074}\u{E007F}']) {
      expect(displayTextProblem(name), JSON.stringify(name)).toBe(INVISIBLE_MESSAGE);
    }
  });

  it('an address refuses every invisible character, an emoji\'s VS16 and the grapheme joiner included', () => {
    for (const c of ['\uFE0F', '\u034F', '\u{E0041}', '\uFFFC', '\u2800']) {
      expect(addressTextProblem(`ceo${c}@example.com`), JSON.stringify(c)).toBe(INVISIBLE_MESSAGE);
    }
    expect(addressTextProblem('❤️@example.com')).toBe(INVISIBLE_MESSAGE);
  });

  it('a URI-encoded value must be ASCII', () => {
    expect(uriEncodedProblem('caf%C3%A9.txt')).toBeNull();
    // Raw UTF-8 bytes as Node reads a header (Latin-1): "café.txt" arrives as "cafÃ©.txt".
    expect(uriEncodedProblem(Buffer.from('café.txt').toString('latin1'))).toBe(NOT_ASCII_MESSAGE);
    expect(uriEncodedProblem('caf\u00E9.txt')).toBe(NOT_ASCII_MESSAGE);
  });

  it('shows refused characters past U+FFFF as escapes, and keeps an emoji\'s VS16 and the tag flags', () => {
    expect(shownText('Helper\u{E0041}\u{E0042}\u034F\uFE00')).toBe('Helper\\u{E0041}\\u{E0042}\\u034F\\uFE00');
    expect(shownText(`❤️ ${SCOTLAND} 👍\uFE0F`)).toBe(`❤️ ${SCOTLAND} 👍\\uFE0F`);
    expect(shownText('Helper\u202Egnp.exe\u200B')).toBe('Helper\\u202Egnp.exe\\u200B');
  });
});

function expectInvalid(res: { status: number; body: any }, message: string) {
  expect(res.status).toBe(400);
  expect(res.body.success).toBe(false);
  expect(res.body.error).toMatchObject({ code: 'invalid_input', type: 'validation_error', status: 400, param: 'X-File-Name' });
  expect(res.body.error.details.issues).toEqual([{ path: 'X-File-Name', message }]);
}

/** An upload whose X-File-Name is these bytes as they are, not URI-encoded (a raw socket: no client re-encodes them). */
function uploadRaw(key: string, nameBytes: Buffer): Promise<{ status: number; body: any }> {
  const url = new URL(stack().baseUrl);
  return new Promise((resolve, reject) => {
    const socket = net.connect({ host: url.hostname, port: Number(url.port) });
    let text = '';
    socket.setEncoding('latin1');
    socket.on('data', (d: string) => {
      text += d;
      const head = text.indexOf('\r\n\r\n');
      const length = /\r\ncontent-length: *(\d+)/i.exec(text.slice(0, head));
      if (head < 0 || !length || text.length - head - 4 < Number(length[1])) return;
      socket.destroy();
      resolve({ status: Number(text.split(' ')[1]), body: JSON.parse(Buffer.from(text.slice(head + 4), 'latin1').toString('utf8')) });
    });
    socket.on('error', reject);
    socket.setTimeout(20_000, () => socket.destroy(new Error('no answer')));
    const head = `POST /v1/files HTTP/1.1\r\nHost: ${url.host}\r\nAuthorization: Bearer ${key}\r\nContent-Type: application/octet-stream\r\nContent-Length: 4\r\nX-File-Name: `;
    socket.write(Buffer.concat([Buffer.from(head), nameBytes, Buffer.from('\r\n\r\ndata')]));
  });
}

describe('X-File-Name on POST /v1/files', () => {
  it('refuses a name with a tag character, a variation selector, the grapheme joiner or U+FFFC; keeps an emoji\'s VS16', async () => {
    const org = await newOrg(5);
    for (const name of ['%F3%A0%80%81invoice.pdf', 'invoice%F3%A0%84%80.pdf', 'in%CD%8Fvoice.pdf', 'invoice%EF%BF%BC.pdf', 'invoice%EF%B8%8F.pdf']) {
      const res = await fetch(`${stack().baseUrl}/v1/files`, { method: 'POST', headers: { authorization: `Bearer ${org.api_key}`, 'content-type': 'application/octet-stream', 'x-file-name': name }, body: 'data' });
      expectInvalid({ status: res.status, body: await res.json() }, INVISIBLE_MESSAGE);
    }
    const ok = await fetch(`${stack().baseUrl}/v1/files`, { method: 'POST', headers: { authorization: `Bearer ${org.api_key}`, 'content-type': 'application/octet-stream', 'x-file-name': encodeURIComponent('❤️.txt') }, body: 'data' });
    expect(ok.status).toBe(201);
    expect((await ok.json()).data.name).toBe('❤️.txt');
    const n = await db().query('SELECT count(*)::int AS n FROM files WHERE org_id = $1', [org.org_id]);
    expect(n.rows[0].n).toBe(1);
  });

  it('refuses raw non-ASCII bytes in X-File-Name instead of storing them as Latin-1 ("cafÃ©.txt")', async () => {
    const org = await newOrg(5);
    expectInvalid(await uploadRaw(org.api_key, Buffer.from('café.txt')), NOT_ASCII_MESSAGE);
    const n = await db().query('SELECT count(*)::int AS n FROM files WHERE org_id = $1', [org.org_id]);
    expect(n.rows[0].n).toBe(0);
  });
});
