-- Up Migration
-- Catalog discovery: ranked full-text + trigram search, popularity, "updated" times.
-- pg_trgm ships with PostgreSQL's contrib modules (also in the embedded binaries).

CREATE EXTENSION IF NOT EXISTS pg_trgm;

-- Category labels, searchable beside the ids (same list as shared/catalog/categories.ts).
CREATE TABLE catalog_categories (
  id     text PRIMARY KEY,
  label  text NOT NULL
);
INSERT INTO catalog_categories (id, label) VALUES
  ('ai', 'AI & machine learning'),
  ('blockchain', 'Blockchain'),
  ('commerce', 'Commerce & shopping'),
  ('communication', 'Communication'),
  ('data', 'Data'),
  ('developer-tools', 'Developer tools'),
  ('documents', 'Documents'),
  ('education', 'Education'),
  ('energy', 'Energy'),
  ('entertainment', 'Entertainment'),
  ('finance', 'Finance'),
  ('food', 'Food & drink'),
  ('government', 'Government'),
  ('health', 'Health'),
  ('identity', 'Identity'),
  ('jobs', 'Jobs'),
  ('legal', 'Legal'),
  ('logistics', 'Logistics'),
  ('maps', 'Maps'),
  ('marketing', 'Marketing'),
  ('media', 'Media'),
  ('news', 'News'),
  ('payments', 'Payments'),
  ('productivity', 'Productivity'),
  ('real-estate', 'Real estate'),
  ('science', 'Science'),
  ('search', 'Search'),
  ('security', 'Security'),
  ('social', 'Social'),
  ('sports', 'Sports'),
  ('storage', 'Storage'),
  ('travel', 'Travel'),
  ('weather', 'Weather'),
  ('other', 'Other');

-- One search document per API, kept current by triggers on apis, operations and api_sites
-- (publishApi stays unaware of it).
CREATE TABLE catalog_search (
  api_id            bigint PRIMARY KEY REFERENCES apis(id) ON DELETE CASCADE,
  names             text NOT NULL,      -- lower-case handle words and name: suggestions
  document          text NOT NULL,      -- lower-case everything searchable: trigram typo tolerance
  tsv               tsvector NOT NULL,  -- weighted full text
  terms             text[] NOT NULL,    -- what the workflow is known for (sitemap)
  min_cost_credits  int,                -- cheapest operation; NULL without operations
  operation_count   int NOT NULL DEFAULT 0
);
CREATE INDEX catalog_search_tsv ON catalog_search USING gin (tsv);
CREATE INDEX catalog_search_document_trgm ON catalog_search USING gin (document gin_trgm_ops);
CREATE INDEX catalog_search_names_trgm ON catalog_search USING gin (names gin_trgm_ops);
CREATE INDEX catalog_search_names_prefix ON catalog_search (names text_pattern_ops);

CREATE FUNCTION catalog_search_refresh(p_api_id bigint) RETURNS void LANGUAGE plpgsql AS $$
DECLARE
  a          apis%ROWTYPE;
  cat_label  text;
  handle_w   text;
  op_text    text;
  op_desc    text;
  op_terms   text[];
  min_cost   int;
  n_ops      int;
  site_text  text;
  site_terms text[];
BEGIN
  SELECT * INTO a FROM apis WHERE id = p_api_id;
  IF NOT FOUND THEN
    DELETE FROM catalog_search WHERE api_id = p_api_id;
    RETURN;
  END IF;
  SELECT label INTO cat_label FROM catalog_categories WHERE id = a.category;
  handle_w := ltrim(a.handle, '@') || ' ' || translate(ltrim(a.handle, '@'), '-_', '  ');
  SELECT coalesce(string_agg(o.name || ' ' || replace(o.name, '_', ' ') || ' ' || o.label || ' ' || array_to_string(o.labels, ' '), ' '), ''),
         coalesce(string_agg(o.description, ' '), ''),
         coalesce(array_agg(DISTINCT lower(t)) FILTER (WHERE t IS NOT NULL), '{}'),
         min(o.cost_credits), count(DISTINCT o.id)
    INTO op_text, op_desc, op_terms, min_cost, n_ops
    FROM operations o LEFT JOIN LATERAL unnest(array_prepend(o.label, o.labels)) t ON true
   WHERE o.api_id = p_api_id;
  SELECT coalesce(string_agg(s.name || ' ' || s.host || ' ' || replace(s.host, '.', ' '), ' '), ''),
         coalesce(array_agg(DISTINCT lower(s.host)), '{}')
    INTO site_text, site_terms
    FROM api_sites s WHERE s.api_id = p_api_id;
  INSERT INTO catalog_search AS cs (api_id, names, document, tsv, terms, min_cost_credits, operation_count)
  VALUES (
    p_api_id,
    lower(a.name || ' ' || handle_w),
    lower(concat_ws(' ', a.handle, handle_w, a.name, a.category, cat_label, op_text, site_text, a.description, op_desc)),
    setweight(to_tsvector('english', a.name || ' ' || handle_w), 'A')
      || setweight(to_tsvector('english', concat_ws(' ', op_text, translate(a.category, '-', ' '), cat_label)), 'B')
      || setweight(to_tsvector('simple', site_text), 'B')
      || setweight(to_tsvector('english', a.description || ' ' || op_desc), 'C'),
    ARRAY(SELECT DISTINCT x FROM unnest(array_cat(array_cat(ARRAY[lower(coalesce(cat_label, a.category))], op_terms), site_terms)) x WHERE x <> '' ORDER BY x),
    min_cost,
    n_ops
  )
  ON CONFLICT (api_id) DO UPDATE SET names = EXCLUDED.names, document = EXCLUDED.document, tsv = EXCLUDED.tsv,
    terms = EXCLUDED.terms, min_cost_credits = EXCLUDED.min_cost_credits, operation_count = EXCLUDED.operation_count;
END $$;

CREATE FUNCTION catalog_search_on_api() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  PERFORM catalog_search_refresh(NEW.id);
  RETURN NULL;
END $$;
CREATE TRIGGER catalog_search_api AFTER INSERT OR UPDATE OF handle, name, description, category ON apis
  FOR EACH ROW EXECUTE FUNCTION catalog_search_on_api();

CREATE FUNCTION catalog_search_on_child() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  IF TG_OP = 'DELETE' THEN
    PERFORM catalog_search_refresh(OLD.api_id);
  ELSE
    PERFORM catalog_search_refresh(NEW.api_id);
  END IF;
  RETURN NULL;
END $$;
CREATE TRIGGER catalog_search_operations AFTER INSERT OR UPDATE OR DELETE ON operations
  FOR EACH ROW EXECUTE FUNCTION catalog_search_on_child();
CREATE TRIGGER catalog_search_sites AFTER INSERT OR UPDATE OR DELETE ON api_sites
  FOR EACH ROW EXECUTE FUNCTION catalog_search_on_child();

-- "updated": apis.updated_at moves when what a caller sees changes (descriptive fields, an
-- operation's fields, a new contract version), not on an identical re-publish.
CREATE FUNCTION catalog_touch_api() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  IF (NEW.handle, NEW.name, NEW.description, NEW.category, NEW.website_url, NEW.logo_sha256, NEW.availability, NEW.status)
     IS DISTINCT FROM (OLD.handle, OLD.name, OLD.description, OLD.category, OLD.website_url, OLD.logo_sha256, OLD.availability, OLD.status)
     AND NEW.updated_at IS NOT DISTINCT FROM OLD.updated_at THEN
    NEW.updated_at := now();
  END IF;
  RETURN NEW;
END $$;
CREATE TRIGGER catalog_touch_api BEFORE UPDATE ON apis FOR EACH ROW EXECUTE FUNCTION catalog_touch_api();

CREATE FUNCTION catalog_operation_changed(o operations, n operations) RETURNS boolean LANGUAGE sql IMMUTABLE AS $$
  SELECT (n.label, n.description, n.cost_credits, n.performs_actions, n.default_version, n.access, n.labels)
         IS DISTINCT FROM (o.label, o.description, o.cost_credits, o.performs_actions, o.default_version, o.access, o.labels)
$$;

CREATE FUNCTION catalog_touch_operation_row() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  IF catalog_operation_changed(OLD, NEW) AND NEW.updated_at IS NOT DISTINCT FROM OLD.updated_at THEN
    NEW.updated_at := now();
  END IF;
  RETURN NEW;
END $$;
CREATE TRIGGER catalog_touch_operation_row BEFORE UPDATE ON operations
  FOR EACH ROW EXECUTE FUNCTION catalog_touch_operation_row();

CREATE FUNCTION catalog_touch_operation() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  IF TG_OP = 'UPDATE' AND NOT catalog_operation_changed(OLD, NEW) THEN
    RETURN NULL;
  END IF;
  UPDATE apis SET updated_at = now()
   WHERE id = (CASE WHEN TG_OP = 'DELETE' THEN OLD.api_id ELSE NEW.api_id END) AND updated_at <> now();
  RETURN NULL;
END $$;
CREATE TRIGGER catalog_touch_operation AFTER INSERT OR UPDATE OR DELETE ON operations
  FOR EACH ROW EXECUTE FUNCTION catalog_touch_operation();

CREATE FUNCTION catalog_touch_version() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  UPDATE apis SET updated_at = now() WHERE id = (SELECT api_id FROM operations WHERE id = NEW.operation_id) AND updated_at <> now();
  RETURN NULL;
END $$;
CREATE TRIGGER catalog_touch_version AFTER INSERT OR UPDATE OF available ON operation_versions
  FOR EACH ROW EXECUTE FUNCTION catalog_touch_version();

-- Popularity = completed (succeeded) runs per API. A counter for speed, plus the recent
-- completions with their time, so a paging cursor can rank by the count as of its first page
-- (count as of T = counter - completions after T): pages stay consistent while runs complete.
CREATE TABLE catalog_api_stats (
  api_id          bigint PRIMARY KEY REFERENCES apis(id) ON DELETE CASCADE,
  completed_runs  bigint NOT NULL DEFAULT 0
);
CREATE TABLE catalog_run_events (
  api_id  bigint NOT NULL,
  at      timestamptz NOT NULL DEFAULT clock_timestamp()
);
CREATE INDEX catalog_run_events_at ON catalog_run_events (at);

CREATE FUNCTION catalog_count_run() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
  v_api bigint;
BEGIN
  IF NEW.operation_id IS NULL THEN RETURN NULL; END IF;
  SELECT api_id INTO v_api FROM operations WHERE id = NEW.operation_id;
  IF v_api IS NULL THEN RETURN NULL; END IF;
  INSERT INTO catalog_api_stats AS s (api_id, completed_runs) VALUES (v_api, 1)
    ON CONFLICT (api_id) DO UPDATE SET completed_runs = s.completed_runs + 1;
  INSERT INTO catalog_run_events (api_id) VALUES (v_api);
  -- Cursors live 24 hours; older completion times are no longer needed.
  IF random() < 0.01 THEN
    DELETE FROM catalog_run_events WHERE at < now() - interval '25 hours';
  END IF;
  RETURN NULL;
END $$;
CREATE TRIGGER catalog_count_run_insert AFTER INSERT ON requests
  FOR EACH ROW WHEN (NEW.status = 'succeeded') EXECUTE FUNCTION catalog_count_run();
CREATE TRIGGER catalog_count_run_update AFTER UPDATE OF status ON requests
  FOR EACH ROW WHEN (NEW.status = 'succeeded' AND OLD.status IS DISTINCT FROM 'succeeded') EXECUTE FUNCTION catalog_count_run();

-- Search documents and counts for what already exists.
SELECT catalog_search_refresh(id) FROM apis;
INSERT INTO catalog_api_stats (api_id, completed_runs)
  SELECT o.api_id, count(*) FROM requests r JOIN operations o ON o.id = r.operation_id
   WHERE r.status = 'succeeded' GROUP BY o.api_id;

-- Down Migration
DROP TRIGGER catalog_count_run_update ON requests;
DROP TRIGGER catalog_count_run_insert ON requests;
DROP FUNCTION catalog_count_run();
DROP TABLE catalog_run_events;
DROP TABLE catalog_api_stats;
DROP TRIGGER catalog_touch_version ON operation_versions;
DROP FUNCTION catalog_touch_version();
DROP TRIGGER catalog_touch_operation ON operations;
DROP FUNCTION catalog_touch_operation();
DROP TRIGGER catalog_touch_operation_row ON operations;
DROP FUNCTION catalog_touch_operation_row();
DROP FUNCTION catalog_operation_changed(operations, operations);
DROP TRIGGER catalog_touch_api ON apis;
DROP FUNCTION catalog_touch_api();
DROP TRIGGER catalog_search_sites ON api_sites;
DROP TRIGGER catalog_search_operations ON operations;
DROP FUNCTION catalog_search_on_child();
DROP TRIGGER catalog_search_api ON apis;
DROP FUNCTION catalog_search_on_api();
DROP FUNCTION catalog_search_refresh(bigint);
DROP TABLE catalog_search;
DROP TABLE catalog_categories;
