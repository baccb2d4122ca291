-- Up Migration
-- Every workflow has an owning organization; uploaded files; ratings and their weight in the
-- catalog's `popular` order.

-- The demo catalog (and anything published without an owner) belongs to the platform
-- organization. It is created here so existing public APIs can be given an owner before the column
-- becomes NOT NULL; the seed ensures it too (shared/db/orgs.ts, PLATFORM_ORG_ID).
INSERT INTO organizations (id, name) VALUES ('org_platform', 'Platform') ON CONFLICT (id) DO NOTHING;
INSERT INTO credit_balances (org_id) VALUES ('org_platform') ON CONFLICT (org_id) DO NOTHING;
UPDATE apis SET owner_org_id = 'org_platform' WHERE owner_org_id IS NULL;

-- Visibility no longer follows from having an owner: private <=> visibility = 'private'.
DO $$
DECLARE c text;
BEGIN
  FOR c IN SELECT conname FROM pg_constraint
            WHERE conrelid = 'apis'::regclass AND contype = 'c' AND pg_get_constraintdef(oid) LIKE '%owner_org_id%'
  LOOP
    EXECUTE format('ALTER TABLE apis DROP CONSTRAINT %I', c);
  END LOOP;
END $$;
ALTER TABLE apis ALTER COLUMN owner_org_id SET NOT NULL;
CREATE INDEX apis_owner ON apis(owner_org_id);

-- Uploads (POST /v1/files): private to their organization, kept 30 days. Written only by
-- shared/db/files.ts.
CREATE TABLE files (
  id            text PRIMARY KEY CHECK (id ~ '^file_[0-9a-f]{32}$'),
  org_id        text NOT NULL REFERENCES organizations(id),
  name          text NOT NULL CHECK (char_length(name) BETWEEN 1 AND 160),
  size          bigint NOT NULL CHECK (size >= 0 AND size <= 10485760),
  content_type  text NOT NULL,
  sha256        text NOT NULL CHECK (sha256 ~ '^[0-9a-f]{64}$'),
  bytes         bytea NOT NULL CHECK (octet_length(bytes) = size),
  created_at    timestamptz NOT NULL DEFAULT now(),
  expires_at    timestamptz NOT NULL
);
CREATE INDEX files_org ON files(org_id, created_at);
CREATE INDEX files_expires ON files(expires_at);

-- One rating per request, by the organization that made it. Written only by
-- shared/db/feedback.ts. (requests.feedback from the first migration is no longer used.)
CREATE TABLE request_feedback (
  request_id  text PRIMARY KEY REFERENCES requests(id) ON DELETE CASCADE,
  org_id      text NOT NULL REFERENCES organizations(id),
  api_id      bigint NOT NULL REFERENCES apis(id) ON DELETE CASCADE,
  value       smallint NOT NULL CHECK (value IN (1, -1)),
  created_at  timestamptz NOT NULL DEFAULT now(),
  updated_at  timestamptz NOT NULL DEFAULT now()
);
-- The independence rule counts an organization's ratings of one API in a window.
CREATE INDEX request_feedback_org_api ON request_feedback(org_id, api_id, created_at);

-- Popularity = completed runs + 5 x net rating (a rating needs a paid, successful run and an
-- organization's ratings of one API are capped, so one rating may weigh a few runs).
CREATE FUNCTION catalog_rating_weight() RETURNS bigint LANGUAGE sql IMMUTABLE AS $$ SELECT 5::bigint $$;
ALTER TABLE catalog_api_stats
  ADD COLUMN rating_up bigint NOT NULL DEFAULT 0 CHECK (rating_up >= 0),
  ADD COLUMN rating_down bigint NOT NULL DEFAULT 0 CHECK (rating_down >= 0),
  ADD COLUMN popularity bigint GENERATED ALWAYS AS (completed_runs + catalog_rating_weight() * (rating_up - rating_down)) STORED;
CREATE INDEX catalog_api_stats_popularity ON catalog_api_stats (popularity DESC, api_id);
-- Rating changes with their time and weighted points, so a `popular` cursor ranks by the
-- popularity as of its first page, like catalog_run_events does for runs.
CREATE TABLE catalog_rating_events (
  api_id  bigint NOT NULL,
  points  bigint NOT NULL,
  at      timestamptz NOT NULL DEFAULT clock_timestamp()
);
CREATE INDEX catalog_rating_events_api_at ON catalog_rating_events (api_id, at);
CREATE INDEX catalog_rating_events_at ON catalog_rating_events (at);

-- Down Migration
DROP TABLE catalog_rating_events;
DROP INDEX catalog_api_stats_popularity;
ALTER TABLE catalog_api_stats DROP COLUMN popularity, DROP COLUMN rating_down, DROP COLUMN rating_up;
DROP FUNCTION catalog_rating_weight();
DROP TABLE request_feedback;
DROP TABLE files;
DROP INDEX apis_owner;
ALTER TABLE apis ALTER COLUMN owner_org_id DROP NOT NULL;
UPDATE apis SET owner_org_id = NULL WHERE visibility = 'public';
ALTER TABLE apis ADD CONSTRAINT apis_check CHECK ((visibility = 'private') = (owner_org_id IS NOT NULL));
