-- Up Migration
-- The prompt router's dense vectors (issue 10): one sentence vector per operation version and
-- routing-document hash, computed once by whichever router process first needs it and kept here,
-- so a start loads vectors instead of embedding the catalog again (57 s at 10,000 operations).
--
-- * `doc_hash`: sha256 of the model's name and the text embedded (shared/router/embeddings.ts
--   operationDocument), so a changed label, description or schema, or another model, gets a new row.
-- * `vector`: 384 float32 values, little-endian (1,536 bytes).
-- * `router_documents.refreshed_at` tells a running router which operations changed since it last
--   looked, so it re-reads only those.

CREATE TABLE router_vectors (
  operation_id  bigint NOT NULL REFERENCES operations(id) ON DELETE CASCADE,
  version       int NOT NULL,
  doc_hash      text NOT NULL,
  vector        bytea NOT NULL CHECK (length(vector) = 1536),
  created_at    timestamptz NOT NULL DEFAULT now(),
  PRIMARY KEY (operation_id, version, doc_hash)
);

ALTER TABLE router_documents ADD COLUMN refreshed_at timestamptz NOT NULL DEFAULT clock_timestamp();
CREATE INDEX router_documents_refreshed ON router_documents (refreshed_at);

CREATE FUNCTION router_document_touch() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  NEW.refreshed_at := clock_timestamp();
  RETURN NEW;
END $$;
CREATE TRIGGER router_document_touch BEFORE UPDATE ON router_documents
  FOR EACH ROW EXECUTE FUNCTION router_document_touch();

-- Down Migration
DROP TRIGGER router_document_touch ON router_documents;
DROP FUNCTION router_document_touch();
DROP INDEX router_documents_refreshed;
ALTER TABLE router_documents DROP COLUMN refreshed_at;
DROP TABLE router_vectors;
