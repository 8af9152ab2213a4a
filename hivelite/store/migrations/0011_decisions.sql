-- Migration 11: who decides, and what decides, written only by its verb (frozen: never
-- edit). The owner's moves (approve, deny, cancel) by the store's owner, a decline by the
-- owner or a verifier's counted rejection; a result's body and version changed only by its
-- holder's submission or its worker's journaled amend; a merge recorded once, journaled, on
-- a completed task, by the worker or the owner; usage rows whole, non-negative, bounded;
-- the owner's tables (controls and their lifts, policy, required plugins, budgets, tokens)
-- written by the owner.

-- The owner's decisions are the owner's: approve, deny and cancel are made by the store's
-- owner; a decline by the owner, or by a verifier whose counted rejection of the current
-- result it is.
CREATE TRIGGER task_decided_by BEFORE UPDATE OF state ON tasks
WHEN NEW.state IN ('cancelled', 'rejected', 'routed') AND (
    (NEW.state = 'routed' AND OLD.state IN ('waiting') AND OLD.waiting_on IN ('owner_approval'))
    OR (NEW.state = 'rejected' AND OLD.state IN ('waiting') AND OLD.waiting_on IN ('owner_approval'))
    OR (NEW.state = 'routed' AND OLD.state IN ('approval'))
    OR (NEW.state = 'cancelled' AND OLD.state IN ('accepted', 'requested', 'routed', 'waiting', 'working')))
    AND NEW.actor IS NOT (SELECT value FROM meta WHERE key = 'owner')
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

-- A result's body and version change one version at a time, by a new submission of the
-- task's holder, or by its worker's amend journaled just before (the task's newest journal
-- row names the new version). A change of who returned it is results_fixed's to refuse.
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
                       FROM journal WHERE task = OLD.task ORDER BY seq DESC LIMIT 1) j
        WHERE j.to_state = 'approval' AND j.reason = 'amended' AND j.actor IS OLD.worker
          AND json_extract(j.detail, '$.version') IS NEW.version))
BEGIN
    SELECT CASE
        WHEN NEW.version IS NOT OLD.version + 1
            THEN RAISE(ABORT, 'invalid_state:result_version')
        ELSE RAISE(ABORT, 'forbidden_right:amend_not_journaled')
    END;
END;

-- A merge is recorded once, on a completed task, by the result's worker or the owner,
-- with its journal row written just before (the task's newest names the commit; a row
-- ending in 'completed' is only ever written on a completed task). A second record is
-- results_update's to refuse, one on an open task results_fixed's.
CREATE TRIGGER results_merged BEFORE UPDATE OF merge_commit, merged_by ON results
WHEN (NEW.merge_commit IS NOT OLD.merge_commit OR NEW.merged_by IS NOT OLD.merged_by)
    AND NOT (OLD.merge_commit IS NOT NULL AND (SELECT state FROM tasks WHERE number = OLD.task) IN ('cancelled', 'completed', 'rejected'))
    AND NOT (NEW.merge_commit IS NOT NULL AND (SELECT state FROM tasks WHERE number = OLD.task) NOT IN ('cancelled', 'completed', 'rejected'))
    AND NOT (OLD.merge_commit IS NULL AND NEW.merge_commit IS NOT NULL
             AND (NEW.merged_by IS (SELECT value FROM meta WHERE key = 'owner') OR NEW.merged_by IS OLD.worker)
             AND EXISTS (
        SELECT 1 FROM (SELECT to_state, actor, reason, CASE WHEN json_valid(detail) THEN detail END AS detail
                       FROM journal WHERE task = OLD.task ORDER BY seq DESC LIMIT 1) j
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

-- Usage is whole, non-negative and bounded: no row lowers or overflows a day's budget.
CREATE TRIGGER updates_bounded BEFORE INSERT ON updates
WHEN (NEW.tokens IS NOT NULL AND (typeof(NEW.tokens) != 'integer' OR NEW.tokens < 0 OR NEW.tokens > 1000000000000))
    OR (NEW.usd_micros IS NOT NULL AND (typeof(NEW.usd_micros) != 'integer' OR NEW.usd_micros < 0 OR NEW.usd_micros > 1000000000000))
BEGIN SELECT RAISE(ABORT, 'invalid_input:invalid_usage'); END;

-- The owner's tables are written by the owner: a control, and its lift; the policy, the
-- required plugins, the budgets, the tokens.
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
