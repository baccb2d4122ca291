-- Up Migration
-- Catalog search speed (10,000 workflows: a search page and a suggestion in a few milliseconds).
--
-- * `listed`: public and active, kept on the search row, so search and suggest read one table.
-- * `exact`: handle without "@" and lower-case name, for the exact-match bonus.
-- * `keywords`: the distinct lower-case words of names, handle, operation names and labels,
--   category and site names and hosts (never descriptions), with a GIN index. Typo tolerance
--   looks a query word up in the small vocabulary `catalog_keywords` (trigram index, word
--   similarity on single words) and then finds the workflows holding one of the near words
--   through that GIN index — instead of computing word_similarity over every row.
-- * `catalog_names`: a narrow copy of `names` for listed workflows with operations, so
--   suggestions ("wea%", "% wea%", near misses) scan a few pages, not the wide search rows.
-- * The small new GIN indexes keep no pending list (fastupdate off); a long pending list makes
--   the planner skip a GIN index (after a bulk load: flush it, as below, or VACUUM).

ALTER TABLE catalog_search
  ADD COLUMN listed   boolean NOT NULL DEFAULT false,
  ADD COLUMN exact    text[]  NOT NULL DEFAULT '{}',
  ADD COLUMN keywords text[]  NOT NULL DEFAULT '{}';

-- Every word that is or was in some workflow's keywords (a word no longer used just matches nothing).
CREATE TABLE catalog_keywords (
  word  text PRIMARY KEY
);
CREATE INDEX catalog_keywords_trgm ON catalog_keywords USING gin (word gin_trgm_ops) WITH (fastupdate = off);
CREATE INDEX catalog_search_keywords ON catalog_search USING gin (keywords) WITH (fastupdate = off);

CREATE TABLE catalog_names (
  api_id  bigint PRIMARY KEY REFERENCES apis(id) ON DELETE CASCADE,
  names   text NOT NULL
);
CREATE INDEX catalog_names_prefix ON catalog_names (names text_pattern_ops);
CREATE INDEX catalog_names_trgm ON catalog_names USING gin (names gin_trgm_ops) WITH (fastupdate = off);

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

-- `listed` follows visibility and status too.
DROP TRIGGER catalog_search_api ON apis;
CREATE TRIGGER catalog_search_api AFTER INSERT OR UPDATE OF handle, name, description, category, visibility, status ON apis
  FOR EACH ROW EXECUTE FUNCTION catalog_search_on_api();

-- Popular without a query: the top of the counter first.
CREATE INDEX catalog_api_stats_runs ON catalog_api_stats (completed_runs DESC, api_id);
-- "As of" counts per API for popular cursors.
CREATE INDEX catalog_run_events_api_at ON catalog_run_events (api_id, at);

SELECT catalog_search_refresh(id) FROM apis;
SELECT gin_clean_pending_list('catalog_search_tsv'), gin_clean_pending_list('catalog_search_names_trgm'),
       gin_clean_pending_list('catalog_search_document_trgm');

-- Down Migration
DROP INDEX catalog_run_events_api_at;
DROP INDEX catalog_api_stats_runs;
DROP TABLE catalog_names;
DROP TRIGGER catalog_search_api ON apis;
CREATE TRIGGER catalog_search_api AFTER INSERT OR UPDATE OF handle, name, description, category ON apis
  FOR EACH ROW EXECUTE FUNCTION catalog_search_on_api();
DROP INDEX catalog_search_keywords;
DROP TABLE catalog_keywords;
ALTER TABLE catalog_search DROP COLUMN keywords, DROP COLUMN exact, DROP COLUMN listed;
-- catalog_search_refresh keeps filling the dropped columns until 1700000000100 is re-applied; restore it:
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
