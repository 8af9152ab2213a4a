-- Migration 17 on PostgreSQL (frozen once released): watches, a caller's durable wait on a
-- task's outcome, on its result's verdict, or on its own queue (the MCP face's tasks;
-- SQLite's schema.WATCHES says why).
CREATE TABLE watches(
    id text PRIMARY KEY CHECK (length(id) >= 26),
    caller text NOT NULL,
    token text,
    verb text NOT NULL,
    number bigint,
    asked text NOT NULL,
    answer text,
    created_at text NOT NULL,
    updated_at text NOT NULL,
    expires_at text NOT NULL,
    poll_ms bigint NOT NULL CHECK (poll_ms > 0),
    cancelled_at text
);
CREATE INDEX watches_by_expiry ON watches((expires_at COLLATE "C"));
