-- Migration 3: the deciding rules and kept keys in the store itself (frozen: never edit).
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

-- A completion is decided: by the owner's sign-off, by enough counted confirmations of the
-- current result, or (from verifying) by a threshold of 0.
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

-- A lease is taken only by a claim (routed -> accepted) or a resume (waiting -> working),
-- by the assignee, with the next fencing token, for 5 to 15 minutes from the move; later
-- it may only be extended (by 5 to 15 minutes from the renewal) or ended. (A lease on
-- another state, a token that does not grow or a pair that is no move are refused by the
-- older triggers, with their own reasons.)
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

-- A verdict counts only from another agent on another instance than the result's, and
-- only on the current version of the result.
CREATE TRIGGER confirmations_counted BEFORE INSERT ON confirmations
WHEN (SELECT state FROM tasks WHERE number = NEW.task) IS 'approval' AND (
    NEW.version IS NOT (SELECT version FROM results WHERE task = NEW.task)
    OR (NEW.counted AND EXISTS (SELECT 1 FROM results WHERE task = NEW.task
        AND (worker = NEW.reviewer OR lower(instance) = lower(NEW.instance)))))
BEGIN SELECT RAISE(ABORT, 'invalid_state:reviewer_not_independent'); END;

-- A result comes from the task's holder, under its live claim.
CREATE TRIGGER results_from_holder BEFORE INSERT ON results
WHEN (SELECT state FROM tasks WHERE number = NEW.task) NOT IN ('cancelled', 'completed', 'rejected') AND NOT EXISTS (
    SELECT 1 FROM tasks WHERE number = NEW.task
    AND state IN ('accepted', 'working') AND lease_holder IS NEW.worker
    AND lease_instance IS NEW.instance)
BEGIN SELECT RAISE(ABORT, 'forbidden_right:result_by_holder_only'); END;

-- Who returned a result, from where, and its threshold change only with a new submission
-- by the holder; a merge is recorded only on a completed task; a result stays its task's.
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

