// Temporal payload encryption: every payload the service's clients and workers send to Temporal
// (workflow/activity inputs and outputs, results, memos, failure details) is stored in its history
// as AES-256-GCM ciphertext, because those payloads carry organizations' inputs and outputs,
// including results read with their connected accounts.
//
// An encrypted payload: metadata `encoding: binary/encrypted` and `encryption-key-id: <key id>`;
// data = 12-byte random IV ‖ ciphertext ‖ 16-byte tag of the original Payload (protobuf-encoded, so
// its own metadata such as `encoding: json/plain` is hidden too). The additional authenticated data
// names the key id, so a payload relabelled with another key id does not decrypt.
//
// Decoding passes a payload without the encrypted encoding through unchanged: histories recorded
// before encryption (and test/histories/*.json) still replay and their results still read.
// Codecs run outside the workflow sandbox (client, worker's activation boundary), so the workflow
// bundle is unchanged.
import { createCipheriv, createDecipheriv, randomBytes } from 'node:crypto';
import type { Payload, PayloadCodec } from '@temporalio/common';
import proto from '@temporalio/proto'; // CommonJS: its namespace is on the default export under ESM
import type { Keyring } from '../db/connections.ts';

export const ENCRYPTED_ENCODING = 'binary/encrypted';
export const KEY_ID_METADATA = 'encryption-key-id';
const IV_BYTES = 12;
const TAG_BYTES = 16;
const ProtoPayload = proto.temporal.api.common.v1.Payload;

const utf8 = (s: string) => new TextEncoder().encode(s);
const text = (b: Uint8Array | null | undefined) => (b ? Buffer.from(b).toString('utf8') : undefined);
const aad = (keyId: string) => Buffer.from(`wqs-temporal-payload:v1|${keyId}`);

/** A payload this codec cannot decode; the message never quotes any of its content. */
export class PayloadDecryptError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'PayloadDecryptError';
  }
}

export const isEncrypted = (p: Payload) => text(p.metadata?.encoding) === ENCRYPTED_ENCODING;

export function encryptPayload(ring: Keyring, payload: Payload): Payload {
  const iv = randomBytes(IV_BYTES);
  const cipher = createCipheriv('aes-256-gcm', ring.current.key, iv);
  cipher.setAAD(aad(ring.current.id));
  const plain = ProtoPayload.encode({ metadata: payload.metadata, data: payload.data }).finish();
  const ciphertext = Buffer.concat([cipher.update(plain), cipher.final()]);
  return {
    metadata: { encoding: utf8(ENCRYPTED_ENCODING), [KEY_ID_METADATA]: utf8(ring.current.id) },
    data: Buffer.concat([iv, ciphertext, cipher.getAuthTag()]),
  };
}

export function decryptPayload(ring: Keyring, payload: Payload): Payload {
  if (!isEncrypted(payload)) return payload;
  const id = text(payload.metadata?.[KEY_ID_METADATA]);
  const key = id === undefined ? undefined : ring.byId.get(id);
  if (!key) throw new PayloadDecryptError(`payload was encrypted with a key that is not configured (key id ${id ?? 'missing'}); add it to PAYLOAD_PREVIOUS_KEYS`);
  const data = Buffer.from(payload.data ?? new Uint8Array());
  if (data.length < IV_BYTES + TAG_BYTES) throw new PayloadDecryptError('encrypted payload is truncated');
  try {
    const d = createDecipheriv('aes-256-gcm', key, data.subarray(0, IV_BYTES));
    d.setAAD(aad(id!));
    d.setAuthTag(data.subarray(data.length - TAG_BYTES));
    const plain = Buffer.concat([d.update(data.subarray(IV_BYTES, data.length - TAG_BYTES)), d.final()]);
    const inner = ProtoPayload.decode(plain);
    return { metadata: inner.metadata ?? {}, data: inner.data ?? new Uint8Array() };
  } catch {
    throw new PayloadDecryptError(`encrypted payload does not decrypt with key ${id} (altered or wrong key)`);
  }
}

export class EncryptionCodec implements PayloadCodec {
  constructor(private readonly ring: Keyring) {}

  async encode(payloads: Payload[]): Promise<Payload[]> {
    return payloads.map((p) => encryptPayload(this.ring, p));
  }

  async decode(payloads: Payload[]): Promise<Payload[]> {
    return payloads.map((p) => decryptPayload(this.ring, p));
  }
}

/** Decrypts, in place, every encrypted payload anywhere in a protobuf object (a whole history):
 *  for tools that must write a history out readable without a key (scripts/record-histories.ts). */
export function decryptPayloadsIn(ring: Keyring, node: unknown): void {
  if (!node || typeof node !== 'object' || ArrayBuffer.isView(node)) return;
  const o = node as Record<string, unknown>;
  for (const [k, v] of Object.entries(o)) {
    if (v && typeof v === 'object' && !ArrayBuffer.isView(v) && 'metadata' in v && isEncrypted(v as Payload)) o[k] = decryptPayload(ring, v as Payload);
    else decryptPayloadsIn(ring, v);
  }
}
