-- Up Migration
-- Each workflow's search item, built when the workflow changes instead of on every search (issue 11).
--
-- A first page of GET /v1/catalog ranked its candidates and then built each of its 61 items with
-- three correlated subqueries (the counters, the sites as JSON, the operations as JSON): about a
-- third of a cold search (bench/results/2026-12-02-issue-11-session39.md; 3.5 ms of a 13 ms
-- statement at 10,000 workflows, against 0.9 ms reading the same items kept as JSON). Now the
-- part of an item that changes only when its workflow does (the workflow's row, its sites, its
-- operations with their cost, access and health) is kept here as JSON, written by triggers in the
-- transaction of the change; a page reads it by primary key. The completed-run count is not in
-- it (it moves with every run and is read fresh), nor are URLs (they depend on the base URL
-- asked for); operations over a max_cost_credits limit are left out when the page is built.
--
-- Every writer keeps it without knowing: any insert, delete or shown-column update of a
-- workflow, a site or an operation rebuilds that workflow's item, at commit (deferred
-- triggers). The rebuild takes the workflow's transaction lock first (class 603), then reads in
-- statements after it: two transactions changing one workflow (a health check and a publish)
-- cannot both build from what they saw before the other committed; the second to take the lock
-- reads what the first wrote. At commit, not in the statement: a publish that held the lock
-- while it went on to update an operation row a health check had locked (and the check then
-- waiting for the lock) would be a deadlock; at commit a transaction waits for no row any more.

CREATE TABLE catalog_items (
  api_id  bigint PRIMARY KEY REFERENCES apis(id) ON DELETE CASCADE,
  item    json NOT NULL
);

-- The item as it is now (NULL for an unknown workflow). Also what the kept copy is tested against.
CREATE FUNCTION catalog_item_build(p_api_id bigint) RETURNS json LANGUAGE sql STABLE AS $$
  SELECT json_build_object(
           'id', a.id, 'handle', a.handle, 'name', a.name, 'description', a.description, 'category', a.category,
           'website_url', a.website_url, 'logo_sha256', a.logo_sha256, 'availability', a.availability,
           'created_at', a.created_at, 'updated_at', a.updated_at,
           'sites', coalesce((SELECT json_agg(json_build_object('name', s.name, 'host', s.host, 'icon_sha256', s.icon_sha256) ORDER BY s.position)
                                FROM api_sites s WHERE s.api_id = a.id), '[]'),
           'ops', coalesce((SELECT json_agg(json_build_object('id', o.id, 'name', o.name, 'label', o.label,
                                'cost_credits', o.cost_credits, 'performs_actions', o.performs_actions, 'default_version', o.default_version,
                                'access', o.access, 'health_status', o.health_status, 'verified_at', o.verified_at) ORDER BY o.id)
                              FROM operations o WHERE o.api_id = a.id), '[]'))
    FROM apis a WHERE a.id = p_api_id
$$;

CREATE FUNCTION catalog_item_refresh(p_api_id bigint) RETURNS void LANGUAGE plpgsql AS $$
DECLARE
  built json;
BEGIN
  PERFORM pg_advisory_xact_lock(603, hashint8(p_api_id));
  built := catalog_item_build(p_api_id);
  IF built IS NULL THEN
    DELETE FROM catalog_items WHERE api_id = p_api_id;
  ELSE
    INSERT INTO catalog_items AS c (api_id, item) VALUES (p_api_id, built)
      ON CONFLICT (api_id) DO UPDATE SET item = EXCLUDED.item WHERE c.item::text IS DISTINCT FROM EXCLUDED.item::text;
  END IF;
END $$;

CREATE FUNCTION catalog_item_on_api() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  PERFORM catalog_item_refresh(NEW.id);
  RETURN NULL;
END $$;
CREATE CONSTRAINT TRIGGER catalog_item_api AFTER INSERT ON apis DEFERRABLE INITIALLY DEFERRED
  FOR EACH ROW EXECUTE FUNCTION catalog_item_on_api();
CREATE CONSTRAINT TRIGGER catalog_item_api_update AFTER UPDATE ON apis DEFERRABLE INITIALLY DEFERRED
  FOR EACH ROW WHEN (
    (OLD.handle, OLD.name, OLD.description, OLD.category, OLD.website_url, OLD.logo_sha256, OLD.availability, OLD.created_at, OLD.updated_at)
    IS DISTINCT FROM
    (NEW.handle, NEW.name, NEW.description, NEW.category, NEW.website_url, NEW.logo_sha256, NEW.availability, NEW.created_at, NEW.updated_at)
  ) EXECUTE FUNCTION catalog_item_on_api();

-- Sites and operations: the workflow of the old row and of the new one (a row moved between two).
-- A child deleted by its workflow's own delete finds no workflow and leaves nothing behind.
CREATE FUNCTION catalog_item_on_child() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  IF TG_OP <> 'INSERT' THEN
    PERFORM catalog_item_refresh(OLD.api_id);
  END IF;
  IF TG_OP <> 'DELETE' AND (TG_OP = 'INSERT' OR NEW.api_id <> OLD.api_id) THEN
    PERFORM catalog_item_refresh(NEW.api_id);
  END IF;
  RETURN NULL;
END $$;
CREATE CONSTRAINT TRIGGER catalog_item_sites AFTER INSERT OR DELETE ON api_sites DEFERRABLE INITIALLY DEFERRED
  FOR EACH ROW EXECUTE FUNCTION catalog_item_on_child();
CREATE CONSTRAINT TRIGGER catalog_item_sites_update AFTER UPDATE ON api_sites DEFERRABLE INITIALLY DEFERRED
  FOR EACH ROW WHEN (OLD.* IS DISTINCT FROM NEW.*) EXECUTE FUNCTION catalog_item_on_child();
CREATE CONSTRAINT TRIGGER catalog_item_operations AFTER INSERT OR DELETE ON operations DEFERRABLE INITIALLY DEFERRED
  FOR EACH ROW EXECUTE FUNCTION catalog_item_on_child();
-- Only the columns an item shows: a health check that moves health_checked_at / health_detail
-- (or a publish that moves updated_at alone) writes nothing here.
CREATE CONSTRAINT TRIGGER catalog_item_operations_update AFTER UPDATE ON operations DEFERRABLE INITIALLY DEFERRED
  FOR EACH ROW WHEN (
    (OLD.api_id, OLD.name, OLD.label, OLD.cost_credits, OLD.performs_actions, OLD.default_version, OLD.access, OLD.health_status, OLD.verified_at)
    IS DISTINCT FROM
    (NEW.api_id, NEW.name, NEW.label, NEW.cost_credits, NEW.performs_actions, NEW.default_version, NEW.access, NEW.health_status, NEW.verified_at)
  ) EXECUTE FUNCTION catalog_item_on_child();

-- What is there now, after the triggers: creating them locked apis, api_sites and operations
-- against writes until this migration commits, so no change falls between the two.
INSERT INTO catalog_items (api_id, item) SELECT id, catalog_item_build(id) FROM apis;

-- Down Migration
DROP TRIGGER catalog_item_operations_update ON operations;
DROP TRIGGER catalog_item_operations ON operations;
DROP TRIGGER catalog_item_sites_update ON api_sites;
DROP TRIGGER catalog_item_sites ON api_sites;
DROP FUNCTION catalog_item_on_child();
DROP TRIGGER catalog_item_api_update ON apis;
DROP TRIGGER catalog_item_api ON apis;
DROP FUNCTION catalog_item_on_api();
DROP FUNCTION catalog_item_refresh(bigint);
DROP FUNCTION catalog_item_build(bigint);
DROP TABLE catalog_items;
