-- Migration 21 (frozen once released): an enrolled agent's writes are held to its
-- enrolment by the store (issue 47), so that every verb of an enrolled agent's is one
-- statement the store checks. A journal row of an enrolled agent's about a task is refused
-- when the enrolment ended, when it needs a right the enrolment does not give, when the
-- task's project is outside it, and while the agent holds the task under a claim taken
-- under an earlier enrolment; a claim given back never is (schema.ENROLLED). SQLite runs a
-- table's rules newest first, so the journal's rules are made again after it, in the order
-- they were: a row that is no journal row of its task's, or no answer, is refused as such
-- before it is read as an enrolled agent's.
CREATE TRIGGER journal_enrolled BEFORE INSERT ON journal
WHEN NEW.task IS NOT NULL AND EXISTS (SELECT 1 FROM enrolments WHERE agent = NEW.actor)
    AND NOT (coalesce(NEW.from_state, '') IN ('accepted', 'working') AND NEW.to_state IS 'routed'
             AND CASE WHEN NEW.from_state IN ('accepted', 'working') AND json_type(CASE WHEN json_valid(NEW.detail) THEN NEW.detail END, '$.via') = 'array' THEN json_extract(NEW.detail, '$.via') END IS NULL)
BEGIN
    SELECT CASE
        WHEN EXISTS (SELECT 1 FROM enrolments WHERE agent = NEW.actor AND NOT active)
            THEN RAISE(ABORT, 'invalid_state:optin_inactive')
        WHEN EXISTS (SELECT 1 FROM enrolments WHERE agent = NEW.actor
                     AND instr(',' || rights || ',', CASE WHEN (NEW.from_state IS NULL AND NEW.to_state = 'requested') OR NEW.to_state = 'cancelled' OR (NEW.from_state = NEW.to_state AND NEW.reason = 'fields')
                               THEN ',tasks.propose,' ELSE ',tasks.work,' END) = 0)
            THEN RAISE(ABORT, 'forbidden_right:optin_scope')
        WHEN EXISTS (SELECT 1 FROM enrolments e, tasks t
                     WHERE e.agent = NEW.actor AND t.number = NEW.task
                       AND json_array_length(e.projects) > 0
                       AND NOT EXISTS (SELECT 1 FROM json_each(e.projects) WHERE value = t.project))
            THEN RAISE(ABORT, 'forbidden_right:optin_scope')
        WHEN EXISTS (SELECT 1 FROM tasks t WHERE t.number = NEW.task AND t.lease_holder = NEW.actor
                     AND t.lease_scope IS NOT (SELECT seq FROM enrolments WHERE agent = NEW.actor))
            THEN RAISE(ABORT, 'invalid_state:optin_changed')
    END;
END;
DROP TRIGGER journal_answered;
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
