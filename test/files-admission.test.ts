// What uploads in progress may hold of an API process (POST /v1/files): one organization's share
// of the process's in-flight bytes, the idle timeout that frees what a silent sender holds, the
// storage quota checked before the body is read, and an upload's slot kept while its file is
// stored even when its client has left. An API process of this file's own, with a short idle
// timeout and a small file quota; everything else at its defaults.
import net from 'node:net';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { loadConfig, filesUploadBytesPerOrg } from '../shared/config.ts';
import { closeDb, db, newOrg, sleep, stack, until } from './helpers/stack.ts';
import { processPool } from './helpers/processes.ts';
import { openUpload } from './helpers/open-upload.ts';

const MIB = 1024 * 1024;
const MB10 = 10 * MIB;
const IDLE_MS = 2_000;
const MAX_FILES = 6;

const s = () => stack();
const pool = processPool(() => ({ databaseUrl: s().databaseUrl, temporalAddress: s().temporalAddress, hostMap: s().hostMap, taskQueue: 'files-admission-unused' }));
let url = '';
beforeAll(async () => {
  const api = await pool.spawn('api', {
    databaseUrl: s().databaseUrl,
    temporalAddress: s().temporalAddress,
    hostMap: s().hostMap,
    taskQueue: 'files-admission-unused',
    env: { WQS_SKIP_MIGRATIONS: '1', FILES_UPLOAD_IDLE_TIMEOUT_MS: String(IDLE_MS), FILES_MAX_PER_ORG: String(MAX_FILES) },
  });
  url = String(api.started.url);
});
afterAll(async () => {
  await pool.killAll();
  await closeDb();
});

async function upload(key: string, bytes: Buffer) {
  const res = await fetch(`${url}/v1/files`, {
    method: 'POST',
    headers: { authorization: `Bearer ${key}`, 'content-type': 'application/octet-stream', 'x-file-name': 'f.bin' },
    body: new Uint8Array(bytes),
  });
  const text = await res.text();
  return { status: res.status, headers: res.headers, body: JSON.parse(text), text };
}

const countFiles = async (orgId: string) => (await db().query('SELECT count(*)::int AS n FROM files WHERE org_id = $1', [orgId])).rows[0].n as number;

describe('uploads in flight', () => {
  it('settings: an organization takes a quarter of the process bound by default, at least 10 MiB, at most the bound; uploads idle 10 s are cut', () => {
    const c = loadConfig({});
    expect(c.FILES_UPLOAD_IDLE_TIMEOUT_MS).toBe(10_000);
    expect(filesUploadBytesPerOrg(c)).toBe(16 * MIB);
    expect(filesUploadBytesPerOrg(loadConfig({ FILES_UPLOADS_IN_FLIGHT_MAX_BYTES: String(20 * MIB) }))).toBe(MB10);
    expect(filesUploadBytesPerOrg(loadConfig({ FILES_UPLOADS_IN_FLIGHT_MAX_BYTES_PER_ORG: String(12 * MIB) }))).toBe(12 * MIB);
    expect(() => loadConfig({ FILES_UPLOADS_IN_FLIGHT_MAX_BYTES_PER_ORG: String(MB10 - 1) })).toThrow(/FILES_UPLOADS_IN_FLIGHT_MAX_BYTES_PER_ORG/);
    expect(() => loadConfig({ FILES_UPLOADS_IN_FLIGHT_MAX_BYTES_PER_ORG: String(65 * MIB) })).toThrow(
      /FILES_UPLOADS_IN_FLIGHT_MAX_BYTES_PER_ORG: one organization's share must be at most FILES_UPLOADS_IN_FLIGHT_MAX_BYTES \(67108864\)/,
    );
    expect(() => loadConfig({ FILES_UPLOAD_IDLE_TIMEOUT_MS: '999' })).toThrow(/FILES_UPLOAD_IDLE_TIMEOUT_MS/);
  });

  it("two organizations' slow uploads cannot take the process's bound: each holds at most its share (429 past it), and a third organization's uploads are stored", async () => {
    const [a1, a2, b] = await Promise.all([newOrg(1), newOrg(1), newOrg(1)]);
    // Each opens four chunked uploads (each counts 10 MB) and keeps them alive with a byte now and
    // then: 80 MB asked of the 64 MiB bound. One of each fits its 16 MiB share; the other three are
    // refused before their bodies end.
    const begun = [a1, a2].map((org) => Array.from({ length: 4 }, () => openUpload(url, org.api_key, { trickle: true })));
    try {
      for (const mine of begun) {
        await until(async () => mine.filter((u) => u.early()).length >= 3, 20_000, 50);
        const refused = mine.filter((u) => u.early());
        expect(refused.length).toBe(3);
        for (const r of refused) {
          const res = r.early()!;
          expect(res.status).toBe(429);
          expect(res.headers['retry-after']).toBe('1');
          expect(res.body).toEqual({
            success: false,
            error: expect.objectContaining({ code: 'organization_concurrency_limit', type: 'rate_limit_error', status: 429, retryable: true, details: { upload_bytes_in_flight: 16 * MIB } }),
          });
          expect(res.body.error).not.toHaveProperty('param');
        }
      }
      // Organization B is not refused: 10 MiB and 5 MB uploads are stored.
      const big = await upload(b.api_key, Buffer.alloc(MB10, 0x62));
      expect(big.status, big.text).toBe(201);
      const five = await upload(b.api_key, Buffer.alloc(5_000_000, 0x63));
      expect(five.status, five.text).toBe(201);
      expect(await countFiles(b.org_id)).toBe(2);
      // The uploads held were slow, never idle: each is stored when it ends, well past the idle timeout.
      const held = begun.map((mine) => mine.find((u) => !u.early())!);
      await sleep(IDLE_MS + 500);
      for (const h of held) expect(h.early()).toBeUndefined();
      for (const h of held) expect((await h.finish())?.status).toBe(201);
      expect(await countFiles(a1.org_id)).toBe(1);
      expect(await countFiles(a2.org_id)).toBe(1);
    } finally {
      for (const u of begun.flat()) u.abort();
    }
  });

  it('an upload that sends nothing for FILES_UPLOAD_IDLE_TIMEOUT_MS is 408 request_timeout, its connection closed and its bytes given back', async () => {
    const [org, other] = await Promise.all([newOrg(1), newOrg(1)]);
    // Content-Length 10 MB and not one byte of the body; a chunked one that stops after 1 KiB.
    const silent = openUpload(url, org.api_key, { declared: MB10, first: 0 });
    const stopped = openUpload(url, other.api_key, { first: 1024 });
    try {
      for (const u of [silent, stopped]) {
        const res = await Promise.race([u.answered, sleep(IDLE_MS + 8_000).then(() => undefined)]);
        expect(res?.status).toBe(408);
        expect(res!.ms).toBeGreaterThanOrEqual(IDLE_MS - 100);
        expect(res!.headers.connection).toBe('close');
        expect(res!.body).toEqual({
          success: false,
          error: expect.objectContaining({ code: 'request_timeout', type: 'timeout_error', status: 408, retryable: true, details: { idle_timeout_ms: IDLE_MS } }),
        });
        expect(res!.body.error).not.toHaveProperty('param');
        // The server closed the connection: nothing more of that body is read.
        await until(async () => u.closedAt() !== undefined, 5_000, 20);
      }
      // What they held is back: each organization's share takes a 10 MiB file again.
      for (const o of [org, other]) {
        const big = await upload(o.api_key, Buffer.alloc(MB10, 0x64));
        expect(big.status, big.text).toBe(201);
        expect(await countFiles(o.org_id)).toBe(1);
      }
    } finally {
      silent.abort();
      stopped.abort();
    }
  });

  it("an organization at its stored-files limit is refused 429 file_storage_limit before its body is read, declared or chunked", async () => {
    const org = await newOrg(1);
    for (let i = 0; i < MAX_FILES; i++) expect((await upload(org.api_key, Buffer.from(`file ${i}`))).status).toBe(201);
    // A 5 MB body begun and trickled (never idle, never ended): answered at once, not after it is sent.
    const declared = openUpload(url, org.api_key, { declared: 5_000_000, trickle: true });
    const chunked = openUpload(url, org.api_key, { trickle: true });
    try {
      const d = await Promise.race([declared.answered, sleep(IDLE_MS + 3_000).then(() => undefined)]);
      expect(d?.status).toBe(429);
      expect(Number(d!.headers['retry-after'])).toBeGreaterThan(29 * 86_400);
      expect(d!.body).toEqual({
        success: false,
        error: expect.objectContaining({
          code: 'file_storage_limit',
          type: 'rate_limit_error',
          status: 429,
          retryable: false,
          details: { files: MAX_FILES, bytes: 36, max_files: MAX_FILES, max_bytes: 1024 * MIB, size_bytes: 5_000_000 },
        }),
      });
      expect(d!.body.error).not.toHaveProperty('param');
      // A chunked body's size is not known yet: the same refusal, without size_bytes.
      const c = await Promise.race([chunked.answered, sleep(IDLE_MS + 3_000).then(() => undefined)]);
      expect(c?.status).toBe(429);
      expect(c!.body.error).toMatchObject({ code: 'file_storage_limit', details: { files: MAX_FILES, bytes: 36, max_files: MAX_FILES, max_bytes: 1024 * MIB } });
      expect(c!.body.error.details).not.toHaveProperty('size_bytes');
      expect(await countFiles(org.org_id)).toBe(MAX_FILES);
    } finally {
      declared.abort();
      chunked.abort();
    }
  });

  it("an upload keeps its organization's slot while its file is stored, also when its client has left: at most FILES_UPLOADS_PER_ORG wait on the organization's lock", async () => {
    const org = await newOrg(1);
    const u = new URL(url);
    // The organization's upload lock, held by the test: every upload of it waits there to be stored.
    const locker = new pg.Client({ connectionString: s().databaseUrl });
    await locker.connect();
    const sockets: net.Socket[] = [];
    try {
      await locker.query('SELECT pg_advisory_lock(601, hashtext($1))', [org.org_id]);
      const waiting = async () =>
        (
          await db().query(`SELECT count(*)::int AS n FROM pg_locks WHERE locktype = 'advisory' AND NOT granted AND classid = 601 AND objid = (hashtext($1)::bigint & 4294967295)::oid`, [
            org.org_id,
          ])
        ).rows[0].n as number;
      // Four whole uploads (FILES_UPLOADS_PER_ORG), sent and waiting on the lock; then their clients leave.
      for (let i = 0; i < 4; i++) {
        const socket = net.connect({ host: u.hostname, port: Number(u.port) });
        socket.on('error', () => {});
        socket.write(
          `POST /v1/files HTTP/1.1\r\nHost: ${u.host}\r\nAuthorization: Bearer ${org.api_key}\r\nContent-Type: application/octet-stream\r\nX-File-Name: left-${i}.txt\r\nContent-Length: 4\r\n\r\ndata`,
        );
        sockets.push(socket);
      }
      await until(async () => (await waiting()) === 4, 20_000, 50);
      for (const socket of sockets) socket.destroy();
      await sleep(300);
      // A fifth is refused at once: the four still hold their slots (and pooled connections).
      const fifth = await Promise.race([upload(org.api_key, Buffer.from('fifth')), sleep(5_000).then(() => undefined)]);
      expect(fifth?.status).toBe(429);
      expect(fifth!.body.error).toMatchObject({ code: 'organization_concurrency_limit', details: { uploads_in_flight: 4 } });
      expect(await waiting()).toBe(4);
      // The lock goes: the four are stored, their slots come back.
      await locker.query('SELECT pg_advisory_unlock(601, hashtext($1))', [org.org_id]);
      await until(async () => (await countFiles(org.org_id)) === 4, 20_000, 50);
      await until(async () => (await upload(org.api_key, Buffer.from('after'))).status === 201, 10_000, 100);
    } finally {
      for (const socket of sockets) socket.destroy();
      await locker.end();
    }
  });
});
