-- Up Migration
-- Whether a run acts on a website, and which connections it needs, are properties of the version
-- that runs, not of the operation. Both lived on `operations` only, where a builder publish writes
-- its newest version's: after a read-only version 2, a query pinned to an acting version 1 ran as
-- read-only (its execute step retried, a read-only MCP client allowed to call it), and with a
-- version's access list it did not declare.
--   operation_versions.performs_actions, .access: the version's own. NULL (a row an older API
--   process wrote during a rolling deploy) reads as the operation's, as before.
ALTER TABLE operation_versions
  ADD COLUMN performs_actions boolean,
  ADD COLUMN access jsonb CHECK (access IS NULL OR jsonb_typeof(access) = 'array');

-- A builder version: its stored definition says what it was (an action step anywhere in its recipe
-- counts, as the builder derives it).
UPDATE operation_versions v
   SET performs_actions = coalesce((d.op->>'performs_actions')::boolean, false)
                          OR jsonb_path_exists(v.recipe, 'lax $.**.action ? (@ == true)'),
       access = CASE WHEN jsonb_typeof(d.op->'access') = 'array' THEN d.op->'access' ELSE '[]'::jsonb END
  FROM operations o
  JOIN builder_versions b ON b.api_id = o.api_id
  CROSS JOIN LATERAL jsonb_array_elements(b.definition->'operations') AS d(op)
 WHERE o.id = v.operation_id AND b.version = v.version AND d.op->>'name' = o.name;

-- Any other (the platform catalog's): the operation's values, which hold for every version (its
-- performs_actions is true when any version acts); an action step in the recipe also counts.
UPDATE operation_versions v
   SET performs_actions = o.performs_actions OR jsonb_path_exists(v.recipe, 'lax $.**.action ? (@ == true)'),
       access = o.access
  FROM operations o
 WHERE o.id = v.operation_id AND v.performs_actions IS NULL;

-- Down Migration
ALTER TABLE operation_versions DROP COLUMN performs_actions, DROP COLUMN access;
