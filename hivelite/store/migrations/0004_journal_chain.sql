-- Migration 4: the journal as a hash chain (frozen: never edit). hivelite computes each
-- row's hash as it writes and hands it to the trigger through tasks.chain; the store's
-- identity starts the chain. A Python step then chains the rows written before.
ALTER TABLE journal ADD COLUMN hash TEXT;
ALTER TABLE tasks ADD COLUMN chain TEXT;
INSERT INTO meta(key, value) VALUES ('store_id', lower(hex(randomblob(16))));

CREATE TRIGGER meta_identity_fixed BEFORE UPDATE ON meta
WHEN OLD.key = 'store_id'
BEGIN SELECT RAISE(ABORT, 'forbidden_right:identity_fixed'); END;

DROP TRIGGER task_created;
CREATE TRIGGER task_created AFTER INSERT ON tasks
BEGIN
    INSERT INTO journal(task, at, actor, from_state, to_state, waiting_on, reason, detail,
                        hash)
    VALUES (NEW.number, NEW.created_at, NEW.actor, NULL, NEW.state, NULL, NEW.reason,
            NEW.detail, NEW.chain);
END;

DROP TRIGGER task_journal;
CREATE TRIGGER task_journal AFTER UPDATE OF state ON tasks
BEGIN
    INSERT INTO journal(task, at, actor, from_state, to_state, waiting_on, reason, detail,
                        hash)
    VALUES (NEW.number, NEW.updated_at, NEW.actor, OLD.state, NEW.state, NEW.waiting_on,
            NEW.reason, NEW.detail, NEW.chain);
END;
