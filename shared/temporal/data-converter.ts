// The one DataConverter of every Temporal client and worker the service creates (API, worker,
// schedule helpers, maintenance activities, scripts, tests that read results): payloads encrypted
// at rest with the payload keyring (payload-codec.ts, payload-keys.ts), and failures' messages and
// stack traces moved into an encrypted payload (failure-converter.cjs).
import { fileURLToPath } from 'node:url';
import type { DataConverter } from '@temporalio/common';
import { EncryptionCodec } from './payload-codec.ts';
import { loadPayloadKeyring, type PayloadKeyConfig } from './payload-keys.ts';

/** The failure converter's module, for DataConverter.failureConverterPath and the workflow bundle. */
export const FAILURE_CONVERTER_PATH = fileURLToPath(new URL('./failure-converter.cjs', import.meta.url));

export async function createDataConverter(config: PayloadKeyConfig): Promise<DataConverter> {
  return { payloadCodecs: [new EncryptionCodec(await loadPayloadKeyring(config))], failureConverterPath: FAILURE_CONVERTER_PATH };
}
