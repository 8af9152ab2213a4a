-- Migration 20 (frozen once released): who answers which question is the store's rule
-- (issue 47), so that an answer is one statement the store checks. A journal row that
-- leaves its task waiting with reason 'answered' is taken only on a task paused on a
-- question: one to a person from the owner alone, one to an agent from the owner or another
-- agent than its assignee (schema.ANSWERS). SQLite runs a table's rules newest first, so
-- the journal's rules are made again after it, in the order they were: a row that is no
-- journal row of its task's is refused as such before it is read as an answer.
CREATE TRIGGER journal_answered BEFORE INSERT ON journal
WHEN NEW.reason = 'answered' AND NEW.task IS NOT NULL AND NEW.from_state IS 'waiting'
    AND NEW.to_state IS 'waiting'
BEGIN
    SELECT CASE
        WHEN (SELECT waiting_on FROM tasks WHERE number = NEW.task) NOT IN ('human', 'agent')
            THEN RAISE(ABORT, 'invalid_state:not_asking')
        WHEN NEW.actor IS (SELECT value FROM meta WHERE key = 'owner') THEN NULL
        WHEN (SELECT waiting_on FROM tasks WHERE number = NEW.task) = 'human'
            THEN RAISE(ABORT, 'forbidden_right:not_permitted')
        WHEN NEW.actor IS (SELECT assignee FROM tasks WHERE number = NEW.task)
            THEN RAISE(ABORT, 'forbidden_right:self_answer')
    END;
END;
DROP TRIGGER journal_insert;
CREATE TRIGGER journal_insert BEFORE INSERT ON journal
WHEN (NEW.seq > 0 AND NEW.seq IS NOT (SELECT coalesce(max(seq), 0) FROM journal) + 1)
    OR (NEW.task IS NULL AND NEW.prev IS NOT NULL)
    OR (NEW.task IS NOT NULL AND (
    NOT EXISTS (SELECT 1 FROM tasks t WHERE t.number = NEW.task
                AND t.state IS NEW.to_state
                AND (t.last_seq IS NEW.seq OR t.last_seq IS NEW.prev))
    OR (NEW.from_state IS NOT NEW.to_state
        AND NOT (NEW.from_state IS NULL AND NEW.to_state = 'requested')
        AND CASE WHEN CASE WHEN NEW.from_state IN ('accepted', 'working') AND json_type(CASE WHEN json_valid(NEW.detail) THEN NEW.detail END, '$.via') = 'array' THEN json_extract(NEW.detail, '$.via') END IS NULL THEN NOT EXISTS (
            SELECT 1 FROM moves m WHERE m.from_state = NEW.from_state
                                    AND m.to_state = NEW.to_state)
        ELSE NOT (((NEW.from_state = 'accepted' AND CASE WHEN NEW.from_state IN ('accepted', 'working') AND json_type(CASE WHEN json_valid(NEW.detail) THEN NEW.detail END, '$.via') = 'array' THEN json_extract(NEW.detail, '$.via') END = '["working","verifying"]') OR (NEW.from_state = 'working' AND CASE WHEN NEW.from_state IN ('accepted', 'working') AND json_type(CASE WHEN json_valid(NEW.detail) THEN NEW.detail END, '$.via') = 'array' THEN json_extract(NEW.detail, '$.via') END = '["verifying"]')) AND NEW.to_state IN ('approval', 'completed', 'routed')) END)))
BEGIN SELECT RAISE(ABORT, 'forbidden_right:journal_forged'); END;
DROP TRIGGER journal_no_delete;
CREATE TRIGGER journal_no_delete BEFORE DELETE ON journal
BEGIN SELECT RAISE(ABORT, 'forbidden_right:append_only'); END;
DROP TRIGGER journal_keys_kept;
CREATE TRIGGER journal_keys_kept BEFORE INSERT ON journal
WHEN EXISTS (SELECT 1 FROM journal WHERE seq = NEW.seq)
BEGIN SELECT RAISE(ABORT, 'forbidden_right:rows_are_kept'); END;
DROP TRIGGER journal_no_update;
CREATE TRIGGER journal_no_update BEFORE UPDATE ON journal
BEGIN SELECT RAISE(ABORT, 'forbidden_right:append_only'); END;
DROP TRIGGER journal_head;
CREATE TRIGGER journal_head AFTER INSERT ON journal
WHEN NEW.task IS NOT NULL
BEGIN
    UPDATE tasks SET last_seq = NEW.seq WHERE number = NEW.task AND last_seq IS NOT NEW.seq;
END;
