-- Up Migration
-- Addresses are compared in Unicode compatibility form (NFKC, then lower case: shared/accounts/
-- users.ts normalizeEmail). "ｃｅｏ@acme.test" (full-width letters) or "ceo@acme.test" with a
-- decomposed accent was another account that Members and the keys page showed as the same person,
-- and a fresh sign-in throttle bucket for the same typed address. Stored addresses are brought to
-- that form where no other row already has it (such a pair stays as it was: two accounts, neither
-- taken over); the service then finds each by what its owner types.
DO $$
BEGIN
  -- normalize() needs a UTF-8 database (the embedded one is; one that is not keeps its rows).
  IF current_setting('server_encoding') <> 'UTF8' THEN
    RETURN;
  END IF;
  UPDATE users u SET email = lower(normalize(u.email, NFKC))
   WHERE u.email <> lower(normalize(u.email, NFKC))
     AND NOT EXISTS (SELECT 1 FROM users o WHERE o.email = lower(normalize(u.email, NFKC)));
  UPDATE member_invitations i SET email = lower(normalize(i.email, NFKC))
   WHERE i.email <> lower(normalize(i.email, NFKC))
     AND NOT EXISTS (SELECT 1 FROM member_invitations o WHERE o.org_id = i.org_id AND o.email = lower(normalize(i.email, NFKC)));
END
$$;

-- Down Migration
-- Nothing to undo: the compatibility form is the same address.
