-- Up Migration
-- MCP sign-in with OAuth (issue 12): registered clients, authorization codes, grants (one per user,
-- organization and client: a "connected client") and their tokens. Codes and tokens are stored only
-- as SHA-256 hashes; a grant is tied to the membership, so removing a member deletes their grants
-- and tokens at once (foreign key cascade).

CREATE TABLE oauth_clients (
  -- 'mcpc_…' for Dynamic Client Registration, the https URL for a Client ID Metadata Document.
  id             text PRIMARY KEY CHECK (length(id) BETWEEN 1 AND 2048),
  kind           text NOT NULL CHECK (kind IN ('dcr', 'cimd')),
  client_name    text NOT NULL CHECK (length(client_name) BETWEEN 1 AND 200),
  redirect_uris  text[] NOT NULL CHECK (cardinality(redirect_uris) BETWEEN 1 AND 10),
  metadata       jsonb NOT NULL,
  created_at     timestamptz NOT NULL DEFAULT now(),
  -- When a metadata document was last fetched (kind cimd): the cache's age.
  fetched_at     timestamptz
);

CREATE TABLE oauth_grants (
  id          text PRIMARY KEY CHECK (id ~ '^grt_[0-9a-f]{24}$'),
  client_id   text NOT NULL REFERENCES oauth_clients(id) ON DELETE CASCADE,
  user_id     text NOT NULL,
  org_id      text NOT NULL,
  resource    text NOT NULL,
  scope       text NOT NULL,
  created_at  timestamptz NOT NULL DEFAULT now(),
  last_used_at timestamptz,
  FOREIGN KEY (org_id, user_id) REFERENCES memberships(org_id, user_id) ON DELETE CASCADE
);
CREATE INDEX oauth_grants_org ON oauth_grants(org_id);
CREATE INDEX oauth_grants_user ON oauth_grants(user_id);

CREATE TABLE oauth_codes (
  code_hash       bytea PRIMARY KEY,
  client_id       text NOT NULL REFERENCES oauth_clients(id) ON DELETE CASCADE,
  user_id         text NOT NULL,
  org_id          text NOT NULL,
  redirect_uri    text NOT NULL,
  code_challenge  text NOT NULL,
  resource        text NOT NULL,
  scope           text NOT NULL,
  expires_at      timestamptz NOT NULL,
  FOREIGN KEY (org_id, user_id) REFERENCES memberships(org_id, user_id) ON DELETE CASCADE
);
CREATE INDEX oauth_codes_expiry ON oauth_codes(expires_at);

CREATE TABLE oauth_tokens (
  token_hash   bytea PRIMARY KEY,
  grant_id     text NOT NULL REFERENCES oauth_grants(id) ON DELETE CASCADE,
  kind         text NOT NULL CHECK (kind IN ('access', 'refresh')),
  expires_at   timestamptz NOT NULL,
  -- Refresh tokens: when this one was exchanged for a new pair, and whether its one use within the
  -- grace window after that is spent.
  rotated_at   timestamptz,
  grace_used   boolean NOT NULL DEFAULT false,
  created_at   timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX oauth_tokens_grant ON oauth_tokens(grant_id);
CREATE INDEX oauth_tokens_expiry ON oauth_tokens(expires_at);

-- Down Migration
DROP TABLE oauth_tokens;
DROP TABLE oauth_codes;
DROP TABLE oauth_grants;
DROP TABLE oauth_clients;
