-- Migration 13: fewer pages a move (frozen: never edit). Each task's journal as a list
-- linked from its task row, in place of the index journal_by_task: tasks.last_seq is the
-- task's newest journal row and journal.prev the task's row before each. The rules that
-- write a task's journal rows name the seq and link them, the rules that read a task's
-- newest row read it through the head, and two new rules keep the links true; store-wide
-- rows keep an index of their own. Existing rows are linked before the index goes. A
-- budgeted agent's claims are counted in a row of claim_counts, in place of the index
-- journal_claims on every claim. Every trigger from task_update on is made again in the
-- order it had, so each rule fires where it did (PostgreSQL's rules follow that order).

DROP TRIGGER task_update;
DROP TRIGGER task_move;
DROP TRIGGER results_update;
DROP TRIGGER journal_insert;
DROP TRIGGER moves_fixed_insert;
DROP TRIGGER moves_fixed_update;
DROP TRIGGER moves_fixed_delete;
DROP TRIGGER task_delete;
DROP TRIGGER packets_fixed_update;
DROP TRIGGER packets_fixed_delete;
DROP TRIGGER results_kept;
DROP TRIGGER results_insert;
DROP TRIGGER confirmations_insert;
DROP TRIGGER updates_insert;
DROP TRIGGER confirmations_no_update;
DROP TRIGGER confirmations_no_delete;
DROP TRIGGER updates_no_update;
DROP TRIGGER updates_no_delete;
DROP TRIGGER journal_no_delete;
DROP TRIGGER checkpoints_insert;
DROP TRIGGER checkpoints_update;
DROP TRIGGER checkpoints_no_delete;
DROP TRIGGER tasks_keys_kept;
DROP TRIGGER packets_keys_kept;
DROP TRIGGER checkpoints_keys_kept;
DROP TRIGGER results_keys_kept;
DROP TRIGGER confirmations_keys_kept;
DROP TRIGGER updates_keys_kept;
DROP TRIGGER journal_keys_kept;
DROP TRIGGER meta_keys_kept;
DROP TRIGGER meta_owner_fixed;
DROP TRIGGER meta_kept;
DROP TRIGGER task_completion_decided;
DROP TRIGGER task_lease_taken;
DROP TRIGGER task_lease_length;
DROP TRIGGER results_from_holder;
DROP TRIGGER results_fixed;
DROP TRIGGER checkpoints_fixed;
DROP TRIGGER meta_identity_fixed;
DROP TRIGGER task_created;
DROP TRIGGER task_journal;
DROP TRIGGER journal_no_update;
DROP TRIGGER deps_fixed_update;
DROP TRIGGER deps_fixed_delete;
DROP TRIGGER deps_keys_kept;
DROP TRIGGER deps_with_task;
DROP TRIGGER task_unblocks;
DROP TRIGGER task_attempt_failed;
DROP TRIGGER task_claim_ready;
DROP TRIGGER task_fields;
DROP TRIGGER policy_values;
DROP TRIGGER policy_no_update;
DROP TRIGGER required_plugins_no_update;
DROP TRIGGER required_plugins_kind;
DROP TRIGGER controls_scope;
DROP TRIGGER controls_keys_kept;
DROP TRIGGER controls_lifted_once;
DROP TRIGGER controls_kept;
DROP TRIGGER budgets_values;
DROP TRIGGER budgets_no_update;
DROP TRIGGER task_lease_controlled;
DROP TRIGGER confirmations_counted;
DROP TRIGGER confirmations_why;
DROP TRIGGER tokens_shape;
DROP TRIGGER tokens_keys_kept;
DROP TRIGGER tokens_revoked_once;
DROP TRIGGER tokens_kept;
DROP TRIGGER results_amended;
DROP TRIGGER results_merged;
DROP TRIGGER updates_bounded;
DROP TRIGGER controls_by_owner;
DROP TRIGGER policy_by_owner;
DROP TRIGGER required_plugins_by_owner;
DROP TRIGGER budgets_by_owner;
DROP TRIGGER tokens_by_owner;
DROP TRIGGER controls_lifted_by_owner;
DROP TRIGGER task_role;
DROP TRIGGER task_role_fixed;
DROP TRIGGER enrolments_by_owner;
DROP TRIGGER enrolments_shape;
DROP TRIGGER enrolments_journaled;
DROP TRIGGER enrolments_no_update;
DROP TRIGGER enrolments_replaced;
DROP TRIGGER task_lease_enrolled;
DROP TRIGGER task_holder_enrolled;
DROP TRIGGER task_decided_by;
DROP TRIGGER results_draft_shape;
DROP TRIGGER results_draft_reshaped;
DROP TRIGGER results_draft_fixed;
DROP TRIGGER results_receipts_shape;
DROP TRIGGER results_receipts_fixed;

ALTER TABLE tasks ADD COLUMN last_seq INTEGER;
ALTER TABLE journal ADD COLUMN prev INTEGER;

UPDATE journal SET prev = (SELECT max(j.seq) FROM journal j
                           WHERE j.task = journal.task AND j.seq < journal.seq)
WHERE task IS NOT NULL;
UPDATE tasks SET last_seq = (SELECT max(seq) FROM journal WHERE task = tasks.number);

DROP INDEX journal_by_task;
DROP INDEX journal_claims;
CREATE INDEX journal_events ON journal(reason, seq) WHERE task IS NULL;

CREATE TRIGGER task_update BEFORE UPDATE OF number, id, state, waiting_on, project, requester,
    assignee, created_at, updated_at, lease_id, lease_token, lease_holder,
    lease_instance, lease_session, lease_expires, priority, labels, fields_version,
    depends, actor, reason, detail, chain, waits, attempts, attempt_limit, role,
    lease_scope ON tasks
BEGIN
    SELECT CASE
        WHEN OLD.state IN ('cancelled', 'completed', 'rejected')
            THEN RAISE(ABORT, 'invalid_state:task_closed')
        WHEN NEW.number IS NOT OLD.number OR NEW.id IS NOT OLD.id
            OR NEW.created_at IS NOT OLD.created_at OR NEW.requester IS NOT OLD.requester
            OR NEW.assignee IS NOT OLD.assignee OR NEW.project IS NOT OLD.project
            THEN RAISE(ABORT, 'invalid_input:immutable_field')
        WHEN (NEW.state = 'waiting') = (NEW.waiting_on IS NULL)
            OR (NEW.waiting_on IS NOT NULL AND NEW.waiting_on NOT IN ('agent', 'human', 'owner_approval'))
            THEN RAISE(ABORT, 'invalid_state:waiting_on_mismatch')
        WHEN NEW.lease_token < OLD.lease_token
            OR (NEW.lease_id IS NOT NULL AND NEW.lease_id IS NOT OLD.lease_id
                AND NEW.lease_token <= OLD.lease_token)
            THEN RAISE(ABORT, 'invalid_state:fencing_token')
        WHEN NEW.lease_id IS NOT NULL AND NEW.state NOT IN ('accepted', 'working')
            THEN RAISE(ABORT, 'invalid_state:claim_outlives_state')
        WHEN NEW.lease_id IS NULL AND NEW.state IN ('accepted', 'working')
            THEN RAISE(ABORT, 'invalid_state:claim_missing')
        WHEN NEW.state IS NOT OLD.state AND NEW.state IN ('approval', 'completed', 'verifying')
            AND NOT EXISTS (SELECT 1 FROM results WHERE task = NEW.number)
            THEN RAISE(ABORT, 'invalid_state:result_missing')
    END;
END;

CREATE TRIGGER task_move BEFORE UPDATE OF state, waiting_on ON tasks
WHEN OLD.state NOT IN ('cancelled', 'completed', 'rejected')
    AND (NEW.state = 'waiting') = (NEW.waiting_on IS NOT NULL)
    AND (NEW.waiting_on IS NULL OR NEW.waiting_on IN ('agent', 'human', 'owner_approval'))
    AND NOT EXISTS (
    SELECT 1 FROM moves m
    WHERE m.from_state = OLD.state AND m.to_state = NEW.state
      AND (m.from_waiting IS NULL OR instr(m.from_waiting, '|' || OLD.waiting_on || '|'))
      AND (m.to_waiting IS NULL OR instr(m.to_waiting, '|' || NEW.waiting_on || '|'))
)
BEGIN SELECT RAISE(ABORT, 'invalid_state:no_such_move'); END;

CREATE TRIGGER results_update BEFORE UPDATE ON results
BEGIN
    SELECT CASE
        WHEN (SELECT state FROM tasks WHERE number = OLD.task) IN ('cancelled', 'completed', 'rejected')
            AND NOT (OLD.merge_commit IS NULL AND NEW.merge_commit IS NOT NULL
                     AND NEW.task IS OLD.task AND NEW.body IS OLD.body
                     AND NEW.version IS OLD.version AND NEW.worker IS OLD.worker
                     AND NEW.instance IS OLD.instance AND NEW.session IS OLD.session
                     AND NEW.outcome IS OLD.outcome AND NEW.threshold IS OLD.threshold)
            THEN RAISE(ABORT, 'invalid_state:task_closed')
        WHEN NEW.body IS NOT OLD.body AND NEW.version <= OLD.version
            THEN RAISE(ABORT, 'invalid_state:result_version')
    END;
END;

CREATE TRIGGER journal_insert BEFORE INSERT ON journal
WHEN (NEW.seq > 0 AND NEW.seq IS NOT (SELECT coalesce(max(seq), 0) FROM journal) + 1)
    OR (NEW.task IS NULL AND NEW.prev IS NOT NULL)
    OR (NEW.task IS NOT NULL AND (
    NOT EXISTS (SELECT 1 FROM tasks t WHERE t.number = NEW.task
                AND t.state IS NEW.to_state
                AND (t.last_seq IS NEW.seq OR t.last_seq IS NEW.prev))
    OR (NEW.from_state IS NOT NEW.to_state
        AND NOT (NEW.from_state IS NULL AND NEW.to_state = 'requested')
        AND NOT EXISTS (SELECT 1 FROM moves m WHERE m.from_state = NEW.from_state
                                               AND m.to_state = NEW.to_state))))
BEGIN SELECT RAISE(ABORT, 'forbidden_right:journal_forged'); END;

CREATE TRIGGER moves_fixed_insert BEFORE INSERT ON moves
BEGIN SELECT RAISE(ABORT, 'forbidden_right:protocol_fixed'); END;

CREATE TRIGGER moves_fixed_update BEFORE UPDATE ON moves
BEGIN SELECT RAISE(ABORT, 'forbidden_right:protocol_fixed'); END;

CREATE TRIGGER moves_fixed_delete BEFORE DELETE ON moves
BEGIN SELECT RAISE(ABORT, 'forbidden_right:protocol_fixed'); END;

CREATE TRIGGER task_delete BEFORE DELETE ON tasks
BEGIN SELECT RAISE(ABORT, 'forbidden_right:tasks_are_kept'); END;

CREATE TRIGGER packets_fixed_update BEFORE UPDATE ON packets
BEGIN SELECT RAISE(ABORT, 'forbidden_right:packet_fixed'); END;

CREATE TRIGGER packets_fixed_delete BEFORE DELETE ON packets
BEGIN SELECT RAISE(ABORT, 'forbidden_right:packet_fixed'); END;

CREATE TRIGGER results_kept BEFORE DELETE ON results
BEGIN SELECT RAISE(ABORT, 'forbidden_right:results_are_kept'); END;

CREATE TRIGGER results_insert BEFORE INSERT ON results
WHEN (SELECT state FROM tasks WHERE number = NEW.task) IN ('cancelled', 'completed', 'rejected')
BEGIN SELECT RAISE(ABORT, 'invalid_state:task_closed'); END;

CREATE TRIGGER confirmations_insert BEFORE INSERT ON confirmations
WHEN (SELECT state FROM tasks WHERE number = NEW.task) IS NOT 'approval'
BEGIN SELECT RAISE(ABORT, 'invalid_state:not_submitted'); END;

CREATE TRIGGER updates_insert BEFORE INSERT ON updates
WHEN (SELECT state FROM tasks WHERE number = NEW.task) IN ('cancelled', 'completed', 'rejected')
BEGIN SELECT RAISE(ABORT, 'invalid_state:task_closed'); END;

CREATE TRIGGER confirmations_no_update BEFORE UPDATE ON confirmations
BEGIN SELECT RAISE(ABORT, 'forbidden_right:append_only'); END;

CREATE TRIGGER confirmations_no_delete BEFORE DELETE ON confirmations
BEGIN SELECT RAISE(ABORT, 'forbidden_right:append_only'); END;

CREATE TRIGGER updates_no_update BEFORE UPDATE ON updates
BEGIN SELECT RAISE(ABORT, 'forbidden_right:append_only'); END;

CREATE TRIGGER updates_no_delete BEFORE DELETE ON updates
BEGIN SELECT RAISE(ABORT, 'forbidden_right:append_only'); END;

CREATE TRIGGER journal_no_delete BEFORE DELETE ON journal
BEGIN SELECT RAISE(ABORT, 'forbidden_right:append_only'); END;

CREATE TRIGGER checkpoints_insert BEFORE INSERT ON checkpoints
WHEN (SELECT state FROM tasks WHERE number = NEW.task) IN ('cancelled', 'completed', 'rejected')
BEGIN SELECT RAISE(ABORT, 'invalid_state:task_closed'); END;

CREATE TRIGGER checkpoints_update BEFORE UPDATE ON checkpoints
WHEN (SELECT state FROM tasks WHERE number = OLD.task) IN ('cancelled', 'completed', 'rejected')
BEGIN SELECT RAISE(ABORT, 'invalid_state:task_closed'); END;

CREATE TRIGGER checkpoints_no_delete BEFORE DELETE ON checkpoints
BEGIN SELECT RAISE(ABORT, 'forbidden_right:checkpoints_are_kept'); END;

CREATE TRIGGER tasks_keys_kept BEFORE INSERT ON tasks
WHEN EXISTS (SELECT 1 FROM tasks WHERE number = NEW.number OR id = NEW.id)
BEGIN SELECT RAISE(ABORT, 'forbidden_right:rows_are_kept'); END;

CREATE TRIGGER packets_keys_kept BEFORE INSERT ON packets
WHEN EXISTS (SELECT 1 FROM packets WHERE task = NEW.task)
BEGIN SELECT RAISE(ABORT, 'forbidden_right:rows_are_kept'); END;

CREATE TRIGGER checkpoints_keys_kept BEFORE INSERT ON checkpoints
WHEN EXISTS (SELECT 1 FROM checkpoints WHERE task = NEW.task)
BEGIN SELECT RAISE(ABORT, 'forbidden_right:rows_are_kept'); END;

CREATE TRIGGER results_keys_kept BEFORE INSERT ON results
WHEN EXISTS (SELECT 1 FROM results WHERE task = NEW.task)
BEGIN SELECT RAISE(ABORT, 'forbidden_right:rows_are_kept'); END;

CREATE TRIGGER confirmations_keys_kept BEFORE INSERT ON confirmations
WHEN EXISTS (SELECT 1 FROM confirmations WHERE task = NEW.task AND version = NEW.version AND reviewer = NEW.reviewer)
BEGIN SELECT RAISE(ABORT, 'forbidden_right:rows_are_kept'); END;

CREATE TRIGGER updates_keys_kept BEFORE INSERT ON updates
WHEN EXISTS (SELECT 1 FROM updates WHERE seq = NEW.seq)
BEGIN SELECT RAISE(ABORT, 'forbidden_right:rows_are_kept'); END;

CREATE TRIGGER journal_keys_kept BEFORE INSERT ON journal
WHEN EXISTS (SELECT 1 FROM journal WHERE seq = NEW.seq)
BEGIN SELECT RAISE(ABORT, 'forbidden_right:rows_are_kept'); END;

CREATE TRIGGER meta_keys_kept BEFORE INSERT ON meta
WHEN EXISTS (SELECT 1 FROM meta WHERE key = NEW.key)
BEGIN SELECT RAISE(ABORT, 'forbidden_right:rows_are_kept'); END;

CREATE TRIGGER meta_owner_fixed BEFORE UPDATE ON meta
WHEN OLD.key = 'owner' OR NEW.key IS NOT OLD.key
BEGIN SELECT RAISE(ABORT, 'forbidden_right:owner_fixed'); END;

CREATE TRIGGER meta_kept BEFORE DELETE ON meta
BEGIN SELECT RAISE(ABORT, 'forbidden_right:owner_fixed'); END;

CREATE TRIGGER task_completion_decided BEFORE UPDATE OF state ON tasks
WHEN NEW.state = 'completed' AND OLD.state IN ('approval', 'verifying')
    AND EXISTS (SELECT 1 FROM results WHERE task = NEW.number) AND NOT (
    (OLD.state = 'approval' AND (
        NEW.actor IS (SELECT value FROM meta WHERE key = 'owner')
        OR (SELECT count(*) FROM confirmations c JOIN results r ON r.task = c.task
            WHERE c.task = NEW.number AND c.version = r.version AND c.verdict = 'accept'
              AND c.counted) >= (SELECT coalesce(threshold, 1) FROM results
                                 WHERE task = NEW.number)))
    OR (OLD.state = 'verifying' AND EXISTS (
        SELECT 1 FROM results WHERE task = NEW.number AND threshold = 0
          AND outcome = 'completed')))
BEGIN SELECT RAISE(ABORT, 'forbidden_right:not_decided'); END;

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

CREATE TRIGGER task_lease_length BEFORE UPDATE OF lease_expires ON tasks
WHEN OLD.state NOT IN ('cancelled', 'completed', 'rejected') AND NEW.lease_expires IS NOT NULL AND NOT (
    (julianday(NEW.lease_expires) - julianday(NEW.updated_at)) * 86400
        BETWEEN 300 - 0.001 AND 900 + 0.001)
BEGIN SELECT RAISE(ABORT, 'invalid_input:lease_length'); END;

CREATE TRIGGER results_from_holder BEFORE INSERT ON results
WHEN (SELECT state FROM tasks WHERE number = NEW.task) NOT IN ('cancelled', 'completed', 'rejected') AND NOT EXISTS (
    SELECT 1 FROM tasks WHERE number = NEW.task
    AND state IN ('accepted', 'working') AND lease_holder IS NEW.worker
    AND lease_instance IS NEW.instance)
BEGIN SELECT RAISE(ABORT, 'forbidden_right:result_by_holder_only'); END;

CREATE TRIGGER results_fixed BEFORE UPDATE ON results
WHEN (SELECT state FROM tasks WHERE number = OLD.task) NOT IN ('cancelled', 'completed', 'rejected') AND (
    NEW.task IS NOT OLD.task
    OR ((NEW.worker IS NOT OLD.worker OR NEW.instance IS NOT OLD.instance
         OR NEW.session IS NOT OLD.session OR NEW.outcome IS NOT OLD.outcome
         OR NEW.threshold IS NOT OLD.threshold)
        AND NOT (NEW.version > OLD.version AND EXISTS (
            SELECT 1 FROM tasks WHERE number = NEW.task AND state IN ('accepted', 'working')
              AND lease_holder IS NEW.worker AND lease_instance IS NEW.instance)))
    OR (NEW.merge_commit IS NOT NULL AND NEW.merge_commit IS NOT OLD.merge_commit
        AND (SELECT state FROM tasks WHERE number = NEW.task) IS NOT 'completed'))
BEGIN SELECT RAISE(ABORT, 'forbidden_right:result_fixed'); END;

CREATE TRIGGER checkpoints_fixed BEFORE UPDATE ON checkpoints
WHEN NEW.task IS NOT OLD.task
BEGIN SELECT RAISE(ABORT, 'forbidden_right:rows_are_kept'); END;

CREATE TRIGGER meta_identity_fixed BEFORE UPDATE ON meta
WHEN OLD.key = 'store_id'
BEGIN SELECT RAISE(ABORT, 'forbidden_right:identity_fixed'); END;

CREATE TRIGGER task_created AFTER INSERT ON tasks
BEGIN
    INSERT INTO journal(seq, task, at, actor, from_state, to_state, waiting_on, reason,
                        detail, hash, prev)
    VALUES (NEW.last_seq, NEW.number, NEW.created_at, NEW.actor, NULL, NEW.state, NULL,
            NEW.reason, NEW.detail, NEW.chain, NULL);
END;

CREATE TRIGGER task_journal AFTER UPDATE OF state ON tasks
BEGIN
    INSERT INTO journal(seq, task, at, actor, from_state, to_state, waiting_on, reason,
                        detail, hash, prev)
    VALUES (CASE WHEN NEW.last_seq IS NOT OLD.last_seq THEN NEW.last_seq END, NEW.number,
            NEW.updated_at, NEW.actor, OLD.state, NEW.state, NEW.waiting_on, NEW.reason,
            NEW.detail, NEW.chain, OLD.last_seq);
END;

CREATE TRIGGER journal_no_update BEFORE UPDATE ON journal
BEGIN SELECT RAISE(ABORT, 'forbidden_right:append_only'); END;

CREATE TRIGGER deps_fixed_update BEFORE UPDATE ON deps
BEGIN SELECT RAISE(ABORT, 'forbidden_right:append_only'); END;

CREATE TRIGGER deps_fixed_delete BEFORE DELETE ON deps
BEGIN SELECT RAISE(ABORT, 'forbidden_right:append_only'); END;

CREATE TRIGGER deps_keys_kept BEFORE INSERT ON deps
WHEN EXISTS (SELECT 1 FROM deps WHERE task = NEW.task AND on_task = NEW.on_task)
BEGIN SELECT RAISE(ABORT, 'forbidden_right:rows_are_kept'); END;

CREATE TRIGGER deps_with_task BEFORE INSERT ON deps
WHEN (SELECT state FROM tasks WHERE number = NEW.task) IS NOT 'requested'
    OR NEW.task <= NEW.on_task
BEGIN SELECT RAISE(ABORT, 'invalid_input:dependency_fixed'); END;

CREATE TRIGGER task_unblocks AFTER UPDATE OF state ON tasks
WHEN NEW.state = 'completed'
BEGIN
    UPDATE tasks SET waits = waits - 1
    WHERE number IN (SELECT task FROM deps WHERE on_task = NEW.number)
      AND state NOT IN ('cancelled', 'completed', 'rejected');
END;

CREATE TRIGGER task_attempt_failed AFTER UPDATE OF state ON tasks
WHEN OLD.state = 'verifying' AND NEW.state = 'routed'
    AND json_extract(NEW.detail, '$.outcome') = 'failed'
BEGIN
    UPDATE tasks SET attempts = attempts + 1 WHERE number = NEW.number;
END;

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

CREATE TRIGGER policy_values BEFORE INSERT ON policy
WHEN NOT (
    (NEW.key = 'mode' AND NEW.value IN ('personal', 'team'))
    OR (NEW.key = 'proposals' AND NEW.value IN ('gate', 'owner'))
    OR (NEW.key = 'timezone' AND length(NEW.value) BETWEEN 1 AND 64)
    OR ((NEW.key = 'threshold' OR (NEW.key GLOB 'threshold:?*'
                                   AND length(NEW.key) <= 80))
        AND NEW.value GLOB '[0-9]*' AND NEW.value NOT GLOB '*[^0-9]*'
        AND length(NEW.value) <= 4 AND CAST(NEW.value AS INTEGER) <= 1000))
BEGIN SELECT RAISE(ABORT, 'invalid_input:invalid_policy'); END;

CREATE TRIGGER policy_no_update BEFORE UPDATE ON policy
BEGIN SELECT RAISE(ABORT, 'forbidden_right:append_only'); END;

CREATE TRIGGER required_plugins_no_update BEFORE UPDATE ON required_plugins
BEGIN SELECT RAISE(ABORT, 'forbidden_right:append_only'); END;

CREATE TRIGGER required_plugins_kind BEFORE INSERT ON required_plugins
WHEN NEW.kind NOT IN ('entry_point', 'file', 'given') OR NOT json_valid(NEW.settings)
BEGIN SELECT RAISE(ABORT, 'invalid_input:invalid_requirement'); END;

CREATE TRIGGER controls_scope BEFORE INSERT ON controls
WHEN NEW.lifted_at IS NOT NULL OR NEW.lifted_by IS NOT NULL
    OR NEW.instance IS NOT lower(rtrim(trim(NEW.instance, ' '), '.')) OR NOT (
    (NEW.kind = 'hold' AND NEW.task IS NULL AND (NEW.agent IS NULL) != (NEW.instance IS NULL))
    OR (NEW.kind = 'veto' AND NEW.task IS NOT NULL AND NEW.agent IS NOT NULL
        AND NEW.instance IS NULL)
    OR (NEW.kind = 'stop' AND NEW.task IS NULL
        AND (NEW.agent IS NULL OR NEW.instance IS NULL)))
BEGIN SELECT RAISE(ABORT, 'invalid_input:invalid_control'); END;

CREATE TRIGGER controls_keys_kept BEFORE INSERT ON controls
WHEN EXISTS (SELECT 1 FROM controls WHERE id = NEW.id)
BEGIN SELECT RAISE(ABORT, 'forbidden_right:rows_are_kept'); END;

CREATE TRIGGER controls_lifted_once BEFORE UPDATE ON controls
WHEN OLD.lifted_at IS NOT NULL OR NEW.lifted_at IS NULL OR NEW.lifted_by IS NULL
    OR NEW.id IS NOT OLD.id OR NEW.kind IS NOT OLD.kind OR NEW.agent IS NOT OLD.agent
    OR NEW.instance IS NOT OLD.instance OR NEW.task IS NOT OLD.task OR NEW.at IS NOT OLD.at
    OR NEW.by IS NOT OLD.by OR NEW.reason IS NOT OLD.reason
BEGIN SELECT RAISE(ABORT, 'forbidden_right:controls_kept'); END;

CREATE TRIGGER controls_kept BEFORE DELETE ON controls
BEGIN SELECT RAISE(ABORT, 'forbidden_right:controls_kept'); END;

CREATE TRIGGER budgets_values BEFORE INSERT ON budgets
WHEN (NEW.tasks IS NOT NULL AND (typeof(NEW.tasks) != 'integer' OR NEW.tasks < 0))
    OR (NEW.tokens IS NOT NULL AND (typeof(NEW.tokens) != 'integer' OR NEW.tokens < 0))
    OR (NEW.usd_micros IS NOT NULL
        AND (typeof(NEW.usd_micros) != 'integer' OR NEW.usd_micros < 0))
BEGIN SELECT RAISE(ABORT, 'invalid_input:invalid_budget'); END;

CREATE TRIGGER budgets_no_update BEFORE UPDATE ON budgets
BEGIN SELECT RAISE(ABORT, 'forbidden_right:append_only'); END;

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

CREATE TRIGGER confirmations_counted BEFORE INSERT ON confirmations
WHEN (SELECT state FROM tasks WHERE number = NEW.task) IS 'approval' AND (
    NEW.version IS NOT (SELECT version FROM results WHERE task = NEW.task)
    OR (NEW.counted AND (
        EXISTS (SELECT 1 FROM results WHERE task = NEW.task AND (worker = NEW.reviewer
                OR lower(rtrim(trim(instance, ' '), '.')) = lower(rtrim(trim(NEW.instance, ' '), '.'))))
        OR CASE coalesce((SELECT value FROM policy WHERE key = 'mode'), 'personal')
            WHEN 'team' THEN substr(NEW.reviewer, 1, instr(NEW.reviewer, '/') - 1) = (SELECT substr(worker, 1, instr(worker, '/') - 1) FROM results
                                                  WHERE task = NEW.task)
                OR EXISTS (SELECT 1 FROM confirmations c WHERE c.task = NEW.task
                           AND c.version = NEW.version AND c.counted
                           AND substr(c.reviewer, 1, instr(c.reviewer, '/') - 1) = substr(NEW.reviewer, 1, instr(NEW.reviewer, '/') - 1))
            ELSE substr(NEW.reviewer, 1, instr(NEW.reviewer, '/') - 1) IS NOT (SELECT value FROM meta WHERE key = 'owner')
                OR EXISTS (SELECT 1 FROM confirmations c WHERE c.task = NEW.task
                           AND c.version = NEW.version AND c.counted
                           AND lower(rtrim(trim(c.instance, ' '), '.')) = lower(rtrim(trim(NEW.instance, ' '), '.')))
        END)))
BEGIN SELECT RAISE(ABORT, 'invalid_state:reviewer_not_independent'); END;

CREATE TRIGGER confirmations_why BEFORE INSERT ON confirmations
WHEN (NEW.counted AND NEW.why IS NOT NULL) OR (NOT NEW.counted AND NEW.why IS NULL)
BEGIN SELECT RAISE(ABORT, 'invalid_input:uncounted_needs_why'); END;

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

CREATE TRIGGER results_amended BEFORE UPDATE OF body, version ON results
WHEN (NEW.body IS NOT OLD.body OR NEW.version IS NOT OLD.version)
    AND (SELECT state FROM tasks WHERE number = OLD.task) NOT IN ('cancelled', 'completed', 'rejected')
    AND NOT (NEW.version IS OLD.version + 1 AND EXISTS (
        SELECT 1 FROM tasks WHERE number = NEW.task AND state IN ('accepted', 'working')
          AND lease_holder IS NEW.worker AND lease_instance IS NEW.instance))
    AND ((NEW.task IS OLD.task AND NEW.worker IS OLD.worker AND NEW.instance IS OLD.instance
          AND NEW.session IS OLD.session AND NEW.outcome IS OLD.outcome AND NEW.threshold IS OLD.threshold) OR EXISTS (
        SELECT 1 FROM tasks WHERE number = NEW.task AND state IN ('accepted', 'working')
          AND lease_holder IS NEW.worker AND lease_instance IS NEW.instance))
    AND NOT (NEW.version IS OLD.version + 1 AND EXISTS (
        SELECT 1 FROM (SELECT to_state, actor, reason, CASE WHEN json_valid(detail) THEN detail END AS detail
                       FROM journal WHERE seq = (SELECT last_seq FROM tasks WHERE number = OLD.task)) j
        WHERE j.to_state = 'approval' AND j.reason = 'amended' AND j.actor IS OLD.worker
          AND json_extract(j.detail, '$.version') IS NEW.version))
BEGIN
    SELECT CASE
        WHEN NEW.version IS NOT OLD.version + 1
            THEN RAISE(ABORT, 'invalid_state:result_version')
        ELSE RAISE(ABORT, 'forbidden_right:amend_not_journaled')
    END;
END;

CREATE TRIGGER results_merged BEFORE UPDATE OF merge_commit, merged_by ON results
WHEN (NEW.merge_commit IS NOT OLD.merge_commit OR NEW.merged_by IS NOT OLD.merged_by)
    AND NOT (OLD.merge_commit IS NOT NULL AND (SELECT state FROM tasks WHERE number = OLD.task) IN ('cancelled', 'completed', 'rejected'))
    AND NOT (NEW.merge_commit IS NOT NULL AND (SELECT state FROM tasks WHERE number = OLD.task) NOT IN ('cancelled', 'completed', 'rejected'))
    AND NOT (OLD.merge_commit IS NULL AND NEW.merge_commit IS NOT NULL
             AND (NEW.merged_by IS (SELECT value FROM meta WHERE key = 'owner') OR NEW.merged_by IS OLD.worker)
             AND EXISTS (
        SELECT 1 FROM (SELECT to_state, actor, reason, CASE WHEN json_valid(detail) THEN detail END AS detail
                       FROM journal WHERE seq = (SELECT last_seq FROM tasks WHERE number = OLD.task)) j
        WHERE j.to_state = 'completed' AND j.reason = 'merge_recorded' AND j.actor IS NEW.merged_by
          AND json_extract(j.detail, '$.merge_commit') IS NEW.merge_commit))
BEGIN
    SELECT CASE
        WHEN NEW.merge_commit IS NULL OR (SELECT state FROM tasks WHERE number = OLD.task) IS NOT 'completed'
            THEN RAISE(ABORT, 'invalid_state:not_amendable')
        WHEN NEW.merged_by IS NOT (SELECT value FROM meta WHERE key = 'owner')
            AND NEW.merged_by IS NOT OLD.worker
            THEN RAISE(ABORT, 'forbidden_right:not_submitter')
        ELSE RAISE(ABORT, 'forbidden_right:merge_not_journaled')
    END;
END;

CREATE TRIGGER updates_bounded BEFORE INSERT ON updates
WHEN (NEW.tokens IS NOT NULL AND (typeof(NEW.tokens) != 'integer' OR NEW.tokens < 0 OR NEW.tokens > 1000000000000))
    OR (NEW.usd_micros IS NOT NULL AND (typeof(NEW.usd_micros) != 'integer' OR NEW.usd_micros < 0 OR NEW.usd_micros > 1000000000000))
BEGIN SELECT RAISE(ABORT, 'invalid_input:invalid_usage'); END;

CREATE TRIGGER controls_by_owner BEFORE INSERT ON controls
WHEN NEW.by IS NOT (SELECT value FROM meta WHERE key = 'owner')
BEGIN SELECT RAISE(ABORT, 'forbidden_right:not_owner'); END;

CREATE TRIGGER policy_by_owner BEFORE INSERT ON policy
WHEN NEW.by IS NOT (SELECT value FROM meta WHERE key = 'owner')
BEGIN SELECT RAISE(ABORT, 'forbidden_right:not_owner'); END;

CREATE TRIGGER required_plugins_by_owner BEFORE INSERT ON required_plugins
WHEN NEW.by IS NOT (SELECT value FROM meta WHERE key = 'owner')
BEGIN SELECT RAISE(ABORT, 'forbidden_right:not_owner'); END;

CREATE TRIGGER budgets_by_owner BEFORE INSERT ON budgets
WHEN NEW.by IS NOT (SELECT value FROM meta WHERE key = 'owner')
BEGIN SELECT RAISE(ABORT, 'forbidden_right:not_owner'); END;

CREATE TRIGGER tokens_by_owner BEFORE INSERT ON tokens
WHEN NEW.by IS NOT (SELECT value FROM meta WHERE key = 'owner')
BEGIN SELECT RAISE(ABORT, 'forbidden_right:not_owner'); END;

CREATE TRIGGER controls_lifted_by_owner BEFORE UPDATE OF lifted_by ON controls
WHEN NEW.lifted_by IS NOT NULL AND NEW.lifted_by IS NOT OLD.lifted_by
    AND NEW.lifted_by IS NOT (SELECT value FROM meta WHERE key = 'owner')
BEGIN SELECT RAISE(ABORT, 'forbidden_right:not_owner'); END;

CREATE TRIGGER task_role BEFORE INSERT ON tasks
WHEN NEW.role IS NOT NULL AND NOT (NEW.role GLOB '[a-z]*' AND NEW.role NOT GLOB '*[^a-z0-9-]*' AND length(NEW.role) <= 64)
BEGIN SELECT RAISE(ABORT, 'invalid_input:invalid_role'); END;

CREATE TRIGGER task_role_fixed BEFORE UPDATE OF role ON tasks
WHEN NEW.role IS NOT OLD.role
BEGIN SELECT RAISE(ABORT, 'invalid_input:immutable_field'); END;

CREATE TRIGGER enrolments_by_owner BEFORE INSERT ON enrolments
WHEN NEW.by IS NOT (SELECT value FROM meta WHERE key = 'owner')
BEGIN SELECT RAISE(ABORT, 'forbidden_right:not_owner'); END;

CREATE TRIGGER enrolments_shape BEFORE INSERT ON enrolments
WHEN NEW.active NOT IN (0, 1) OR typeof(NEW.seq) != 'integer' OR NEW.rights = ''
    OR NOT (json_valid(NEW.projects) AND json_type(NEW.projects) = 'array' AND NOT EXISTS (SELECT 1 FROM json_each(NEW.projects) WHERE type != 'text' OR NOT (value GLOB '[a-z0-9]*' AND value NOT GLOB '*[^a-z0-9-]*' AND length(value) <= 39))) OR NOT (json_valid(NEW.roles) AND json_type(NEW.roles) = 'array' AND NOT EXISTS (SELECT 1 FROM json_each(NEW.roles) WHERE type != 'text' OR NOT (value GLOB '[a-z]*' AND value NOT GLOB '*[^a-z0-9-]*' AND length(value) <= 64)))
    OR NOT NOT EXISTS (SELECT 1 FROM json_each('["' || replace(NEW.rights, ',', '","') || '"]') WHERE value NOT IN ('tasks.propose', 'tasks.work'))
BEGIN SELECT RAISE(ABORT, 'invalid_input:invalid_enrolment'); END;

CREATE TRIGGER enrolments_journaled BEFORE INSERT ON enrolments
WHEN NOT EXISTS (SELECT 1 FROM (SELECT seq AS seq, actor AS actor, reason AS reason, CASE WHEN json_valid(detail) THEN detail END AS detail FROM journal ORDER BY seq DESC LIMIT 1) j
                 WHERE j.seq = NEW.seq AND j.reason = 'enrolment' AND j.actor IS NEW.by
                   AND json_extract(j.detail, '$.agent') IS NEW.agent
                   AND json_extract(j.detail, '$.projects') IS NEW.projects
                   AND json_extract(j.detail, '$.roles') IS NEW.roles
                   AND json_extract(j.detail, '$.rights') IS NEW.rights
                   AND json_extract(j.detail, '$.active') IS NEW.active)
BEGIN SELECT RAISE(ABORT, 'forbidden_right:enrolment_not_journaled'); END;

CREATE TRIGGER enrolments_no_update BEFORE UPDATE ON enrolments
BEGIN SELECT RAISE(ABORT, 'forbidden_right:append_only'); END;

CREATE TRIGGER enrolments_replaced BEFORE DELETE ON enrolments
WHEN NOT EXISTS (SELECT 1 FROM (SELECT seq AS seq, actor AS actor, reason AS reason, CASE WHEN json_valid(detail) THEN detail END AS detail FROM journal ORDER BY seq DESC LIMIT 1) j
                 WHERE j.seq > OLD.seq AND j.reason = 'enrolment'
                   AND json_extract(j.detail, '$.agent') IS OLD.agent)
BEGIN SELECT RAISE(ABORT, 'forbidden_right:enrolment_not_journaled'); END;

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

CREATE TRIGGER task_holder_enrolled BEFORE UPDATE OF state ON tasks
WHEN OLD.lease_id IS NOT NULL AND NEW.state IS NOT OLD.state
    AND NEW.state IN ('verifying', 'waiting', 'working')
    AND OLD.lease_scope IS NOT (SELECT seq FROM enrolments WHERE agent = OLD.lease_holder)
BEGIN
    SELECT CASE
        WHEN EXISTS (SELECT 1 FROM enrolments WHERE agent = OLD.lease_holder AND NOT active)
            THEN RAISE(ABORT, 'invalid_state:optin_inactive')
        ELSE RAISE(ABORT, 'invalid_state:optin_changed')
    END;
END;

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

CREATE TRIGGER results_draft_shape BEFORE INSERT ON results
WHEN NEW.draft IS NOT NULL AND (NOT json_valid(NEW.draft) OR json_type(NEW.draft) IS NOT 'object' OR coalesce(json_extract(NEW.draft, '$.kind'), '') NOT IN ('decision', 'document', 'patch') OR json_type(NEW.draft, '$.content') IS NOT 'text' OR NEW.outcome IS NOT 'completed')
BEGIN SELECT RAISE(ABORT, 'invalid_input:invalid_draft'); END;

CREATE TRIGGER results_draft_reshaped BEFORE UPDATE OF draft, outcome ON results
WHEN NEW.draft IS NOT NULL AND (NOT json_valid(NEW.draft) OR json_type(NEW.draft) IS NOT 'object' OR coalesce(json_extract(NEW.draft, '$.kind'), '') NOT IN ('decision', 'document', 'patch') OR json_type(NEW.draft, '$.content') IS NOT 'text' OR NEW.outcome IS NOT 'completed')
BEGIN SELECT RAISE(ABORT, 'invalid_input:invalid_draft'); END;

CREATE TRIGGER results_draft_fixed BEFORE UPDATE OF draft ON results
WHEN NEW.draft IS NOT OLD.draft AND NOT (NEW.version IS OLD.version + 1 AND EXISTS (SELECT 1 FROM tasks WHERE number = NEW.task AND state IN ('accepted', 'working') AND lease_holder IS NEW.worker AND lease_instance IS NEW.instance))
BEGIN SELECT RAISE(ABORT, 'forbidden_right:draft_fixed'); END;

CREATE TRIGGER results_receipts_shape BEFORE INSERT ON results
WHEN (NEW.receipts IS NOT NULL AND (NOT json_valid(NEW.receipts) OR json_type(NEW.receipts) IS NOT 'array' OR EXISTS (SELECT 1 FROM json_each(NEW.receipts) WHERE type NOT IN ('null', 'object'))))
BEGIN SELECT RAISE(ABORT, 'invalid_input:invalid_receipt'); END;

CREATE TRIGGER results_receipts_fixed BEFORE UPDATE OF receipts ON results
WHEN NEW.receipts IS NOT OLD.receipts
BEGIN
    SELECT CASE
        WHEN NEW.version IS NOT OLD.version + 1
            THEN RAISE(ABORT, 'forbidden_right:receipts_fixed')
        WHEN (NEW.receipts IS NOT NULL AND (NOT json_valid(NEW.receipts) OR json_type(NEW.receipts) IS NOT 'array' OR EXISTS (SELECT 1 FROM json_each(NEW.receipts) WHERE type NOT IN ('null', 'object'))))
            THEN RAISE(ABORT, 'invalid_input:invalid_receipt')
    END;
END;

CREATE TABLE claim_counts(
    agent TEXT PRIMARY KEY,
    day TEXT NOT NULL,
    claims INTEGER NOT NULL
) WITHOUT ROWID;

-- A head is the journal's newest row, about this task, or the row a move of this task is
-- about to write (the next seq).
CREATE TRIGGER task_head BEFORE UPDATE OF last_seq ON tasks
WHEN NEW.last_seq IS NOT OLD.last_seq AND NOT (
    (NEW.state IS NOT OLD.state
     AND NEW.last_seq IS (SELECT coalesce(max(seq), 0) FROM journal) + 1)
    OR (NEW.last_seq IS (SELECT max(seq) FROM journal)
        AND (SELECT task FROM journal WHERE seq = NEW.last_seq) IS NEW.number))
BEGIN SELECT RAISE(ABORT, 'forbidden_right:journal_head'); END;

-- A row about a task that its write did not name as the head (an event; raw SQL) heads it.
CREATE TRIGGER journal_head AFTER INSERT ON journal
WHEN NEW.task IS NOT NULL
BEGIN
    UPDATE tasks SET last_seq = NEW.seq WHERE number = NEW.task AND last_seq IS NOT NEW.seq;
END;
