// The one DataConverter of every Temporal client and worker the service creates (API, worker,
// schedule helpers, maintenance activities, scripts, tests that read results): payloads encrypted
// at rest with the payload keyring (payload-codec.ts, payload-keys.ts).
import type { DataConverter } from '@temporalio/common';
import { EncryptionCodec } from './payload-codec.ts';
import { loadPayloadKeyring, type PayloadKeyConfig } from './payload-keys.ts';

export async function createDataConverter(config: PayloadKeyConfig): Promise<DataConverter> {
  return { payloadCodecs: [new EncryptionCodec(await loadPayloadKeyring(config))] };
}
