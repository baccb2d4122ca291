// The keyring of Temporal payload encryption, handled like the connections key (docs/connections.md):
// PAYLOAD_ENCRYPTION_KEY in production, a generated $DATA_DIR/payload-key in dev and tests, and
// PAYLOAD_PREVIOUS_KEYS kept after a rotation so older histories still decode.
import type { Config } from '../config.ts';
import { decodeKey, devKey, keyId, type Keyring } from '../db/connections.ts';

export type PayloadKeyConfig = Pick<Config, 'PAYLOAD_ENCRYPTION_KEY' | 'PAYLOAD_PREVIOUS_KEYS' | 'dataDir'>;

const rings = new Map<string, Promise<Keyring>>();

/** The process's payload keyring; loaded once per distinct configuration. */
export function loadPayloadKeyring(config: PayloadKeyConfig): Promise<Keyring> {
  const cacheKey = `${config.PAYLOAD_ENCRYPTION_KEY ?? `dev:${config.dataDir}`}|${config.PAYLOAD_PREVIOUS_KEYS ?? ''}`;
  let ring = rings.get(cacheKey);
  if (!ring) {
    ring = (async () => {
      const key = config.PAYLOAD_ENCRYPTION_KEY
        ? decodeKey(config.PAYLOAD_ENCRYPTION_KEY, 'PAYLOAD_ENCRYPTION_KEY')
        : await devKey(config.dataDir, 'payload-key');
      const byId = new Map<string, Buffer>([[keyId(key), key]]);
      for (const prev of (config.PAYLOAD_PREVIOUS_KEYS ?? '').split(',').filter((s) => s.trim())) {
        const p = decodeKey(prev, 'PAYLOAD_PREVIOUS_KEYS');
        byId.set(keyId(p), p);
      }
      return { current: { id: keyId(key), key }, byId };
    })();
    ring.catch(() => rings.delete(cacheKey));
    rings.set(cacheKey, ring);
  }
  return ring;
}
