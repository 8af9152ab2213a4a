-- Migration 16 (frozen once released): nothing to change on SQLite. PostgreSQL's migration 16
-- chains its journal per task (its writers on different tasks run side by side), numbers
-- journal and usage rows under a lock held to the commit, and keeps each row's global link;
-- an SQLite store has one writer at a time, and its journal stays one chain. A version
-- means the same contract on both engines, and the contract is unchanged.
SELECT 1;
