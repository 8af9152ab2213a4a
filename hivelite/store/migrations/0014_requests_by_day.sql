-- Migration 14 (frozen: never edit): kept first answers in one B-tree keyed by day, caller
-- and request id, in place of a table keyed by caller and id beside an index by age
-- (schema.KEPT_BY_DAY says why). The records kept so far move across.
CREATE TEMP TABLE requests_kept AS SELECT * FROM requests;
DROP TABLE requests;
CREATE TABLE requests(
    day INTEGER NOT NULL,
    caller TEXT NOT NULL,
    id TEXT NOT NULL,
    verb TEXT NOT NULL,
    digest TEXT NOT NULL,
    answer TEXT NOT NULL,
    at TEXT NOT NULL,
    PRIMARY KEY (day, caller, id)
) WITHOUT ROWID;
INSERT INTO requests(day, caller, id, verb, digest, answer, at)
    SELECT unixepoch(substr(at, 1, 10)) / 86400, caller, id, verb, digest, answer, at
    FROM requests_kept;
DROP TABLE temp.requests_kept;
