-- Up Migration
-- Invitations to an organization (console "Add a member"). Adding someone by email used to insert
-- their membership at once: any Owner of any organization (sign-up is open) could put any user into
-- an organization of their choosing, without consent. An invitation grants nothing: it becomes a
-- membership only when the invited user accepts it from their own console. It is keyed by the
-- email as typed (normalized), whether or not an account has it, so recording one reveals nothing
-- about which addresses have accounts. Pending and declined rows are never memberships; a declined
-- row stays so that the same organization cannot invite that address again and again.
CREATE TABLE member_invitations (
  id          text PRIMARY KEY CHECK (id ~ '^inv_[0-9a-f]{24}$'),
  org_id      text NOT NULL REFERENCES organizations(id) ON DELETE CASCADE,
  email       text NOT NULL CHECK (email = lower(email) AND length(email) BETWEEN 3 AND 254),
  role        text NOT NULL CHECK (role IN ('owner', 'admin', 'member')),
  status      text NOT NULL DEFAULT 'pending' CHECK (status IN ('pending', 'declined')),
  invited_by  text REFERENCES users(id) ON DELETE SET NULL,
  created_at  timestamptz NOT NULL DEFAULT now(),
  decided_at  timestamptz,
  UNIQUE (org_id, email)
);
CREATE INDEX member_invitations_email ON member_invitations(email) WHERE status = 'pending';

-- Down Migration
DROP TABLE member_invitations;
