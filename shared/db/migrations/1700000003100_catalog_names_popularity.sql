-- Up Migration
-- Search-box suggestions read their ranking from the narrow table they match in (issue 11).
--
-- `suggest` matched names in `catalog_names` and ranked them by `catalog_api_stats.popularity`:
-- every suggestion read all its matches from the heap (a one-letter prefix matches a sixth of a
-- 10,000-workflow catalog), hash-joined them with a sequential scan of every workflow's counters,
-- then sorted. At 10,000 workflows that was 3.3–7.7 ms inside PostgreSQL per suggestion, against a
-- target of 3 ms over HTTP. Now the popularity is a column of `catalog_names`, the prefix index
-- carries it (an index-only scan of the names that start with the prefix, sorted in memory), and
-- the word-prefix matches (trigram index) are read only when the name prefixes do not fill the
-- page (shared/db/catalog-search.ts). The popularity index is for the empty box (the most popular
-- first, a walk that stops at the limit).
--
-- The copy is kept by triggers, so every writer keeps it without knowing: a change of the counters'
-- row (runs folded every few seconds, a rating) is copied to the name's row, and a name's row made
-- by catalog_search_refresh starts with the counters' value. Both take the workflow's transaction
-- lock first (class 602), so a name made while its counters change cannot miss the change: whichever
-- commits second reads (in a statement after the lock) what the first wrote.
ALTER TABLE catalog_names ADD COLUMN popularity bigint NOT NULL DEFAULT 0;
CREATE INDEX catalog_names_popular ON catalog_names (popularity DESC, api_id);
DROP INDEX catalog_names_prefix;
CREATE INDEX catalog_names_prefix ON catalog_names (names text_pattern_ops) INCLUDE (popularity, api_id);

CREATE FUNCTION catalog_names_popularity_copy() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  PERFORM pg_advisory_xact_lock(602, hashint8(NEW.api_id));
  UPDATE catalog_names SET popularity = NEW.popularity WHERE api_id = NEW.api_id AND popularity IS DISTINCT FROM NEW.popularity;
  RETURN NULL;
END $$;
-- AFTER: `popularity` is a generated column, computed only after BEFORE triggers have run.
CREATE TRIGGER catalog_names_popularity_insert AFTER INSERT ON catalog_api_stats
  FOR EACH ROW WHEN (NEW.popularity <> 0) EXECUTE FUNCTION catalog_names_popularity_copy();
CREATE TRIGGER catalog_names_popularity_update AFTER UPDATE ON catalog_api_stats
  FOR EACH ROW WHEN (OLD.popularity IS DISTINCT FROM NEW.popularity) EXECUTE FUNCTION catalog_names_popularity_copy();

CREATE FUNCTION catalog_names_popularity_fill() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  PERFORM pg_advisory_xact_lock(602, hashint8(NEW.api_id));
  NEW.popularity := coalesce((SELECT s.popularity FROM catalog_api_stats s WHERE s.api_id = NEW.api_id), 0);
  RETURN NEW;
END $$;
CREATE TRIGGER catalog_names_popularity_fill BEFORE INSERT ON catalog_names
  FOR EACH ROW EXECUTE FUNCTION catalog_names_popularity_fill();

-- The copy of what is there now, after the triggers: creating them locked catalog_api_stats
-- against writes until this migration commits, so no change falls between the two.
UPDATE catalog_names n SET popularity = s.popularity FROM catalog_api_stats s WHERE s.api_id = n.api_id AND s.popularity <> 0;

-- Down Migration
DROP TRIGGER catalog_names_popularity_fill ON catalog_names;
DROP FUNCTION catalog_names_popularity_fill();
DROP TRIGGER catalog_names_popularity_update ON catalog_api_stats;
DROP TRIGGER catalog_names_popularity_insert ON catalog_api_stats;
DROP FUNCTION catalog_names_popularity_copy();
DROP INDEX catalog_names_popular;
DROP INDEX catalog_names_prefix;
CREATE INDEX catalog_names_prefix ON catalog_names (names text_pattern_ops);
ALTER TABLE catalog_names DROP COLUMN popularity;
