-- Up Migration
-- The prompt router's typo vocabulary no longer holds other organizations' private words.
--
-- `router_keywords` took the words (operation names, labels, field names, enum values, API name,
-- handle, site hosts) of every workflow, private ones included, and never lost one. Retrieval
-- (shared/router/retrieve.ts) takes a prompt word as typed when it is in the vocabulary and
-- otherwise expands it to its nearest few words, so whether a word expanded (seen in a prompt's
-- `details.candidates`) told any organization whether some other organization's private workflow
-- used that word: one free request per word. Migration 1700000002400 closed the same oracle for
-- `catalog_keywords`; this one mirrors it for the router:
--
-- * `router_keywords` holds the words of listed (public, active) workflows only, as
--   `catalog_keywords` does, and a word no listed workflow holds any more is removed: when a routing
--   document loses it, is deleted (an operation or API removed), or its API stops being listed
--   (made private or inactive). An API that becomes listed adds its documents' words.
-- * A caller's own private workflows are in its scope, and their typos expanded before. So that
--   they still do, retrieval adds the words of the caller's own active private documents
--   (`router_documents.words`, read at query time through `apis_owner`) to this vocabulary, for
--   both the "taken as typed" test and the near-word search. The vocabulary a prompt is compared
--   with is then exactly the public one plus the caller's own: the answer for any document in scope
--   is unchanged except where only another organization's private word stopped an expansion.
--   (Only the public vocabulary, without the caller's own words, would be simpler but would stop
--   typos of a private workflow's words from reaching it; reading only in-scope documents' words
--   would read every public document's words on every prompt.)
-- * Rolling deploy: no table or column changes. An older process reads `router_keywords` as before
--   (it just no longer finds other organizations' private words, nor typos of its caller's own
--   private words until it is replaced); a newer process on the older schema works as before.
-- * Two transactions racing (one removing a word's last listed holder, one listing another holder)
--   can leave a listed word out until that holder's document is next refreshed: the public
--   vocabulary then lacks a public word (that word is expanded), never holds a private one.

CREATE OR REPLACE FUNCTION router_document_refresh(p_operation_id bigint) RETURNS void LANGUAGE plpgsql AS $$
DECLARE
  o        operations%ROWTYPE;
  a        apis%ROWTYPE;
  schema   jsonb;
  examples jsonb;
  a_text   text;
  b_text   text;
  c_text   text;
  kw       text[];
BEGIN
  SELECT * INTO o FROM operations WHERE id = p_operation_id;
  IF NOT FOUND THEN
    DELETE FROM router_documents WHERE operation_id = p_operation_id;
    RETURN;
  END IF;
  SELECT * INTO a FROM apis WHERE id = o.api_id;
  SELECT v.input_schema, v.examples INTO schema, examples
    FROM operation_versions v WHERE v.operation_id = o.id AND v.version = o.default_version;
  a_text := concat_ws(' ', o.name, replace(o.name, '_', ' '), o.label, array_to_string(o.labels, ' '));
  SELECT concat_ws(' ', string_agg(replace(p.key, '_', ' '), ' '),
           string_agg((SELECT string_agg(e || ' ' || translate(e, '-_', '  '), ' ')
                         FROM jsonb_array_elements_text(CASE WHEN jsonb_typeof(p.value -> 'enum') = 'array' THEN p.value -> 'enum' ELSE '[]' END) e), ' ')),
         string_agg(p.value ->> 'description', ' ')
    INTO b_text, c_text
    FROM jsonb_each(CASE WHEN jsonb_typeof(schema -> 'properties') = 'object' THEN schema -> 'properties' ELSE '{}' END) p;
  b_text := concat_ws(' ', b_text, a.name, ltrim(a.handle, '@'), translate(ltrim(a.handle, '@'), '-_', '  '),
    (SELECT string_agg(s.name || ' ' || replace(s.host, '.', ' '), ' ') FROM api_sites s WHERE s.api_id = a.id));
  c_text := concat_ws(' ', o.description, c_text,
    (SELECT string_agg(x ->> 'title', ' ') FROM jsonb_array_elements(CASE WHEN jsonb_typeof(examples) = 'array' THEN examples ELSE '[]' END) x));
  kw := ARRAY(SELECT DISTINCT w FROM regexp_split_to_table(lower(concat_ws(' ', a_text, b_text)), '[^[:alnum:]]+') w
        WHERE w <> '' AND length(w) <= 100 ORDER BY w);
  -- The vocabulary follows the document (router_keywords_on_document), listed workflows only.
  INSERT INTO router_documents (operation_id, api_id, tsv, words)
  VALUES (o.id, o.api_id,
    setweight(to_tsvector('english', a_text), 'A')
      || setweight(to_tsvector('english', coalesce(b_text, '')), 'B')
      || setweight(to_tsvector('english', coalesce(c_text, '')), 'C')
      || setweight(to_tsvector('english', coalesce(a.description, '')), 'D'),
    kw)
  ON CONFLICT (operation_id) DO UPDATE SET api_id = EXCLUDED.api_id, tsv = EXCLUDED.tsv, words = EXCLUDED.words;
END $$;

-- Removes those of `p_words` that no listed workflow's routing document holds (GIN on words).
CREATE FUNCTION router_keywords_forget(p_words text[]) RETURNS void LANGUAGE plpgsql AS $$
BEGIN
  IF cardinality(p_words) > 0 THEN
    DELETE FROM router_keywords k
     WHERE k.word = ANY(p_words)
       AND NOT EXISTS (SELECT 1 FROM router_documents d JOIN apis a ON a.id = d.api_id
                        WHERE d.words @> ARRAY[k.word] AND a.visibility = 'public' AND a.status = 'active');
  END IF;
END $$;

-- A routing document written or removed (a refresh, an operation deleted, its API deleted: the
-- cascade runs this too, OLD still holding the words).
CREATE FUNCTION router_keywords_on_document() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  IF TG_OP <> 'DELETE'
     AND EXISTS (SELECT 1 FROM apis WHERE id = NEW.api_id AND visibility = 'public' AND status = 'active') THEN
    INSERT INTO router_keywords (word) SELECT unnest(NEW.words) ON CONFLICT DO NOTHING;
  END IF;
  IF TG_OP = 'DELETE' OR (TG_OP = 'UPDATE' AND OLD.api_id IS DISTINCT FROM NEW.api_id) THEN
    PERFORM router_keywords_forget(OLD.words);
  ELSIF TG_OP = 'UPDATE' THEN
    PERFORM router_keywords_forget(ARRAY(SELECT unnest(OLD.words) EXCEPT SELECT unnest(NEW.words)));
  END IF;
  RETURN NULL;
END $$;
CREATE TRIGGER router_keywords_documents AFTER INSERT OR UPDATE OF api_id, words OR DELETE ON router_documents
  FOR EACH ROW EXECUTE FUNCTION router_keywords_on_document();

-- An API listed or no longer listed: its documents' words join or leave the vocabulary.
CREATE FUNCTION router_keywords_on_api() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  IF NEW.visibility = 'public' AND NEW.status = 'active' THEN
    INSERT INTO router_keywords (word)
      SELECT DISTINCT unnest(d.words) FROM router_documents d WHERE d.api_id = NEW.id ON CONFLICT DO NOTHING;
  ELSE
    PERFORM router_keywords_forget(ARRAY(SELECT DISTINCT unnest(d.words) FROM router_documents d WHERE d.api_id = NEW.id));
  END IF;
  RETURN NULL;
END $$;
CREATE TRIGGER router_keywords_api AFTER UPDATE OF visibility, status ON apis
  FOR EACH ROW WHEN ((OLD.visibility = 'public' AND OLD.status = 'active') IS DISTINCT FROM (NEW.visibility = 'public' AND NEW.status = 'active'))
  EXECUTE FUNCTION router_keywords_on_api();

-- The vocabulary rebuilt from current data: listed workflows' words only.
DELETE FROM router_keywords k
 WHERE NOT EXISTS (SELECT 1 FROM router_documents d JOIN apis a ON a.id = d.api_id
                    WHERE d.words @> ARRAY[k.word] AND a.visibility = 'public' AND a.status = 'active');
INSERT INTO router_keywords (word)
  SELECT DISTINCT unnest(d.words) FROM router_documents d JOIN apis a ON a.id = d.api_id
   WHERE a.visibility = 'public' AND a.status = 'active'
  ON CONFLICT DO NOTHING;

-- Down Migration
DROP TRIGGER router_keywords_api ON apis;
DROP FUNCTION router_keywords_on_api();
DROP TRIGGER router_keywords_documents ON router_documents;
DROP FUNCTION router_keywords_on_document();
DROP FUNCTION router_keywords_forget(text[]);

CREATE OR REPLACE FUNCTION router_document_refresh(p_operation_id bigint) RETURNS void LANGUAGE plpgsql AS $$
DECLARE
  o        operations%ROWTYPE;
  a        apis%ROWTYPE;
  schema   jsonb;
  examples jsonb;
  a_text   text;
  b_text   text;
  c_text   text;
  kw       text[];
BEGIN
  SELECT * INTO o FROM operations WHERE id = p_operation_id;
  IF NOT FOUND THEN
    DELETE FROM router_documents WHERE operation_id = p_operation_id;
    RETURN;
  END IF;
  SELECT * INTO a FROM apis WHERE id = o.api_id;
  SELECT v.input_schema, v.examples INTO schema, examples
    FROM operation_versions v WHERE v.operation_id = o.id AND v.version = o.default_version;
  a_text := concat_ws(' ', o.name, replace(o.name, '_', ' '), o.label, array_to_string(o.labels, ' '));
  SELECT concat_ws(' ', string_agg(replace(p.key, '_', ' '), ' '),
           string_agg((SELECT string_agg(e || ' ' || translate(e, '-_', '  '), ' ')
                         FROM jsonb_array_elements_text(CASE WHEN jsonb_typeof(p.value -> 'enum') = 'array' THEN p.value -> 'enum' ELSE '[]' END) e), ' ')),
         string_agg(p.value ->> 'description', ' ')
    INTO b_text, c_text
    FROM jsonb_each(CASE WHEN jsonb_typeof(schema -> 'properties') = 'object' THEN schema -> 'properties' ELSE '{}' END) p;
  b_text := concat_ws(' ', b_text, a.name, ltrim(a.handle, '@'), translate(ltrim(a.handle, '@'), '-_', '  '),
    (SELECT string_agg(s.name || ' ' || replace(s.host, '.', ' '), ' ') FROM api_sites s WHERE s.api_id = a.id));
  c_text := concat_ws(' ', o.description, c_text,
    (SELECT string_agg(x ->> 'title', ' ') FROM jsonb_array_elements(CASE WHEN jsonb_typeof(examples) = 'array' THEN examples ELSE '[]' END) x));
  kw := ARRAY(SELECT DISTINCT w FROM regexp_split_to_table(lower(concat_ws(' ', a_text, b_text)), '[^[:alnum:]]+') w
        WHERE w <> '' AND length(w) <= 100 ORDER BY w);
  INSERT INTO router_keywords (word) SELECT unnest(kw) ON CONFLICT DO NOTHING;
  INSERT INTO router_documents (operation_id, api_id, tsv, words)
  VALUES (o.id, o.api_id,
    setweight(to_tsvector('english', a_text), 'A')
      || setweight(to_tsvector('english', coalesce(b_text, '')), 'B')
      || setweight(to_tsvector('english', coalesce(c_text, '')), 'C')
      || setweight(to_tsvector('english', coalesce(a.description, '')), 'D'),
    kw)
  ON CONFLICT (operation_id) DO UPDATE SET api_id = EXCLUDED.api_id, tsv = EXCLUDED.tsv, words = EXCLUDED.words;
END $$;

-- The previous vocabulary: every document's words (an older retrieval reads only this table, so
-- the caller's own private words must be in it again).
INSERT INTO router_keywords (word) SELECT DISTINCT unnest(words) FROM router_documents ON CONFLICT DO NOTHING;
