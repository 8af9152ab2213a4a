-- Migration 19 (frozen once released): a submission is one journal row (issue 47). The row
-- goes from the holder's state (accepted or working) to the guard's judgement (completed,
-- approval or routed), and its detail's "via" names the states it passed through
-- (["working", "verifying"] or ["verifying"]): it stands for the seed moves 7, 12 and 13,
-- 14 or 15, which history and every face show one by one. The rules that read a move's
-- states read the via too (schema.ONE_ROW_SUBMISSIONS): a via is one of those paths, on a
-- task with a result; a completion through it needs a threshold of 0; a result sent back
-- through it counts an attempt; the holder submits under its claim's enrolment. Every later
-- rule of those tables is made again in the order it was, so each fires as it did.
DROP TRIGGER task_move;
CREATE TRIGGER task_move BEFORE UPDATE OF state, waiting_on ON tasks
WHEN OLD.state NOT IN ('cancelled', 'completed', 'rejected')
    AND (NEW.state = 'waiting') = (NEW.waiting_on IS NOT NULL)
    AND (NEW.waiting_on IS NULL OR NEW.waiting_on IN ('agent', 'human', 'owner_approval'))
    AND CASE WHEN CASE WHEN OLD.state IN ('accepted', 'working') AND json_type(CASE WHEN json_valid(NEW.detail) THEN NEW.detail END, '$.via') = 'array' THEN json_extract(NEW.detail, '$.via') END IS NULL THEN NOT EXISTS (
    SELECT 1 FROM moves m
    WHERE m.from_state = OLD.state AND m.to_state = NEW.state
      AND (m.from_waiting IS NULL OR instr(m.from_waiting, '|' || OLD.waiting_on || '|'))
      AND (m.to_waiting IS NULL OR instr(m.to_waiting, '|' || NEW.waiting_on || '|'))
    ) ELSE NOT ((((OLD.state = 'accepted' AND CASE WHEN OLD.state IN ('accepted', 'working') AND json_type(CASE WHEN json_valid(NEW.detail) THEN NEW.detail END, '$.via') = 'array' THEN json_extract(NEW.detail, '$.via') END = '["working","verifying"]') OR (OLD.state = 'working' AND CASE WHEN OLD.state IN ('accepted', 'working') AND json_type(CASE WHEN json_valid(NEW.detail) THEN NEW.detail END, '$.via') = 'array' THEN json_extract(NEW.detail, '$.via') END = '["verifying"]')) AND NEW.state IN ('approval', 'completed', 'routed'))
               AND EXISTS (SELECT 1 FROM results WHERE task = NEW.number)) END
BEGIN SELECT RAISE(ABORT, 'invalid_state:no_such_move'); END;
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
DROP TRIGGER task_delete;
CREATE TRIGGER task_delete BEFORE DELETE ON tasks
BEGIN SELECT RAISE(ABORT, 'forbidden_right:tasks_are_kept'); END;
DROP TRIGGER journal_no_delete;
CREATE TRIGGER journal_no_delete BEFORE DELETE ON journal
BEGIN SELECT RAISE(ABORT, 'forbidden_right:append_only'); END;
DROP TRIGGER tasks_keys_kept;
CREATE TRIGGER tasks_keys_kept BEFORE INSERT ON tasks
WHEN EXISTS (SELECT 1 FROM tasks WHERE number = NEW.number OR id = NEW.id)
BEGIN SELECT RAISE(ABORT, 'forbidden_right:rows_are_kept'); END;
DROP TRIGGER journal_keys_kept;
CREATE TRIGGER journal_keys_kept BEFORE INSERT ON journal
WHEN EXISTS (SELECT 1 FROM journal WHERE seq = NEW.seq)
BEGIN SELECT RAISE(ABORT, 'forbidden_right:rows_are_kept'); END;
DROP TRIGGER task_completion_decided;
CREATE TRIGGER task_completion_decided BEFORE UPDATE OF state ON tasks
WHEN NEW.state = 'completed' AND (OLD.state IN ('approval', 'verifying') OR CASE WHEN OLD.state IN ('accepted', 'working') AND json_type(CASE WHEN json_valid(NEW.detail) THEN NEW.detail END, '$.via') = 'array' THEN json_extract(NEW.detail, '$.via') END IS NOT NULL)
    AND EXISTS (SELECT 1 FROM results WHERE task = NEW.number) AND NOT (
    (OLD.state = 'approval' AND (
        NEW.actor IS (SELECT value FROM meta WHERE key = 'owner')
        OR (SELECT count(*) FROM confirmations c JOIN results r ON r.task = c.task
            WHERE c.task = NEW.number AND c.version = r.version AND c.verdict = 'accept'
              AND c.counted) >= (SELECT coalesce(threshold, 1) FROM results
                                 WHERE task = NEW.number)))
    OR ((OLD.state = 'verifying' OR CASE WHEN OLD.state IN ('accepted', 'working') AND json_type(CASE WHEN json_valid(NEW.detail) THEN NEW.detail END, '$.via') = 'array' THEN json_extract(NEW.detail, '$.via') END IS NOT NULL) AND EXISTS (
        SELECT 1 FROM results WHERE task = NEW.number AND threshold = 0
          AND outcome = 'completed')))
BEGIN SELECT RAISE(ABORT, 'forbidden_right:not_decided'); END;
DROP TRIGGER task_lease_taken;
CREATE TRIGGER task_lease_taken BEFORE UPDATE OF lease_id, lease_token, lease_holder,
    lease_instance, lease_session, lease_expires ON tasks
WHEN OLD.state NOT IN ('cancelled', 'completed', 'rejected') AND NEW.state IN ('accepted', 'working') AND NEW.lease_id IS NOT NULL
    AND NEW.lease_token > OLD.lease_token - (NEW.lease_id IS OLD.lease_id)
    AND (NEW.state IS OLD.state OR EXISTS (
        SELECT 1 FROM moves WHERE from_state = OLD.state AND to_state = NEW.state)) AND (
    NEW.lease_id IS NOT OLD.lease_id OR NEW.lease_token IS NOT OLD.lease_token
    OR NEW.lease_holder IS NOT OLD.lease_holder OR NEW.lease_instance IS NOT OLD.lease_instance
    OR NEW.lease_session IS NOT OLD.lease_session)
    AND NOT (
    ((OLD.state = 'routed' AND NEW.state = 'accepted')
     OR (OLD.state = 'waiting' AND NEW.state = 'working'))
    AND OLD.lease_id IS NULL AND NEW.lease_holder IS NEW.assignee
    AND NEW.lease_instance IS NOT NULL AND NEW.lease_token = OLD.lease_token + 1)
BEGIN SELECT RAISE(ABORT, 'forbidden_right:lease_by_claim_only'); END;
DROP TRIGGER task_lease_length;
CREATE TRIGGER task_lease_length BEFORE UPDATE OF lease_expires ON tasks
WHEN OLD.state NOT IN ('cancelled', 'completed', 'rejected') AND NEW.lease_expires IS NOT NULL AND NOT (
    (julianday(NEW.lease_expires) - julianday(NEW.updated_at)) * 86400
        BETWEEN 300 - 0.001 AND 900 + 0.001)
BEGIN SELECT RAISE(ABORT, 'invalid_input:lease_length'); END;
DROP TRIGGER task_created;
CREATE TRIGGER task_created AFTER INSERT ON tasks
BEGIN
    INSERT INTO journal(seq, task, at, actor, from_state, to_state, waiting_on, reason,
                        detail, hash, prev)
    VALUES (NEW.last_seq, NEW.number, NEW.created_at, NEW.actor, NULL, NEW.state, NULL,
            NEW.reason, NEW.detail, NEW.chain, NULL);
END;
DROP TRIGGER task_journal;
CREATE TRIGGER task_journal AFTER UPDATE OF state ON tasks
BEGIN
    INSERT INTO journal(seq, task, at, actor, from_state, to_state, waiting_on, reason,
                        detail, hash, prev)
    VALUES (CASE WHEN NEW.last_seq IS NOT OLD.last_seq THEN NEW.last_seq END, NEW.number,
            NEW.updated_at, NEW.actor, OLD.state, NEW.state, NEW.waiting_on, NEW.reason,
            NEW.detail, NEW.chain, OLD.last_seq);
END;
DROP TRIGGER journal_no_update;
CREATE TRIGGER journal_no_update BEFORE UPDATE ON journal
BEGIN SELECT RAISE(ABORT, 'forbidden_right:append_only'); END;
DROP TRIGGER task_unblocks;
CREATE TRIGGER task_unblocks AFTER UPDATE OF state ON tasks
WHEN NEW.state = 'completed'
BEGIN
    UPDATE tasks SET waits = waits - 1
    WHERE number IN (SELECT task FROM deps WHERE on_task = NEW.number)
      AND state NOT IN ('cancelled', 'completed', 'rejected');
END;
DROP TRIGGER task_claim_ready;
CREATE TRIGGER task_claim_ready BEFORE UPDATE OF state ON tasks
WHEN OLD.state = 'routed' AND NEW.state = 'accepted'
BEGIN
    SELECT CASE
        WHEN EXISTS (SELECT 1 FROM deps d JOIN tasks o ON o.number = d.on_task
                     WHERE d.task = NEW.number AND o.state IS NOT 'completed')
            THEN RAISE(ABORT, 'invalid_state:blocked')
        WHEN NEW.attempts >= NEW.attempt_limit
            THEN RAISE(ABORT, 'invalid_state:attempts_exhausted')
    END;
END;
DROP TRIGGER task_fields;
CREATE TRIGGER task_fields BEFORE UPDATE OF priority, labels, fields_version, attempts,
    attempt_limit ON tasks
WHEN OLD.state NOT IN ('cancelled', 'completed', 'rejected')
BEGIN
    SELECT CASE
        WHEN NEW.priority NOT IN ('high', 'low', 'normal', 'urgent')
            THEN RAISE(ABORT, 'invalid_input:invalid_priority')
        WHEN (NEW.priority IS NOT OLD.priority OR NEW.labels IS NOT OLD.labels
              OR NEW.attempt_limit IS NOT OLD.attempt_limit
              OR NEW.fields_version IS NOT OLD.fields_version)
            AND NEW.fields_version IS NOT OLD.fields_version + 1
            THEN RAISE(ABORT, 'invalid_state:stale_base')
        WHEN NEW.attempts < OLD.attempts
            THEN RAISE(ABORT, 'forbidden_right:attempts_only_grow')
    END;
END;
DROP TRIGGER task_lease_controlled;
CREATE TRIGGER task_lease_controlled BEFORE UPDATE OF lease_id ON tasks
WHEN NEW.lease_id IS NOT NULL AND NEW.lease_id IS NOT OLD.lease_id
BEGIN
    SELECT CASE
        WHEN EXISTS (SELECT 1 FROM controls WHERE lifted_at IS NULL AND kind = 'stop' AND (agent IS NEW.lease_holder
                     OR instance IS lower(rtrim(trim(NEW.lease_instance, ' '), '.'))
                     OR (agent IS NULL AND instance IS NULL)))
            THEN RAISE(ABORT, 'forbidden_right:vetoed')
        WHEN EXISTS (SELECT 1 FROM controls WHERE lifted_at IS NULL AND kind = 'hold' AND (agent IS NEW.lease_holder
                     OR instance IS lower(rtrim(trim(NEW.lease_instance, ' '), '.'))))
            THEN RAISE(ABORT, 'forbidden_right:held')
        WHEN EXISTS (SELECT 1 FROM controls WHERE lifted_at IS NULL AND kind = 'veto' AND agent IS NEW.lease_holder
                     AND task IS NEW.number)
            THEN RAISE(ABORT, 'forbidden_right:vetoed')
    END;
END;
DROP TRIGGER task_role;
CREATE TRIGGER task_role BEFORE INSERT ON tasks
WHEN NEW.role IS NOT NULL AND NOT (NEW.role GLOB '[a-z]*' AND NEW.role NOT GLOB '*[^a-z0-9-]*' AND length(NEW.role) <= 64)
BEGIN SELECT RAISE(ABORT, 'invalid_input:invalid_role'); END;
DROP TRIGGER task_role_fixed;
CREATE TRIGGER task_role_fixed BEFORE UPDATE OF role ON tasks
WHEN NEW.role IS NOT OLD.role
BEGIN SELECT RAISE(ABORT, 'invalid_input:immutable_field'); END;
DROP TRIGGER task_lease_enrolled;
CREATE TRIGGER task_lease_enrolled BEFORE UPDATE OF lease_id, lease_scope ON tasks
WHEN NEW.lease_id IS NOT NULL AND (NEW.lease_id IS NOT OLD.lease_id
                                   OR NEW.lease_scope IS NOT OLD.lease_scope)
BEGIN
    SELECT CASE
        WHEN NEW.lease_id IS OLD.lease_id
            THEN RAISE(ABORT, 'invalid_input:immutable_field')
        WHEN EXISTS (SELECT 1 FROM enrolments e WHERE e.agent = NEW.lease_holder AND NOT e.active)
            THEN RAISE(ABORT, 'invalid_state:optin_inactive')
        WHEN NEW.lease_scope IS NOT (SELECT seq FROM enrolments WHERE agent = NEW.lease_holder)
            THEN RAISE(ABORT, 'invalid_state:optin_changed')
        WHEN EXISTS (SELECT 1 FROM enrolments e WHERE e.agent = NEW.lease_holder AND (instr(',' || e.rights || ',', ',tasks.work,') = 0
                     OR (json_array_length(e.projects) > 0 AND NOT EXISTS (
                         SELECT 1 FROM json_each(e.projects) WHERE value = NEW.project))))
            THEN RAISE(ABORT, 'forbidden_right:optin_scope')
        WHEN NEW.role IS NOT NULL AND NOT EXISTS (
                SELECT 1 FROM enrolments e WHERE e.agent = NEW.lease_holder AND EXISTS (SELECT 1 FROM json_each(e.roles) WHERE value = NEW.role))
            THEN RAISE(ABORT, 'forbidden_right:not_permitted')
    END;
END;
DROP TRIGGER task_holder_enrolled;
CREATE TRIGGER task_holder_enrolled BEFORE UPDATE OF state ON tasks
WHEN OLD.lease_id IS NOT NULL AND NEW.state IS NOT OLD.state
    AND (NEW.state IN ('verifying', 'waiting', 'working') OR CASE WHEN OLD.state IN ('accepted', 'working') AND json_type(CASE WHEN json_valid(NEW.detail) THEN NEW.detail END, '$.via') = 'array' THEN json_extract(NEW.detail, '$.via') END IS NOT NULL)
    AND OLD.lease_scope IS NOT (SELECT seq FROM enrolments WHERE agent = OLD.lease_holder)
BEGIN
    SELECT CASE
        WHEN EXISTS (SELECT 1 FROM enrolments WHERE agent = OLD.lease_holder AND NOT active)
            THEN RAISE(ABORT, 'invalid_state:optin_inactive')
        ELSE RAISE(ABORT, 'invalid_state:optin_changed')
    END;
END;
DROP TRIGGER task_decided_by;
CREATE TRIGGER task_decided_by BEFORE UPDATE OF state ON tasks
WHEN NEW.state IN ('cancelled', 'rejected', 'routed') AND (
    (NEW.state = 'routed' AND OLD.state IN ('waiting') AND OLD.waiting_on IN ('owner_approval'))
    OR (NEW.state = 'rejected' AND OLD.state IN ('waiting') AND OLD.waiting_on IN ('owner_approval'))
    OR (NEW.state = 'routed' AND OLD.state IN ('approval'))
    OR (NEW.state = 'cancelled' AND OLD.state IN ('accepted', 'requested', 'routed', 'waiting', 'working')))
    AND NEW.actor IS NOT (SELECT value FROM meta WHERE key = 'owner')
    AND NOT (NEW.state = 'cancelled' AND coalesce((SELECT value FROM policy WHERE key = 'mode'), 'personal') = 'team' AND instr(NEW.actor, '/') > 0
             AND substr(NEW.actor, 1, instr(NEW.actor, '/') - 1) = substr(OLD.requester, 1, instr(OLD.requester, '/') - 1)
             AND substr(OLD.requester, 1, instr(OLD.requester, '/') - 1) IS NOT (SELECT value FROM meta WHERE key = 'owner'))
BEGIN
    SELECT CASE
        WHEN OLD.state NOT IN ('approval')
            THEN RAISE(ABORT, 'forbidden_right:not_owner')
        WHEN NOT EXISTS (SELECT 1 FROM confirmations c JOIN results r ON r.task = c.task
                         AND r.version = c.version WHERE c.task = NEW.number
                         AND c.reviewer = NEW.actor AND c.verdict = 'reject' AND c.counted)
            THEN RAISE(ABORT, 'forbidden_right:not_decided')
    END;
END;
DROP TRIGGER task_head;
CREATE TRIGGER task_head BEFORE UPDATE OF last_seq ON tasks
WHEN NEW.last_seq IS NOT OLD.last_seq AND NOT (
    (NEW.state IS NOT OLD.state
     AND NEW.last_seq IS (SELECT coalesce(max(seq), 0) FROM journal) + 1)
    OR (NEW.last_seq IS (SELECT max(seq) FROM journal)
        AND (SELECT task FROM journal WHERE seq = NEW.last_seq) IS NEW.number))
BEGIN SELECT RAISE(ABORT, 'forbidden_right:journal_head'); END;
DROP TRIGGER journal_head;
CREATE TRIGGER journal_head AFTER INSERT ON journal
WHEN NEW.task IS NOT NULL
BEGIN
    UPDATE tasks SET last_seq = NEW.seq WHERE number = NEW.task AND last_seq IS NOT NEW.seq;
END;
DROP TRIGGER task_attempt_failed;
CREATE TRIGGER task_attempt_failed AFTER UPDATE OF state ON tasks
WHEN NEW.state = 'routed' AND (OLD.state IN ('verifying', 'approval') OR CASE WHEN OLD.state IN ('accepted', 'working') AND json_type(CASE WHEN json_valid(NEW.detail) THEN NEW.detail END, '$.via') = 'array' THEN json_extract(NEW.detail, '$.via') END IS NOT NULL)
BEGIN
    UPDATE tasks SET attempts = attempts + 1 WHERE number = NEW.number;
END;
