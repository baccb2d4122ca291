-- Up Migration

CREATE TABLE organizations (
  id          text PRIMARY KEY,
  name        text NOT NULL,
  plan        text NOT NULL DEFAULT 'default',
  created_at  timestamptz NOT NULL DEFAULT now()
);

-- Keys are stored only as SHA-256 hashes; `prefix` is the first characters, for display.
CREATE TABLE api_keys (
  id            text PRIMARY KEY,
  org_id        text NOT NULL REFERENCES organizations(id),
  key_hash      bytea NOT NULL UNIQUE,
  prefix        text NOT NULL,
  created_at    timestamptz NOT NULL DEFAULT now(),
  expires_at    timestamptz,
  revoked_at    timestamptz
);
CREATE INDEX api_keys_org ON api_keys(org_id);

-- The balance is derived from the ledger and kept beside it in the same transaction;
-- the CHECKs make the invariant and non-negativity impossible to break.
CREATE TABLE credit_balances (
  org_id     text PRIMARY KEY REFERENCES organizations(id),
  granted    bigint NOT NULL DEFAULT 0 CHECK (granted >= 0),
  available  bigint NOT NULL DEFAULT 0 CHECK (available >= 0),
  reserved   bigint NOT NULL DEFAULT 0 CHECK (reserved >= 0),
  charged    bigint NOT NULL DEFAULT 0 CHECK (charged >= 0),
  CONSTRAINT credit_invariant CHECK (granted = available + reserved + charged)
);

CREATE TABLE credit_ledger (
  id          bigserial PRIMARY KEY,
  org_id      text NOT NULL REFERENCES organizations(id),
  request_id  text,
  kind        text NOT NULL CHECK (kind IN ('grant', 'reserve', 'settle', 'release')),
  amount      bigint NOT NULL CHECK (amount >= 0),
  note        text,
  created_at  timestamptz NOT NULL DEFAULT now()
);
-- Each request is reserved at most once and then either settled or released, once.
CREATE UNIQUE INDEX credit_ledger_reserve_once ON credit_ledger(request_id) WHERE kind = 'reserve';
CREATE UNIQUE INDEX credit_ledger_close_once ON credit_ledger(request_id) WHERE kind IN ('settle', 'release');
CREATE INDEX credit_ledger_org ON credit_ledger(org_id, created_at);

CREATE TABLE icons (
  sha256        text PRIMARY KEY CHECK (sha256 ~ '^[0-9a-f]{64}$'),
  content_type  text NOT NULL,
  bytes         bytea NOT NULL,
  created_at    timestamptz NOT NULL DEFAULT now()
);

CREATE TABLE apis (
  id            bigserial PRIMARY KEY,
  handle        text NOT NULL CHECK (handle ~ '^@[a-z0-9][a-z0-9_-]{0,99}$'),
  visibility    text NOT NULL CHECK (visibility IN ('public', 'private')),
  owner_org_id  text REFERENCES organizations(id),
  name          text NOT NULL,
  description   text NOT NULL DEFAULT '',
  category      text NOT NULL,
  website_url   text,
  logo_sha256   text REFERENCES icons(sha256),
  availability  text NOT NULL DEFAULT 'available' CHECK (availability IN ('available', 'coming_soon')),
  status        text NOT NULL DEFAULT 'active' CHECK (status IN ('active', 'inactive')),
  created_at    timestamptz NOT NULL DEFAULT now(),
  updated_at    timestamptz NOT NULL DEFAULT now(),
  CHECK ((visibility = 'private') = (owner_org_id IS NOT NULL))
);
CREATE UNIQUE INDEX apis_public_handle ON apis(handle) WHERE visibility = 'public';
CREATE UNIQUE INDEX apis_private_handle ON apis(owner_org_id, handle) WHERE visibility = 'private';

CREATE TABLE api_sites (
  api_id       bigint NOT NULL REFERENCES apis(id) ON DELETE CASCADE,
  position     int NOT NULL,
  name         text NOT NULL,
  host         text NOT NULL,
  icon_sha256  text REFERENCES icons(sha256),
  PRIMARY KEY (api_id, position)
);

CREATE TABLE operations (
  id                bigserial PRIMARY KEY,
  api_id            bigint NOT NULL REFERENCES apis(id) ON DELETE CASCADE,
  name              text NOT NULL CHECK (name ~ '^[a-z][a-z0-9_]{0,99}$'),
  label             text NOT NULL,
  description       text NOT NULL DEFAULT '',
  cost_credits      int NOT NULL CHECK (cost_credits >= 0),
  performs_actions  boolean NOT NULL DEFAULT false,
  default_version   int NOT NULL,
  access            jsonb NOT NULL DEFAULT '[]',
  labels            text[] NOT NULL DEFAULT '{}',
  health_status     text NOT NULL DEFAULT 'unknown',
  verified_at       timestamptz,
  created_at        timestamptz NOT NULL DEFAULT now(),
  updated_at        timestamptz NOT NULL DEFAULT now(),
  UNIQUE (api_id, name)
);

-- Immutable once published: the seed and publishers insert, never update, the contract columns.
CREATE TABLE operation_versions (
  operation_id   bigint NOT NULL REFERENCES operations(id) ON DELETE CASCADE,
  version        int NOT NULL CHECK (version BETWEEN 1 AND 2147483647),
  input_schema   jsonb NOT NULL,
  output_schema  jsonb NOT NULL,
  examples       jsonb NOT NULL DEFAULT '[]',
  recipe         jsonb NOT NULL,
  available      boolean NOT NULL DEFAULT true,
  published_at   timestamptz NOT NULL DEFAULT now(),
  PRIMARY KEY (operation_id, version)
);

-- One row per dispatched query. The idempotency claim is the row itself: unique per
-- (organization, hash of the Idempotency-Key).
CREATE TABLE requests (
  id                    text PRIMARY KEY CHECK (id ~ '^req_[A-Za-z0-9_-]{10,64}$'),
  org_id                text NOT NULL REFERENCES organizations(id),
  idempotency_key_hash  text,
  fingerprint           text,
  workflow_id           text NOT NULL,
  api                   text,
  operation             text,
  operation_id          bigint,
  version               int,
  performs_actions      boolean NOT NULL DEFAULT false,
  is_public_api         boolean NOT NULL DEFAULT true,
  status                text NOT NULL CHECK (status IN ('reserving', 'processing', 'succeeded', 'rejected', 'refund_pending', 'failed', 'interrupted')),
  billing_status        text NOT NULL DEFAULT 'not_started' CHECK (billing_status IN ('not_started', 'pending', 'settled', 'released')),
  reserved_credits      bigint NOT NULL DEFAULT 0,
  charged_credits       bigint,
  response_status       int,
  result                jsonb,
  result_expires_at     timestamptz,
  error_code            text,
  feedback              smallint CHECK (feedback IN (1, -1)),
  created_at            timestamptz NOT NULL DEFAULT now(),
  updated_at            timestamptz NOT NULL DEFAULT now(),
  completed_at          timestamptz
);
CREATE UNIQUE INDEX requests_idempotency ON requests(org_id, idempotency_key_hash) WHERE idempotency_key_hash IS NOT NULL;
CREATE INDEX requests_org_created ON requests(org_id, created_at);
CREATE INDEX requests_unresolved ON requests(org_id) WHERE status IN ('reserving', 'processing', 'refund_pending');

-- Down Migration
DROP TABLE requests;
DROP TABLE operation_versions;
DROP TABLE operations;
DROP TABLE api_sites;
DROP TABLE apis;
DROP TABLE icons;
DROP TABLE credit_ledger;
DROP TABLE credit_balances;
DROP TABLE api_keys;
DROP TABLE organizations;
