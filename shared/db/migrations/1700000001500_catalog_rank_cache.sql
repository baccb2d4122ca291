-- Up Migration
-- Catalog search speed, part 2 (issue 11).
--
-- 1. catalog_rank: the columns a search ranks and filters by (listed, operation count, cheapest
--    cost, tsvector, keywords, exact names), one narrow row per workflow, copied from
--    catalog_search by a trigger. A first page reads and scores every candidate row (1,746 for
--    "weather" at 10,000 workflows); the wide search row (documents, names, terms) made that
--    read three times slower than the same candidates from this table (EXPLAIN ANALYZE:
--    8.3 ms against 3.1 ms, 1,345 against 834 heap blocks).
--
-- 2. The catalog cache generation, below.

CREATE TABLE catalog_rank (
  api_id            bigint PRIMARY KEY REFERENCES apis(id) ON DELETE CASCADE,
  listed            boolean NOT NULL,
  operation_count   integer NOT NULL,
  min_cost_credits  integer,
  tsv               tsvector NOT NULL,
  keywords          text[] NOT NULL,
  exact             text[] NOT NULL
);
CREATE INDEX catalog_rank_tsv ON catalog_rank USING gin (tsv) WITH (fastupdate = off);
CREATE INDEX catalog_rank_keywords ON catalog_rank USING gin (keywords) WITH (fastupdate = off);

CREATE FUNCTION catalog_rank_copy() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  IF TG_OP = 'DELETE' THEN
    DELETE FROM catalog_rank WHERE api_id = OLD.api_id;
  ELSE
    INSERT INTO catalog_rank AS r (api_id, listed, operation_count, min_cost_credits, tsv, keywords, exact)
    VALUES (NEW.api_id, NEW.listed, NEW.operation_count, NEW.min_cost_credits, NEW.tsv, NEW.keywords, NEW.exact)
    ON CONFLICT (api_id) DO UPDATE SET listed = EXCLUDED.listed, operation_count = EXCLUDED.operation_count,
      min_cost_credits = EXCLUDED.min_cost_credits, tsv = EXCLUDED.tsv, keywords = EXCLUDED.keywords, exact = EXCLUDED.exact
      WHERE (r.listed, r.operation_count, r.min_cost_credits, r.tsv, r.keywords, r.exact)
            IS DISTINCT FROM (EXCLUDED.listed, EXCLUDED.operation_count, EXCLUDED.min_cost_credits, EXCLUDED.tsv, EXCLUDED.keywords, EXCLUDED.exact);
  END IF;
  RETURN NULL;
END $$;
CREATE TRIGGER catalog_rank_copy AFTER INSERT OR UPDATE OR DELETE ON catalog_search
  FOR EACH ROW EXECUTE FUNCTION catalog_rank_copy();

INSERT INTO catalog_rank (api_id, listed, operation_count, min_cost_credits, tsv, keywords, exact)
SELECT api_id, listed, operation_count, min_cost_credits, tsv, keywords, exact FROM catalog_search;

-- 2. Catalog cache generation.
-- Catalog cache generation (issue 11, catalog speed): one counter that moves, in the same
-- transaction, whenever anything a catalog search page shows or ranks by changes — a workflow's
-- row (name, visibility, status, logo, ...), its sites, its operations (cost, access, health),
-- its search document or the typo vocabulary. An API process may keep a search page it computed
-- together with the generation it read in the same statement, and serve it again only after
-- reading the same generation: an unpublish, a visibility change or an edit committed in
-- between always makes it compute the page afresh. Popularity (catalog_api_stats) is not
-- covered: completed-run counts are read fresh on every answer, and the `popular` order is never
-- kept.
--
-- Row-level triggers only, never statement-level: catalog_search_refresh upserts (INSERT ... ON
-- CONFLICT) on every operation update, which would fire a statement-level INSERT trigger even when
-- nothing changed. Updates skip identical rewrites; for operations only the columns a page shows
-- count, so a health check that only moves health_checked_at / health_detail leaves the
-- generation alone.

CREATE TABLE catalog_cache_generation (
  one  boolean PRIMARY KEY DEFAULT true CHECK (one),
  gen  bigint NOT NULL
);
INSERT INTO catalog_cache_generation (one, gen) VALUES (true, 1);

CREATE FUNCTION catalog_cache_bump() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  UPDATE catalog_cache_generation SET gen = gen + 1;
  RETURN NULL;
END $$;

CREATE TRIGGER catalog_cache_apis AFTER INSERT OR DELETE ON apis
  FOR EACH ROW EXECUTE FUNCTION catalog_cache_bump();
CREATE TRIGGER catalog_cache_apis_update AFTER UPDATE ON apis
  FOR EACH ROW WHEN (OLD.* IS DISTINCT FROM NEW.*) EXECUTE FUNCTION catalog_cache_bump();

CREATE TRIGGER catalog_cache_sites AFTER INSERT OR DELETE ON api_sites
  FOR EACH ROW EXECUTE FUNCTION catalog_cache_bump();
CREATE TRIGGER catalog_cache_sites_update AFTER UPDATE ON api_sites
  FOR EACH ROW WHEN (OLD.* IS DISTINCT FROM NEW.*) EXECUTE FUNCTION catalog_cache_bump();

CREATE TRIGGER catalog_cache_operations AFTER INSERT OR DELETE ON operations
  FOR EACH ROW EXECUTE FUNCTION catalog_cache_bump();
CREATE TRIGGER catalog_cache_operations_update AFTER UPDATE ON operations
  FOR EACH ROW WHEN (
    (OLD.api_id, OLD.name, OLD.label, OLD.description, OLD.cost_credits, OLD.performs_actions, OLD.default_version,
     OLD.access, OLD.labels, OLD.health_status, OLD.verified_at)
    IS DISTINCT FROM
    (NEW.api_id, NEW.name, NEW.label, NEW.description, NEW.cost_credits, NEW.performs_actions, NEW.default_version,
     NEW.access, NEW.labels, NEW.health_status, NEW.verified_at)
  ) EXECUTE FUNCTION catalog_cache_bump();

CREATE TRIGGER catalog_cache_search AFTER INSERT OR DELETE ON catalog_search
  FOR EACH ROW EXECUTE FUNCTION catalog_cache_bump();
CREATE TRIGGER catalog_cache_search_update AFTER UPDATE ON catalog_search
  FOR EACH ROW WHEN (OLD.* IS DISTINCT FROM NEW.*) EXECUTE FUNCTION catalog_cache_bump();

-- New near words (typo tolerance) change what a query finds.
CREATE TRIGGER catalog_cache_keywords AFTER INSERT OR DELETE ON catalog_keywords
  FOR EACH ROW EXECUTE FUNCTION catalog_cache_bump();

-- Down Migration
DROP TRIGGER catalog_rank_copy ON catalog_search;
DROP FUNCTION catalog_rank_copy();
DROP TABLE catalog_rank;
DROP TRIGGER catalog_cache_keywords ON catalog_keywords;
DROP TRIGGER catalog_cache_search_update ON catalog_search;
DROP TRIGGER catalog_cache_search ON catalog_search;
DROP TRIGGER catalog_cache_operations_update ON operations;
DROP TRIGGER catalog_cache_operations ON operations;
DROP TRIGGER catalog_cache_sites_update ON api_sites;
DROP TRIGGER catalog_cache_sites ON api_sites;
DROP TRIGGER catalog_cache_apis_update ON apis;
DROP TRIGGER catalog_cache_apis ON apis;
DROP FUNCTION catalog_cache_bump();
DROP TABLE catalog_cache_generation;
