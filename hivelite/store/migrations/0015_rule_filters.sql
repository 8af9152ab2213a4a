-- Migration 15 (frozen once released): nothing to change on SQLite. PostgreSQL's migration
-- 15 filters its rule triggers with a WHEN (SQLite's triggers have theirs since migration 1:
-- there, each rule is its trigger's WHEN) and makes its index of live leases in the "C"
-- collation it compares lease times in (SQLite compares text in that order always). A
-- version means the same contract on both engines, and the contract is unchanged.
SELECT 1;
