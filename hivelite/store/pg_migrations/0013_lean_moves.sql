-- Migration 13 on PostgreSQL (frozen: never edit): nothing to change. SQLite's migration
-- 13 cuts the pages a move writes by linking each task's journal rows from its task row
-- (tasks.last_seq, journal.prev) instead of indexing them, and by counting a budgeted
-- agent's claims in a row (claim_counts) instead of an index on every claim. Those are
-- SQLite's page layout (schema.SQLITE_ONLY), not the contract: a PostgreSQL store keeps
-- its indexes journal_by_task and journal_claims, and its rules are the same as at 12.
SELECT 1;
