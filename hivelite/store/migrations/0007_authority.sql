-- Migration 7: the owner's authority lives in the store (frozen: never edit): the store's
-- policy (independence mode, thresholds, time zone, agent proposals), the policy plugins
-- every writer must load, hold / veto / stop controls, daily budgets and the indexes that
-- count a day's use. A verdict that does not count says why, and counts only as the
-- store's mode says.
DROP TRIGGER confirmations_counted;
ALTER TABLE confirmations ADD COLUMN why TEXT;
CREATE TABLE policy(
    key TEXT PRIMARY KEY,
    value TEXT NOT NULL,
    at TEXT NOT NULL,
    by TEXT NOT NULL
) WITHOUT ROWID;

CREATE TABLE required_plugins(
    name TEXT PRIMARY KEY,
    kind TEXT NOT NULL,
    digest TEXT NOT NULL,
    settings TEXT NOT NULL,
    at TEXT NOT NULL,
    by TEXT NOT NULL
) WITHOUT ROWID;

CREATE TABLE controls(
    id INTEGER PRIMARY KEY,
    kind TEXT NOT NULL,
    agent TEXT,
    instance TEXT,
    task INTEGER REFERENCES tasks(number),
    at TEXT NOT NULL,
    by TEXT NOT NULL,
    reason TEXT,
    lifted_at TEXT,
    lifted_by TEXT
);
CREATE INDEX controls_live ON controls(kind) WHERE lifted_at IS NULL;

CREATE TABLE budgets(
    agent TEXT PRIMARY KEY,
    tasks INTEGER,
    tokens INTEGER,
    usd_micros INTEGER,
    at TEXT NOT NULL,
    by TEXT NOT NULL
) WITHOUT ROWID;

-- A day's claims and reported usage per agent, read by the daily budgets.
CREATE INDEX journal_claims ON journal(actor, at)
WHERE from_state = 'routed' AND to_state = 'accepted';
CREATE INDEX updates_usage ON updates(actor, at)
WHERE tokens IS NOT NULL OR usd_micros IS NOT NULL;

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

-- A control names an instance as every comparison spells it (lowercase, no trailing dot).
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

-- A control is lifted once, explicitly; nothing else about it changes.
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

-- No lease for an agent the owner stopped, held, or vetoed on this task.
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

-- A verdict counts only on the current version of the result, from another agent on
-- another instance than the result's, and only as the store's mode says: personal, the
-- owner's own agents, one per instance; team, other owners than the worker's, one per
-- owner. A verdict that does not count says why.
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
