-- Up Migration
-- Prompt mode (issue 10): how each prompt-mode request was routed, for audit in the request
-- status: which router answered, the chosen operation's score, the candidates it considered and
-- the prompt-search fee inside the receipt's total. NULL for direct-mode requests. Written once,
-- with the claim (shared/db/requests.ts insertClaim), never updated.
ALTER TABLE requests ADD COLUMN routing jsonb;

-- Down Migration
ALTER TABLE requests DROP COLUMN routing;
