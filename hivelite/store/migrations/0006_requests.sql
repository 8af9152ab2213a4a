-- Migration 6: request records for idempotent retries (frozen: never edit). One row per
-- caller and request id: the verb, a digest of its arguments and its first answer.
CREATE TABLE requests(
    caller TEXT NOT NULL,
    id TEXT NOT NULL,
    verb TEXT NOT NULL,
    digest TEXT NOT NULL,
    answer TEXT NOT NULL,
    at TEXT NOT NULL,
    PRIMARY KEY (caller, id)
) WITHOUT ROWID;
CREATE INDEX requests_by_age ON requests(at);
