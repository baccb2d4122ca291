-- Up Migration
-- A query's claim in one round trip (issue 11).
--
-- Admission took a transaction of five round trips: BEGIN, the organization's advisory lock, its
-- counts, the INSERT of the claim, COMMIT, with the lock held across the middle three. At
-- concurrency 1 that was 5.1 ms of a 58 ms query (p50), and every other claim of the organization
-- waited on it. The counts must be read after the lock is granted, in a snapshot of their own (a
-- claim committed while this one waited must be counted), which one plain statement cannot do:
-- its snapshot is taken before anything in it runs. A VOLATILE PL/pgSQL function can: each of
-- its statements takes a new snapshot. So `admission_state` takes the lock, then reads the counts,
-- and says which plan limit (if any) refuses a new request; the API's claim is one statement that
-- calls it and inserts the claim only when nothing refuses (apps/api/services/admission.ts).
--
-- The limits are the API's configuration, passed in; the rule is here alone: the API reads the
-- refusal and its counts (for the error's message and the X-RateLimit-* headers), and the prompt
-- router's admission and the rate headers of a replay use this function too.
--
-- * The lock is the one the API took before (`pg_advisory_xact_lock(600, hashtext(org_id))`), so
--   during a rolling deploy an older API's transaction and a newer API's statement still exclude
--   each other, and both read the same counts.
-- * The open states are the ones `requests_unresolved` is partial on, written as literals so the
--   planner can use that index: a request holds a running slot while it is reserving, processing
--   or refund_pending.
-- * `p_already_counted`: calls of this request already in the minute (a routed prompt counted
--   when it was admitted to routing) are not counted twice.
-- * `p_lock` false: the counts without the lock (the rate headers of a replay, which admits nothing).
CREATE FUNCTION admission_state(
  p_org_id text,
  p_requests_per_minute integer,
  p_concurrency integer,
  p_unresolved_keyed integer,
  p_keyed boolean,
  p_already_counted integer,
  p_lock boolean
) RETURNS TABLE (running integer, unresolved integer, last_minute integer, oldest double precision, refusal text)
LANGUAGE plpgsql VOLATILE AS $$
#variable_conflict use_column
BEGIN
  IF p_lock THEN
    PERFORM pg_advisory_xact_lock(600, hashtext(p_org_id));
  END IF;
  -- A statement of its own after the lock: its snapshot holds every claim committed before it.
  RETURN QUERY
  SELECT o.running, o.unresolved, m.last_minute, m.oldest,
         CASE WHEN m.last_minute >= p_requests_per_minute THEN 'rate_limited'
              WHEN o.running >= p_concurrency THEN 'organization_concurrency_limit'
              WHEN p_keyed AND o.unresolved >= p_unresolved_keyed THEN 'unresolved_query_limit'
         END
    FROM (SELECT count(*)::integer AS running,
                 count(*) FILTER (WHERE r.idempotency_key_hash IS NOT NULL)::integer AS unresolved
            FROM requests r
           WHERE r.org_id = p_org_id AND r.status IN ('reserving', 'processing', 'refund_pending')) o,
         (SELECT greatest(0, coalesce(sum(s.n), 0)::integer - p_already_counted) AS last_minute,
                 min(s.second)::double precision AS oldest
            FROM request_second_counts s
           WHERE s.org_id = p_org_id AND s.second > floor(extract(epoch FROM now()))::bigint - 60) m;
END $$;

-- Down Migration
DROP FUNCTION admission_state(text, integer, integer, integer, boolean, integer, boolean);
