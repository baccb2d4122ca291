-- Up Migration
-- Workflows built by organizations (shared/builder/): recorded test runs, workflow versions, and
-- the ledger kind that charges a private build.

-- A private build or update is charged through the ledger: `build` moves credits from available to
-- charged directly (no reservation), so granted = available + reserved + charged still holds. Like a
-- grant it belongs to no request; builder_versions.ledger_id points at it instead.
ALTER TABLE credit_ledger DROP CONSTRAINT IF EXISTS credit_ledger_kind_check;
ALTER TABLE credit_ledger ADD CONSTRAINT credit_ledger_kind_check CHECK (kind IN ('grant', 'reserve', 'settle', 'release', 'build'));
ALTER TABLE credit_ledger DROP CONSTRAINT IF EXISTS credit_ledger_request_kind;
ALTER TABLE credit_ledger ADD CONSTRAINT credit_ledger_request_kind CHECK ((kind IN ('grant', 'build')) = (request_id IS NULL)) NOT VALID;
DO $$
BEGIN
  ALTER TABLE credit_ledger VALIDATE CONSTRAINT credit_ledger_request_kind;
EXCEPTION WHEN check_violation THEN
  RAISE WARNING 'credit_ledger holds rows of requests that no longer exist; the constraint applies to new rows only';
END $$;

-- One row per test run of a draft definition. Publishing requires a passing run of the exact
-- same definition (same hash) by the same organization, recent enough (shared/builder/store.ts).
CREATE TABLE builder_test_runs (
  id               text PRIMARY KEY CHECK (id ~ '^trun_[0-9a-f]{32}$'),
  org_id           text NOT NULL REFERENCES organizations(id),
  handle           text NOT NULL,
  definition_hash  text NOT NULL CHECK (definition_hash ~ '^[0-9a-f]{64}$'),
  status           text NOT NULL CHECK (status IN ('running', 'passed', 'failed', 'error')),
  results          jsonb,
  created_at       timestamptz NOT NULL DEFAULT now(),
  finished_at      timestamptz
);
CREATE INDEX builder_test_runs_org_hash ON builder_test_runs(org_id, definition_hash, created_at);

-- One row per published version of a built workflow: the whole definition as published, which
-- operation versions it created (every operation at operation version = this version), and what
-- it cost. Immutable: rows are inserted, never updated.
CREATE TABLE builder_versions (
  api_id           bigint NOT NULL REFERENCES apis(id) ON DELETE CASCADE,
  version          int NOT NULL CHECK (version BETWEEN 1 AND 2147483647),
  org_id           text NOT NULL REFERENCES organizations(id),
  definition       jsonb NOT NULL,
  definition_hash  text NOT NULL,
  visibility       text NOT NULL CHECK (visibility IN ('public', 'private')),
  charged_credits  int NOT NULL CHECK (charged_credits >= 0),
  ledger_id        bigint REFERENCES credit_ledger(id),
  test_run_id      text REFERENCES builder_test_runs(id),
  restored_from    int,
  created_at       timestamptz NOT NULL DEFAULT now(),
  PRIMARY KEY (api_id, version),
  CHECK ((charged_credits > 0) = (ledger_id IS NOT NULL))
);

-- Down Migration
DROP TABLE builder_versions;
DROP TABLE builder_test_runs;
ALTER TABLE credit_ledger DROP CONSTRAINT IF EXISTS credit_ledger_request_kind;
ALTER TABLE credit_ledger ADD CONSTRAINT credit_ledger_request_kind CHECK ((kind = 'grant') = (request_id IS NULL)) NOT VALID;
ALTER TABLE credit_ledger DROP CONSTRAINT IF EXISTS credit_ledger_kind_check;
ALTER TABLE credit_ledger ADD CONSTRAINT credit_ledger_kind_check CHECK (kind IN ('grant', 'reserve', 'settle', 'release'));
