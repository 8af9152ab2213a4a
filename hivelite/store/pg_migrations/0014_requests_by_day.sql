-- Migration 14 on PostgreSQL (frozen: never edit): nothing to change. SQLite's migration
-- 14 keys its kept first answers by day (requests.day) to write one leaf a record and
-- prune a day's records from the front of the tree; that is SQLite's page layout
-- (schema.SQLITE_ONLY), not the contract: a PostgreSQL store keeps requests_by_age.
SELECT 1;
