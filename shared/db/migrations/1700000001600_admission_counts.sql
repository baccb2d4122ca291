-- Up Migration
-- Per-minute admission in constant time (issue 11).
--
-- The plan's requests-per-minute limit counted the organization's request rows created in the
-- last 60 seconds, on every admission, under the organization's admission lock. That read grows
-- with the organization's rate: at 60 queries/s it visits about 3,600 rows (EXPLAIN ANALYZE
-- 1.7 ms, every one of them a heap fetch because the table is always being written), and every
-- other claim of the organization waits for it. Here each organization keeps one counter per
-- second, written by a trigger on every new request row whatever path inserts it, so the minute's
-- count is a sum of at most 60 small rows. The window is whole seconds: a request counts while its
-- second is among the last 60, and X-RateLimit-Reset is the oldest counted second plus 60.
CREATE TABLE request_second_counts (
  org_id  text NOT NULL REFERENCES organizations(id) ON DELETE CASCADE,
  second  bigint NOT NULL,
  n       integer NOT NULL,
  PRIMARY KEY (org_id, second)
);

-- One call of an organization at a time, counted in its second: the trigger below calls it for
-- every new request row, and the API for a call that makes none (a prompt refused after routing).
CREATE FUNCTION count_request_call(p_org_id text, p_at timestamptz) RETURNS void LANGUAGE sql AS $$
  INSERT INTO request_second_counts AS c (org_id, second, n)
    VALUES (p_org_id, floor(extract(epoch FROM p_at))::bigint, 1)
    ON CONFLICT (org_id, second) DO UPDATE SET n = c.n + 1;
$$;

CREATE FUNCTION request_second_count() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  PERFORM count_request_call(NEW.org_id, NEW.created_at);
  -- Seconds older than two minutes are never read again: now and then the organization's own go.
  -- SKIP LOCKED: two cleanups never wait on (or deadlock with) each other.
  IF random() < 0.02 THEN
    DELETE FROM request_second_counts
     WHERE ctid IN (SELECT ctid FROM request_second_counts
                     WHERE org_id = NEW.org_id AND second < floor(extract(epoch FROM now()))::bigint - 120
                       FOR UPDATE SKIP LOCKED);
  END IF;
  RETURN NULL;
END $$;
CREATE TRIGGER request_second_count AFTER INSERT ON requests
  FOR EACH ROW EXECUTE FUNCTION request_second_count();

INSERT INTO request_second_counts (org_id, second, n)
  SELECT org_id, floor(extract(epoch FROM created_at))::bigint, count(*)
    FROM requests WHERE created_at > now() - interval '120 seconds'
   GROUP BY 1, 2;

-- Down Migration
DROP TRIGGER request_second_count ON requests;
DROP FUNCTION request_second_count();
DROP FUNCTION count_request_call(text, timestamptz);
DROP TABLE request_second_counts;
