-- Migration 17 (frozen once released): watches, a caller's durable wait on a task's
-- outcome, on its result's verdict, or on its own queue (the MCP face's tasks;
-- schema.WATCHES says why).
CREATE TABLE watches(
    id TEXT PRIMARY KEY CHECK (length(id) >= 26),
    caller TEXT NOT NULL,
    token TEXT,
    verb TEXT NOT NULL,
    number INTEGER,
    asked TEXT NOT NULL,
    answer TEXT,
    created_at TEXT NOT NULL,
    updated_at TEXT NOT NULL,
    expires_at TEXT NOT NULL,
    poll_ms INTEGER NOT NULL CHECK (poll_ms > 0),
    cancelled_at TEXT
) WITHOUT ROWID;
CREATE INDEX watches_by_expiry ON watches(expires_at);
