-- Up Migration
-- Who created each API key, so that an Owner can find (and revoke) the keys of a member they
-- remove: removing a person must not leave integrations nobody can account for, nor break them
-- silently (shared/db/orgs.ts; the console's keys and members pages).
--   created_via  'console' (a member, on the keys page) or 'operator' (the admin command, the dev
--                bootstrap, a new organization's first key); NULL for keys made before this
--                column, shown as "unknown": nothing recorded it.
--   created_by   the member's user; users are not deleted today, but if one ever is, the key stays
--                and only the link goes (SET NULL), still marked 'console' with its email below.
--   created_by_email  the address the member had in this organization when they made the key: the
--                organization's own record, so a removed member's keys still say who made them
--                without reading a user who is no longer its member.
ALTER TABLE api_keys
  ADD COLUMN created_via text CHECK (created_via IN ('console', 'operator')),
  ADD COLUMN created_by text REFERENCES users(id) ON DELETE SET NULL,
  ADD COLUMN created_by_email text,
  ADD CONSTRAINT api_keys_creator CHECK (
    CASE created_via
      WHEN 'console' THEN created_by_email IS NOT NULL
      ELSE created_by IS NULL AND created_by_email IS NULL
    END
  );
-- The keys one member created in one organization (the filter, the count after a removal, revoking
-- them); leading with created_by, it also serves the foreign key's SET NULL.
CREATE INDEX api_keys_created_by ON api_keys (created_by, org_id) WHERE created_by IS NOT NULL;

-- Down Migration
DROP INDEX api_keys_created_by;
ALTER TABLE api_keys
  DROP CONSTRAINT api_keys_creator,
  DROP COLUMN created_by_email,
  DROP COLUMN created_by,
  DROP COLUMN created_via;
