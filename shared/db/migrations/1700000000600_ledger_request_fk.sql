-- Up Migration
-- Every ledger movement except a grant belongs to a request that exists: a claim is never deleted
-- once its workflow may have started, so a reservation can never point at nothing.
ALTER TABLE credit_ledger
  ADD CONSTRAINT credit_ledger_request_fk FOREIGN KEY (request_id) REFERENCES requests(id) NOT VALID;
ALTER TABLE credit_ledger
  ADD CONSTRAINT credit_ledger_request_kind CHECK ((kind = 'grant') = (request_id IS NULL)) NOT VALID;
-- Validate what is there; an older database holding orphans (from deleted claims) keeps the
-- constraint for new rows and says so instead of failing the deploy.
DO $$
BEGIN
  ALTER TABLE credit_ledger VALIDATE CONSTRAINT credit_ledger_request_fk;
  ALTER TABLE credit_ledger VALIDATE CONSTRAINT credit_ledger_request_kind;
EXCEPTION WHEN foreign_key_violation OR check_violation THEN
  RAISE WARNING 'credit_ledger holds rows of requests that no longer exist; the constraints apply to new rows only';
END $$;

-- Down Migration
ALTER TABLE credit_ledger DROP CONSTRAINT IF EXISTS credit_ledger_request_kind;
ALTER TABLE credit_ledger DROP CONSTRAINT IF EXISTS credit_ledger_request_fk;
