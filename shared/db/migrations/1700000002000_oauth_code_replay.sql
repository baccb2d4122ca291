-- Up Migration
-- An authorization code presented a second time means it leaked (or the exchange was replayed):
-- RFC 6749 §4.1.2 says the tokens issued from it should be revoked. A redeemed code used to be
-- deleted, so a second redemption could only be refused, while whoever won the race kept the
-- tokens. A redeemed code is now kept (hashed, as ever) with when it was used and the grant it
-- created, until the housekeeping delete an hour after it expires; presenting it again ends that
-- grant. Both columns are nullable: an API process of the previous release, still running while a
-- deployment migrates, keeps deleting the codes it redeems.
ALTER TABLE oauth_codes ADD COLUMN used_at timestamptz;
ALTER TABLE oauth_codes ADD COLUMN grant_id text REFERENCES oauth_grants(id) ON DELETE SET NULL;

-- Down Migration
ALTER TABLE oauth_codes DROP COLUMN grant_id;
ALTER TABLE oauth_codes DROP COLUMN used_at;
