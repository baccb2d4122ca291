-- Up Migration
-- Console accounts (issue 9): users, their memberships in organizations with a role, server-side
-- sessions, sign-in throttling, and when each API key was last used.

CREATE TABLE users (
  id             text PRIMARY KEY CHECK (id ~ '^usr_[0-9a-f]{24}$'),
  -- Stored lower-cased and trimmed (shared/accounts/users.ts), so the unique index is case-blind.
  email          text NOT NULL UNIQUE CHECK (email = lower(email) AND length(email) BETWEEN 3 AND 254),
  -- Argon2id PHC string (@node-rs/argon2); never the password.
  password_hash  text NOT NULL,
  created_at     timestamptz NOT NULL DEFAULT now()
);

CREATE TABLE memberships (
  org_id      text NOT NULL REFERENCES organizations(id),
  user_id     text NOT NULL REFERENCES users(id) ON DELETE CASCADE,
  role        text NOT NULL CHECK (role IN ('owner', 'admin', 'member')),
  created_at  timestamptz NOT NULL DEFAULT now(),
  PRIMARY KEY (org_id, user_id)
);
CREATE INDEX memberships_user ON memberships(user_id);

-- One row per signed-in browser. Only the SHA-256 of the session id is stored; the cookie holds the
-- id. `org_id` is the organization the session is looking at (the org switcher moves it); deleting a
-- membership deletes that user's sessions on that organization (the membership foreign key).
CREATE TABLE console_sessions (
  id_hash       bytea PRIMARY KEY,
  user_id       text NOT NULL REFERENCES users(id) ON DELETE CASCADE,
  org_id        text NOT NULL,
  created_at    timestamptz NOT NULL DEFAULT now(),
  last_seen_at  timestamptz NOT NULL DEFAULT now(),
  expires_at    timestamptz NOT NULL,
  FOREIGN KEY (org_id, user_id) REFERENCES memberships(org_id, user_id) ON DELETE CASCADE
);
CREATE INDEX console_sessions_user ON console_sessions(user_id);
CREATE INDEX console_sessions_expiry ON console_sessions(expires_at);

-- Fixed-window counters of sign-in attempts, one per bucket ('ip:…' or 'email:<sha256>').
CREATE TABLE sign_in_throttle (
  bucket        text PRIMARY KEY,
  window_start  timestamptz NOT NULL,
  attempts      int NOT NULL
);

ALTER TABLE api_keys ADD COLUMN IF NOT EXISTS last_used_at timestamptz;

-- Down Migration
ALTER TABLE api_keys DROP COLUMN IF EXISTS last_used_at;
DROP TABLE sign_in_throttle;
DROP TABLE console_sessions;
DROP TABLE memberships;
DROP TABLE users;
