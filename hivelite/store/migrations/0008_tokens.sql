-- Migration 8: access tokens for the HTTP service and MCP (frozen: never edit). A
-- token's id and the SHA-256 of its secret (never the secret), bound to an agent and an
-- instance with its rights, or to the owner; revoked once, never deleted.
CREATE TABLE tokens(
    id TEXT PRIMARY KEY,
    agent TEXT,
    instance TEXT,
    rights TEXT NOT NULL,
    hash TEXT NOT NULL,
    created_at TEXT NOT NULL,
    expires_at TEXT,
    revoked_at TEXT,
    by TEXT NOT NULL
) WITHOUT ROWID;

-- A token is an owner's (no agent, no instance, the right 'owner') or an agent's (both
-- named, some of the lease rights); only its hash is kept, and it is never taken back
-- except by revoking it once.
CREATE TRIGGER tokens_shape BEFORE INSERT ON tokens
WHEN NEW.revoked_at IS NOT NULL OR length(NEW.hash) != 64 OR NEW.hash GLOB '*[^0-9a-f]*'
    OR NOT ((NEW.agent IS NULL AND NEW.instance IS NULL AND NEW.rights = 'owner')
            OR (NEW.agent IS NOT NULL AND NEW.instance IS NOT NULL AND NEW.rights != ''
                AND NEW.instance = lower(rtrim(trim(NEW.instance, ' '), '.'))
                AND NOT EXISTS (SELECT 1 FROM json_each('["' || replace(NEW.rights, ',',
                                '","') || '"]') WHERE value NOT IN ('tasks.propose', 'tasks.read', 'tasks.work'))))
BEGIN SELECT RAISE(ABORT, 'invalid_input:invalid_token'); END;

CREATE TRIGGER tokens_keys_kept BEFORE INSERT ON tokens
WHEN EXISTS (SELECT 1 FROM tokens WHERE id = NEW.id)
BEGIN SELECT RAISE(ABORT, 'forbidden_right:rows_are_kept'); END;

CREATE TRIGGER tokens_revoked_once BEFORE UPDATE ON tokens
WHEN OLD.revoked_at IS NOT NULL OR NEW.revoked_at IS NULL OR NEW.id IS NOT OLD.id
    OR NEW.agent IS NOT OLD.agent OR NEW.instance IS NOT OLD.instance
    OR NEW.rights IS NOT OLD.rights OR NEW.hash IS NOT OLD.hash
    OR NEW.created_at IS NOT OLD.created_at OR NEW.expires_at IS NOT OLD.expires_at
    OR NEW.by IS NOT OLD.by
BEGIN SELECT RAISE(ABORT, 'forbidden_right:tokens_kept'); END;

CREATE TRIGGER tokens_kept BEFORE DELETE ON tokens
BEGIN SELECT RAISE(ABORT, 'forbidden_right:tokens_kept'); END;
