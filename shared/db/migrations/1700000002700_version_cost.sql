-- Up Migration
-- The price of a run is the price of the version that runs. It lived on `operations` only, where
-- a builder publish writes its newest version's: the owner of a shared workflow republishing it at
-- 1000 credits re-priced every other organization's calls, those pinned to an earlier `version`
-- (published at 1) included, and nothing a caller could do kept the price they had chosen.
--   operation_versions.cost_credits: a builder version's own price. NULL reads as the operation's:
--   the platform catalog's versions (its operator sets one price per operation, for every
--   version) and a row an older API process wrote during a rolling deploy.
ALTER TABLE operation_versions ADD COLUMN cost_credits int CHECK (cost_credits >= 0);

-- A builder version: its stored definition's price (1 when it named none, as the builder reads it).
UPDATE operation_versions v
   SET cost_credits = coalesce((d.op->>'cost_credits')::int, 1)
  FROM operations o
  JOIN builder_versions b ON b.api_id = o.api_id
  CROSS JOIN LATERAL jsonb_array_elements(b.definition->'operations') AS d(op)
 WHERE o.id = v.operation_id AND b.version = v.version AND d.op->>'name' = o.name;

-- Down Migration
ALTER TABLE operation_versions DROP COLUMN cost_credits;
