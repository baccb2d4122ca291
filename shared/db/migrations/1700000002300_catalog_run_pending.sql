-- Up Migration
-- Counting a workflow's completed runs no longer locks a row every organization shares.
--
-- Until now the trigger on `requests` added 1 to the API's `catalog_api_stats` row inside the
-- transaction that settles and finalizes each successful query, and held that row's lock until the
-- commit (with its WAL flush). Every organization's successful runs of one API were therefore
-- committed one after another, and anything holding the row (a rating, a slow statement) held every
-- organization's answers of that API. 1 % of those transactions also deleted every completion time
-- older than 25 hours, however many, inside the same commit.
--
-- Now the trigger only appends the API's id to `catalog_run_pending` (an insert: no lock anyone
-- else waits for). `catalog_fold_runs()` moves the pending rows into the counter and the
-- completion times (`catalog_run_events`) in one transaction, so a `popular` cursor's
-- "count as of T = counter - completions after T" stays exact: both move together, at the fold.
-- API processes run it every CATALOG_RUN_FOLD_MS (default 2 s), so a run shows in `completed_runs`
-- within about that; pruning old completion times is maintenance's alone (pruneRunEvents).
CREATE TABLE catalog_run_pending (
  api_id  bigint NOT NULL
);

CREATE OR REPLACE FUNCTION catalog_count_run() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
  v_api bigint;
BEGIN
  IF NEW.operation_id IS NULL THEN RETURN NULL; END IF;
  SELECT api_id INTO v_api FROM operations WHERE id = NEW.operation_id;
  IF v_api IS NULL THEN RETURN NULL; END IF;
  INSERT INTO catalog_run_pending (api_id) VALUES (v_api);
  RETURN NULL;
END $$;

-- Moves what is pending into the counters and completion times; returns the runs moved. One fold
-- at a time (another caller returns 0 at once): the rows it takes are its own, deleted as read
-- (rows of transactions not yet committed stay for the next fold), and counters are updated in
-- api_id order. Runs of an API deleted meanwhile are dropped with it.
CREATE FUNCTION catalog_fold_runs() RETURNS bigint LANGUAGE plpgsql AS $$
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

-- Down Migration
SELECT catalog_fold_runs();
CREATE OR REPLACE FUNCTION catalog_count_run() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
  v_api bigint;
BEGIN
  IF NEW.operation_id IS NULL THEN RETURN NULL; END IF;
  SELECT api_id INTO v_api FROM operations WHERE id = NEW.operation_id;
  IF v_api IS NULL THEN RETURN NULL; END IF;
  INSERT INTO catalog_api_stats AS s (api_id, completed_runs) VALUES (v_api, 1)
    ON CONFLICT (api_id) DO UPDATE SET completed_runs = s.completed_runs + 1;
  INSERT INTO catalog_run_events (api_id) VALUES (v_api);
  IF random() < 0.01 THEN
    DELETE FROM catalog_run_events WHERE at < now() - interval '25 hours';
  END IF;
  RETURN NULL;
END $$;
DROP FUNCTION catalog_fold_runs();
DROP TABLE catalog_run_pending;
