-- Up Migration
-- Connected accounts and access keys of organizations (spec: Authentication §6–7).
-- Secrets are a JSON object encrypted with AES-256-GCM (shared/db/connections.ts); only the
-- ciphertext, its IV and its authentication tag are stored, never the plaintext.

CREATE TABLE connections (
  id                 text PRIMARY KEY CHECK (id ~ '^conn_[0-9a-f]{24}$'),
  org_id             text NOT NULL REFERENCES organizations(id),
  kind               text NOT NULL CHECK (kind IN ('account', 'access_key')),
  -- Matches AccessRequirement.name of the operations that need it, e.g. shop_account, WEATHER_API_KEY.
  name               text NOT NULL CHECK (name ~ '^[A-Za-z_][A-Za-z0-9_]{0,99}$'),
  -- Host of the site, lower case, e.g. shop.example.test.
  site               text NOT NULL CHECK (site ~ '^[a-z0-9.:-]{1,253}$'),
  -- active: usable; needs_reauth: the site wants a fresh sign-in (auth_required);
  -- revoked: disconnected (auth_revoked). A revoked row is kept as history, never reused.
  status             text NOT NULL DEFAULT 'active' CHECK (status IN ('active', 'needs_reauth', 'revoked')),
  secret_ciphertext  bytea NOT NULL,
  secret_iv          bytea NOT NULL CHECK (octet_length(secret_iv) = 12),
  secret_tag         bytea NOT NULL CHECK (octet_length(secret_tag) = 16),
  -- Which configured key encrypted the row (first bytes of SHA-256 of the key) and the format version.
  key_id             text NOT NULL,
  key_version        int NOT NULL DEFAULT 1,
  -- Names of the secret fields (not their values), for display and for credentials_missing checks.
  secret_names       text[] NOT NULL DEFAULT '{}',
  created_at         timestamptz NOT NULL DEFAULT now(),
  updated_at         timestamptz NOT NULL DEFAULT now(),
  revoked_at         timestamptz
);
-- At most one live (active or needing sign-in) connection per organization, kind, name and site;
-- adding a new one revokes the old one in the same transaction.
CREATE UNIQUE INDEX connections_live ON connections(org_id, kind, name, site) WHERE status <> 'revoked';
CREATE INDEX connections_org ON connections(org_id, kind, name, site, updated_at DESC);

-- Down Migration
DROP TABLE connections;
