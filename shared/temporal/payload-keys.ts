// The keyring of Temporal payload encryption, handled like the connections key (docs/connections.md):
// PAYLOAD_ENCRYPTION_KEY in production, a generated $DATA_DIR/payload-key in dev and tests, and
// PAYLOAD_PREVIOUS_KEYS kept after a rotation so older histories still decode.
import type { Config } from '../config.ts';
import { keyringFrom, type Keyring } from '../db/connections.ts';

export type PayloadKeyConfig = Pick<Config, 'PAYLOAD_ENCRYPTION_KEY' | 'PAYLOAD_PREVIOUS_KEYS' | 'dataDir'>;

/** The process's payload keyring; loaded once per distinct configuration. */
export function loadPayloadKeyring(config: PayloadKeyConfig): Promise<Keyring> {
  return keyringFrom({
    names: { current: 'PAYLOAD_ENCRYPTION_KEY', previous: 'PAYLOAD_PREVIOUS_KEYS' },
    current: config.PAYLOAD_ENCRYPTION_KEY,
    previous: config.PAYLOAD_PREVIOUS_KEYS,
    dataDir: config.dataDir,
    devFile: 'payload-key',
  });
}
