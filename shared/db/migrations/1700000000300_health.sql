-- Up Migration
-- Operation health, written by the health-check workflow (workflows/health-check-workflow.ts),
-- which a Temporal Schedule runs periodically against each operation's verified examples.
--   unknown       never checked (the default)
--   healthy       every verified example of the default version returned its documented output
--   degraded      some examples did, some did not
--   failing       none did (site down, blocked, changed, or the recipe broke)
--   unverifiable  not checked automatically: performs actions, needs a connection, or has no examples
-- verified_at stays the time of the last fully successful check; a failed check leaves it alone.

ALTER TABLE operations
  ADD COLUMN health_checked_at timestamptz,
  ADD COLUMN health_detail     text,
  ADD CONSTRAINT operations_health_status
    CHECK (health_status IN ('unknown', 'healthy', 'degraded', 'failing', 'unverifiable'));

-- Down Migration
ALTER TABLE operations
  DROP CONSTRAINT operations_health_status,
  DROP COLUMN health_detail,
  DROP COLUMN health_checked_at;
