-- Up Migration
-- One organization's private workflows no longer touch what every organization's catalog shares.
--
-- * The kept-search-page generation (`catalog_cache_generation`, one row) was bumped by every
--   change to any workflow, private ones included: a private build's publish (or a health check
--   of a private workflow) locked that one row until its commit, so every other organization's
--   builds and every public publish waited on it, one after another. Catalog search and suggest
--   show listed (public, active) workflows only, so only a change to a public workflow (or to a
--   search row that is or was listed) can change a kept page: only those bump it now.
-- * Typo tolerance's vocabulary (`catalog_keywords`) took the words of private workflows too
--   (names, handles, operations, site hosts). Search never shows those workflows, but whether a
--   word is in the vocabulary changes what a search of it finds (a word that is itself a keyword
--   is taken as typed; near words are the closest few), so another organization could test
--   whether some private workflow uses a word. Only listed workflows' words are kept now, and the
--   words no listed workflow holds are removed.

CREATE OR REPLACE FUNCTION catalog_search_refresh(p_api_id bigint) RETURNS void LANGUAGE plpgsql AS $$
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
  kw         text[];
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
  kw := ARRAY(SELECT DISTINCT w FROM regexp_split_to_table(
          lower(concat_ws(' ', a.handle, a.name, a.category, cat_label, op_text, site_text)), '[^[:alnum:]]+') w
        WHERE w <> '' AND length(w) <= 100 ORDER BY w);
  IF a.visibility = 'public' AND a.status = 'active' THEN
    INSERT INTO catalog_keywords (word) SELECT unnest(kw) ON CONFLICT DO NOTHING;
  END IF;
  INSERT INTO catalog_search AS cs (api_id, names, document, tsv, terms, min_cost_credits, operation_count, listed, exact, keywords)
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
    n_ops,
    a.visibility = 'public' AND a.status = 'active',
    ARRAY[ltrim(a.handle, '@'), lower(a.name)],
    kw
  )
  ON CONFLICT (api_id) DO UPDATE SET names = EXCLUDED.names, document = EXCLUDED.document, tsv = EXCLUDED.tsv,
    terms = EXCLUDED.terms, min_cost_credits = EXCLUDED.min_cost_credits, operation_count = EXCLUDED.operation_count,
    listed = EXCLUDED.listed, exact = EXCLUDED.exact, keywords = EXCLUDED.keywords;
  IF a.visibility = 'public' AND a.status = 'active' AND n_ops > 0 THEN
    INSERT INTO catalog_names (api_id, names) VALUES (p_api_id, lower(a.name || ' ' || handle_w))
      ON CONFLICT (api_id) DO UPDATE SET names = EXCLUDED.names WHERE catalog_names.names IS DISTINCT FROM EXCLUDED.names;
  ELSE
    DELETE FROM catalog_names WHERE api_id = p_api_id;
  END IF;
END $$;

-- A public API's row: any change that a page could show (private to public and back included).
DROP TRIGGER catalog_cache_apis ON apis;
DROP TRIGGER catalog_cache_apis_update ON apis;
CREATE TRIGGER catalog_cache_apis AFTER INSERT ON apis
  FOR EACH ROW WHEN (NEW.visibility = 'public') EXECUTE FUNCTION catalog_cache_bump();
CREATE TRIGGER catalog_cache_apis_delete AFTER DELETE ON apis
  FOR EACH ROW WHEN (OLD.visibility = 'public') EXECUTE FUNCTION catalog_cache_bump();
CREATE TRIGGER catalog_cache_apis_update AFTER UPDATE ON apis
  FOR EACH ROW WHEN ((OLD.visibility = 'public' OR NEW.visibility = 'public') AND OLD.* IS DISTINCT FROM NEW.*)
  EXECUTE FUNCTION catalog_cache_bump();

-- Sites and operations: only those of a public API (read by primary key; a row whose API is being
-- deleted in the same statement needs nothing: the API's own delete bumps when it was public).
CREATE FUNCTION catalog_cache_bump_public() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  IF (TG_OP <> 'DELETE' AND EXISTS (SELECT 1 FROM apis WHERE id = NEW.api_id AND visibility = 'public'))
     OR (TG_OP <> 'INSERT' AND EXISTS (SELECT 1 FROM apis WHERE id = OLD.api_id AND visibility = 'public')) THEN
    UPDATE catalog_cache_generation SET gen = gen + 1;
  END IF;
  RETURN NULL;
END $$;

DROP TRIGGER catalog_cache_sites ON api_sites;
DROP TRIGGER catalog_cache_sites_update ON api_sites;
CREATE TRIGGER catalog_cache_sites AFTER INSERT OR DELETE ON api_sites
  FOR EACH ROW EXECUTE FUNCTION catalog_cache_bump_public();
CREATE TRIGGER catalog_cache_sites_update AFTER UPDATE ON api_sites
  FOR EACH ROW WHEN (OLD.* IS DISTINCT FROM NEW.*) EXECUTE FUNCTION catalog_cache_bump_public();

DROP TRIGGER catalog_cache_operations ON operations;
DROP TRIGGER catalog_cache_operations_update ON operations;
CREATE TRIGGER catalog_cache_operations AFTER INSERT OR DELETE ON operations
  FOR EACH ROW EXECUTE FUNCTION catalog_cache_bump_public();
CREATE TRIGGER catalog_cache_operations_update AFTER UPDATE ON operations
  FOR EACH ROW WHEN (
    (OLD.api_id, OLD.name, OLD.label, OLD.description, OLD.cost_credits, OLD.performs_actions, OLD.default_version,
     OLD.access, OLD.labels, OLD.health_status, OLD.verified_at)
    IS DISTINCT FROM
    (NEW.api_id, NEW.name, NEW.label, NEW.description, NEW.cost_credits, NEW.performs_actions, NEW.default_version,
     NEW.access, NEW.labels, NEW.health_status, NEW.verified_at)
  ) EXECUTE FUNCTION catalog_cache_bump_public();

-- Search rows: only one that is or was listed.
DROP TRIGGER catalog_cache_search ON catalog_search;
DROP TRIGGER catalog_cache_search_update ON catalog_search;
CREATE TRIGGER catalog_cache_search AFTER INSERT ON catalog_search
  FOR EACH ROW WHEN (NEW.listed) EXECUTE FUNCTION catalog_cache_bump();
CREATE TRIGGER catalog_cache_search_delete AFTER DELETE ON catalog_search
  FOR EACH ROW WHEN (OLD.listed) EXECUTE FUNCTION catalog_cache_bump();
CREATE TRIGGER catalog_cache_search_update AFTER UPDATE ON catalog_search
  FOR EACH ROW WHEN ((OLD.listed OR NEW.listed) AND OLD.* IS DISTINCT FROM NEW.*) EXECUTE FUNCTION catalog_cache_bump();

-- The vocabulary: the words of listed workflows only.
DELETE FROM catalog_keywords k
 WHERE NOT EXISTS (SELECT 1 FROM catalog_search s WHERE s.listed AND s.keywords @> ARRAY[k.word]);

-- Down Migration
DROP TRIGGER catalog_cache_search_update ON catalog_search;
DROP TRIGGER catalog_cache_search_delete ON catalog_search;
DROP TRIGGER catalog_cache_search ON catalog_search;
CREATE TRIGGER catalog_cache_search AFTER INSERT OR DELETE ON catalog_search
  FOR EACH ROW EXECUTE FUNCTION catalog_cache_bump();
CREATE TRIGGER catalog_cache_search_update AFTER UPDATE ON catalog_search
  FOR EACH ROW WHEN (OLD.* IS DISTINCT FROM NEW.*) EXECUTE FUNCTION catalog_cache_bump();

DROP TRIGGER catalog_cache_operations_update ON operations;
DROP TRIGGER catalog_cache_operations ON operations;
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

DROP TRIGGER catalog_cache_sites_update ON api_sites;
DROP TRIGGER catalog_cache_sites ON api_sites;
CREATE TRIGGER catalog_cache_sites AFTER INSERT OR DELETE ON api_sites
  FOR EACH ROW EXECUTE FUNCTION catalog_cache_bump();
CREATE TRIGGER catalog_cache_sites_update AFTER UPDATE ON api_sites
  FOR EACH ROW WHEN (OLD.* IS DISTINCT FROM NEW.*) EXECUTE FUNCTION catalog_cache_bump();
DROP FUNCTION catalog_cache_bump_public();

DROP TRIGGER catalog_cache_apis_update ON apis;
DROP TRIGGER catalog_cache_apis_delete ON apis;
DROP TRIGGER catalog_cache_apis ON apis;
CREATE TRIGGER catalog_cache_apis AFTER INSERT OR DELETE ON apis
  FOR EACH ROW EXECUTE FUNCTION catalog_cache_bump();
CREATE TRIGGER catalog_cache_apis_update AFTER UPDATE ON apis
  FOR EACH ROW WHEN (OLD.* IS DISTINCT FROM NEW.*) EXECUTE FUNCTION catalog_cache_bump();

CREATE OR REPLACE FUNCTION catalog_search_refresh(p_api_id bigint) RETURNS void LANGUAGE plpgsql AS $$
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
  kw         text[];
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
  kw := ARRAY(SELECT DISTINCT w FROM regexp_split_to_table(
          lower(concat_ws(' ', a.handle, a.name, a.category, cat_label, op_text, site_text)), '[^[:alnum:]]+') w
        WHERE w <> '' AND length(w) <= 100 ORDER BY w);
  INSERT INTO catalog_keywords (word) SELECT unnest(kw) ON CONFLICT DO NOTHING;
  INSERT INTO catalog_search AS cs (api_id, names, document, tsv, terms, min_cost_credits, operation_count, listed, exact, keywords)
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
    n_ops,
    a.visibility = 'public' AND a.status = 'active',
    ARRAY[ltrim(a.handle, '@'), lower(a.name)],
    kw
  )
  ON CONFLICT (api_id) DO UPDATE SET names = EXCLUDED.names, document = EXCLUDED.document, tsv = EXCLUDED.tsv,
    terms = EXCLUDED.terms, min_cost_credits = EXCLUDED.min_cost_credits, operation_count = EXCLUDED.operation_count,
    listed = EXCLUDED.listed, exact = EXCLUDED.exact, keywords = EXCLUDED.keywords;
  IF a.visibility = 'public' AND a.status = 'active' AND n_ops > 0 THEN
    INSERT INTO catalog_names (api_id, names) VALUES (p_api_id, lower(a.name || ' ' || handle_w))
      ON CONFLICT (api_id) DO UPDATE SET names = EXCLUDED.names WHERE catalog_names.names IS DISTINCT FROM EXCLUDED.names;
  ELSE
    DELETE FROM catalog_names WHERE api_id = p_api_id;
  END IF;
END $$;

-- The words of private workflows removed by the up migration are not restored (they are added
-- again when those workflows are next published).
