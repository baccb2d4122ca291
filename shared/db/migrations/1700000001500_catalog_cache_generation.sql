-- Up Migration
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
