-- Up Migration
-- A `popular` cursor's "as of" count reads one row per workflow per 10 seconds, not one per run.
--
-- A `popular` page ranks by popularity as of its first page: the counter minus what was counted
-- after that instant, summed from `catalog_run_events` (one row per completed run) and
-- `catalog_rating_events` (one row per rating change). A cursor may be 24 hours old, and anyone can
-- send one (no key): each such page summed every run and rating change of the last day on the
-- platform (millions of rows at this service's own throughput), and a rating toggled in a loop
-- added a row per toggle.
--
-- Now runs and rating points are added up per workflow per 10-second bucket, in rows stamped with
-- the bucket's start, and cursors rank as of a bucket boundary (shared/db/catalog-search.ts): the
-- count as of boundary B is the counter minus the buckets stamped at or after B, exact as before.
-- A day is at most 8,640 rows per active workflow, however many runs or ratings it had.
--
-- The per-event tables stay until their rows age out (25 hours): the sum reads both, and an older
-- process writing them during a rolling deploy is still counted exactly. A later migration drops them.
CREATE TABLE catalog_run_buckets (
  api_id  bigint NOT NULL,
  at      timestamptz NOT NULL,
  n       bigint NOT NULL CHECK (n > 0),
  PRIMARY KEY (api_id, at)
);
CREATE INDEX catalog_run_buckets_at ON catalog_run_buckets (at);
CREATE TABLE catalog_rating_buckets (
  api_id  bigint NOT NULL,
  at      timestamptz NOT NULL,
  points  bigint NOT NULL,
  PRIMARY KEY (api_id, at)
);
CREATE INDEX catalog_rating_buckets_at ON catalog_rating_buckets (at);

-- The 10-second bucket an instant falls in, as its start.
CREATE FUNCTION catalog_event_bucket(t timestamptz) RETURNS timestamptz LANGUAGE sql IMMUTABLE AS $$
  SELECT date_bin(interval '10 seconds', t, timestamptz '1970-01-01 00:00:00+00')
$$;

-- As in 1700000002300, but the completions are added to the bucket of the fold's instant.
CREATE OR REPLACE FUNCTION catalog_fold_runs() RETURNS bigint LANGUAGE plpgsql AS $$
DECLARE
  moved bigint;
BEGIN
  IF NOT pg_try_advisory_xact_lock(hashtext('catalog_fold_runs')) THEN RETURN 0; END IF;
  WITH taken AS (
    DELETE FROM catalog_run_pending RETURNING api_id
  ), counted AS (
    SELECT t.api_id, count(*) AS n FROM taken t JOIN apis a ON a.id = t.api_id GROUP BY t.api_id
  ), counters AS (
    INSERT INTO catalog_api_stats AS s (api_id, completed_runs)
      SELECT api_id, n FROM counted ORDER BY api_id
    ON CONFLICT (api_id) DO UPDATE SET completed_runs = s.completed_runs + excluded.completed_runs
  ), times AS (
    INSERT INTO catalog_run_buckets AS b (api_id, at, n)
      SELECT api_id, catalog_event_bucket(now()), n FROM counted ORDER BY api_id
    ON CONFLICT (api_id, at) DO UPDATE SET n = b.n + excluded.n
  )
  -- Data-modifying WITH parts run once, whether or not this reads them.
  SELECT coalesce(sum(n), 0) INTO moved FROM counted;
  RETURN moved;
END $$;

-- Down Migration
CREATE OR REPLACE FUNCTION catalog_fold_runs() RETURNS bigint LANGUAGE plpgsql AS $$
DECLARE
  moved bigint;
BEGIN
  IF NOT pg_try_advisory_xact_lock(hashtext('catalog_fold_runs')) THEN RETURN 0; END IF;
  WITH taken AS (
    DELETE FROM catalog_run_pending RETURNING api_id
  ), counted AS (
    SELECT t.api_id, count(*) AS n FROM taken t JOIN apis a ON a.id = t.api_id GROUP BY t.api_id
  ), counters AS (
    INSERT INTO catalog_api_stats AS s (api_id, completed_runs)
      SELECT api_id, n FROM counted ORDER BY api_id
    ON CONFLICT (api_id) DO UPDATE SET completed_runs = s.completed_runs + excluded.completed_runs
  ), times AS (
    INSERT INTO catalog_run_events (api_id) SELECT c.api_id FROM counted c, generate_series(1, c.n)
  )
  -- Data-modifying WITH parts run once, whether or not this reads them.
  SELECT coalesce(sum(n), 0) INTO moved FROM counted;
  RETURN moved;
END $$;
-- Back to one row per run or change, at its bucket's start.
INSERT INTO catalog_run_events (api_id, at) SELECT b.api_id, b.at FROM catalog_run_buckets b, generate_series(1, b.n);
INSERT INTO catalog_rating_events (api_id, points, at) SELECT api_id, points, at FROM catalog_rating_buckets WHERE points <> 0;
DROP FUNCTION catalog_event_bucket(timestamptz);
DROP TABLE catalog_rating_buckets;
DROP TABLE catalog_run_buckets;
