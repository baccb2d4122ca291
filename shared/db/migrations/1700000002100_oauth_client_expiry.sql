-- Up Migration
-- Registered clients expire (shared/oauth/clients.ts, deleteIdleClients): registration needs no
-- sign-in, so without an end the table only grows. A client is removed by maintenance once it has
-- no live token or code and was last used longer ago than OAUTH_CLIENT_IDLE_HOURS. "Used" is when
-- tokens were last issued to it (a grant created, a refresh): last_used_at. NULL means never used
-- (no grant ever made); registration refuses new clients while too many such are recent, so the
-- partial index serves that count. Existing clients get the last use their grants still show.
ALTER TABLE oauth_clients ADD COLUMN last_used_at timestamptz;
UPDATE oauth_clients c SET last_used_at = g.last
  FROM (SELECT client_id, max(greatest(created_at, last_used_at)) AS last FROM oauth_grants GROUP BY client_id) g
 WHERE g.client_id = c.id;
CREATE INDEX oauth_clients_unused ON oauth_clients (created_at) WHERE last_used_at IS NULL AND kind = 'dcr';
-- Removing a client looks up (and cascades to) its grants and codes by client_id: without these,
-- every removal would scan both tables.
CREATE INDEX oauth_grants_client ON oauth_grants (client_id);
CREATE INDEX oauth_codes_client ON oauth_codes (client_id);

-- Down Migration
DROP INDEX oauth_codes_client;
DROP INDEX oauth_grants_client;
DROP INDEX oauth_clients_unused;
ALTER TABLE oauth_clients DROP COLUMN last_used_at;
