-- Up Migration
-- The prompt router's retrieval documents (issue 10): one row per operation, built from its
-- default version, so a prompt finds operations (not whole APIs) through indexes only.
--
-- * `tsv`: weight A = operation name, label and labels; B = input field names, enum values, the
--   API's name and handle and its sites; C = descriptions of the operation and its input fields
--   and the titles of its verified examples; D = the API's description.
-- * `words`: the distinct lower-case words of A and B (no descriptions), GIN-indexed; typo
--   tolerance looks a prompt word up in the small vocabulary `router_keywords` (trigram index) and
--   then finds the operations holding one of its near words, as catalog search does.
-- * Visibility, owner, status and availability are read from `apis` at query time (filters apply
--   before ranking), so only the text lives here.

CREATE TABLE router_documents (
  operation_id  bigint PRIMARY KEY REFERENCES operations(id) ON DELETE CASCADE,
  api_id        bigint NOT NULL REFERENCES apis(id) ON DELETE CASCADE,
  tsv           tsvector NOT NULL,
  words         text[] NOT NULL DEFAULT '{}'
);
CREATE INDEX router_documents_tsv ON router_documents USING gin (tsv) WITH (fastupdate = off);
CREATE INDEX router_documents_words ON router_documents USING gin (words) WITH (fastupdate = off);
CREATE INDEX router_documents_api ON router_documents (api_id);

CREATE TABLE router_keywords (
  word  text PRIMARY KEY
);
CREATE INDEX router_keywords_trgm ON router_keywords USING gin (word gin_trgm_ops) WITH (fastupdate = off);

CREATE FUNCTION router_document_refresh(p_operation_id bigint) RETURNS void LANGUAGE plpgsql AS $$
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

CREATE FUNCTION router_document_on_operation() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  IF TG_OP = 'DELETE' THEN
    DELETE FROM router_documents WHERE operation_id = OLD.id;
    RETURN NULL;
  END IF;
  PERFORM router_document_refresh(NEW.id);
  RETURN NULL;
END $$;
CREATE TRIGGER router_document_operations AFTER INSERT OR UPDATE OF name, label, description, labels, default_version OR DELETE ON operations
  FOR EACH ROW EXECUTE FUNCTION router_document_on_operation();

CREATE FUNCTION router_document_on_version() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  PERFORM router_document_refresh(NEW.operation_id);
  RETURN NULL;
END $$;
CREATE TRIGGER router_document_versions AFTER INSERT ON operation_versions
  FOR EACH ROW EXECUTE FUNCTION router_document_on_version();

CREATE FUNCTION router_document_on_api() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  PERFORM router_document_refresh(o.id) FROM operations o WHERE o.api_id = NEW.id;
  RETURN NULL;
END $$;
CREATE TRIGGER router_document_api AFTER UPDATE OF handle, name, description ON apis
  FOR EACH ROW EXECUTE FUNCTION router_document_on_api();

CREATE FUNCTION router_document_on_site() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
  r api_sites%ROWTYPE;
BEGIN
  IF TG_OP = 'DELETE' THEN r := OLD; ELSE r := NEW; END IF;
  PERFORM router_document_refresh(o.id) FROM operations o WHERE o.api_id = r.api_id;
  RETURN NULL;
END $$;
CREATE TRIGGER router_document_sites AFTER INSERT OR UPDATE OR DELETE ON api_sites
  FOR EACH ROW EXECUTE FUNCTION router_document_on_site();

SELECT router_document_refresh(id) FROM operations;

-- Down Migration
DROP TRIGGER router_document_sites ON api_sites;
DROP FUNCTION router_document_on_site();
DROP TRIGGER router_document_api ON apis;
DROP FUNCTION router_document_on_api();
DROP TRIGGER router_document_versions ON operation_versions;
DROP FUNCTION router_document_on_version();
DROP TRIGGER router_document_operations ON operations;
DROP FUNCTION router_document_on_operation();
DROP FUNCTION router_document_refresh(bigint);
DROP TABLE router_keywords;
DROP TABLE router_documents;
