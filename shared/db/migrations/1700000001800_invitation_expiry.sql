-- Up Migration
-- Invitations expire (shared/accounts/invitations.ts, INVITATION_TTL_DAYS: 7 days after they were
-- sent or last re-sent). They used to stand forever: an address invited long ago, by someone who
-- has since left, could still turn it into a membership. Invitations already pending get 7 days
-- from when they were sent, the same rule as new ones (so the long-standing ones end now).
-- The module sets expires_at on every send; the default is for an API process of the previous
-- release still running while a deployment migrates (its inserts name no expires_at).
ALTER TABLE member_invitations ADD COLUMN expires_at timestamptz;
UPDATE member_invitations SET expires_at = created_at + interval '7 days';
ALTER TABLE member_invitations ALTER COLUMN expires_at SET NOT NULL, ALTER COLUMN expires_at SET DEFAULT now() + interval '7 days';

-- Down Migration
ALTER TABLE member_invitations DROP COLUMN expires_at;
