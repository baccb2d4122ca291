-- Up Migration
-- Maintenance (workflows/maintenance-workflow.ts): the reconciler and result retention.

-- When the reconciler last looked at an unresolved request. Rows whose workflow is still running
-- are looked at again later, after the rows it has not seen yet, so they cannot hold the head of
-- every batch.
ALTER TABLE requests ADD COLUMN reconcile_checked_at timestamptz;

-- Retention finds expired results without scanning every request ever made.
CREATE INDEX requests_result_expiry ON requests (result_expires_at) WHERE result IS NOT NULL;

-- Down Migration
DROP INDEX requests_result_expiry;
ALTER TABLE requests DROP COLUMN reconcile_checked_at;
