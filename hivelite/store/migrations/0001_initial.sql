-- Migration 1: the initial schema (frozen: never edit; add a new migration instead).

CREATE TABLE meta(
    key TEXT PRIMARY KEY,
    value TEXT NOT NULL
) WITHOUT ROWID;

CREATE TABLE moves(
    number INTEGER NOT NULL UNIQUE,
    name TEXT NOT NULL UNIQUE,
    from_state TEXT NOT NULL,
    from_waiting TEXT,
    to_state TEXT NOT NULL,
    to_waiting TEXT,
    PRIMARY KEY (from_state, to_state)
) WITHOUT ROWID;

CREATE TABLE tasks(
    number INTEGER PRIMARY KEY,
    id TEXT NOT NULL UNIQUE,
    state TEXT NOT NULL,
    waiting_on TEXT,
    project TEXT NOT NULL,
    requester TEXT NOT NULL,
    assignee TEXT NOT NULL,
    created_at TEXT NOT NULL,
    updated_at TEXT NOT NULL,
    lease_id TEXT,
    lease_token INTEGER NOT NULL DEFAULT 0,
    lease_holder TEXT,
    lease_instance TEXT,
    lease_session TEXT,
    lease_expires TEXT,
    priority TEXT NOT NULL DEFAULT 'normal',
    labels TEXT NOT NULL DEFAULT '[]',
    fields_version INTEGER NOT NULL DEFAULT 1,
    depends INTEGER NOT NULL DEFAULT 0,
    actor TEXT,
    reason TEXT,
    detail TEXT
);

CREATE TABLE packets(
    task INTEGER PRIMARY KEY REFERENCES tasks(number),
    body TEXT NOT NULL
);

CREATE TABLE checkpoints(
    task INTEGER PRIMARY KEY REFERENCES tasks(number),
    body TEXT NOT NULL
);

CREATE TABLE results(
    task INTEGER PRIMARY KEY REFERENCES tasks(number),
    body TEXT NOT NULL,
    worker TEXT NOT NULL,
    instance TEXT NOT NULL,
    session TEXT,
    outcome TEXT NOT NULL DEFAULT 'completed',
    version INTEGER NOT NULL DEFAULT 1,
    threshold INTEGER,
    merge_commit TEXT,
    merged_by TEXT
);

CREATE TABLE confirmations(
    task INTEGER NOT NULL REFERENCES tasks(number),
    version INTEGER NOT NULL,
    reviewer TEXT NOT NULL,
    instance TEXT NOT NULL,
    session TEXT,
    verdict TEXT NOT NULL,
    reason TEXT,
    at TEXT NOT NULL,
    counted INTEGER NOT NULL,
    PRIMARY KEY (task, version, reviewer)
) WITHOUT ROWID;

CREATE TABLE updates(
    seq INTEGER PRIMARY KEY,
    task INTEGER NOT NULL REFERENCES tasks(number),
    at TEXT NOT NULL,
    actor TEXT NOT NULL,
    summary TEXT NOT NULL,
    tokens INTEGER,
    usd_micros INTEGER
);
CREATE INDEX updates_by_task ON updates(task, seq);

-- Only live leases are indexed: the expiry sweep on every write reads this, not the table.
CREATE INDEX tasks_live_leases ON tasks(lease_expires) WHERE lease_id IS NOT NULL;

CREATE TABLE journal(
    seq INTEGER PRIMARY KEY,
    task INTEGER REFERENCES tasks(number),
    at TEXT NOT NULL,
    actor TEXT,
    from_state TEXT,
    to_state TEXT,
    waiting_on TEXT,
    reason TEXT,
    detail TEXT
);

INSERT INTO moves(number, name, from_state, from_waiting, to_state, to_waiting) VALUES
    (1, 'route', 'requested', NULL, 'routed', NULL),
    (2, 'hold', 'requested', NULL, 'waiting', '|owner_approval|'),
    (3, 'refuse', 'requested', NULL, 'rejected', NULL),
    (4, 'approve', 'waiting', '|owner_approval|', 'routed', NULL),
    (5, 'deny', 'waiting', '|owner_approval|', 'rejected', NULL),
    (6, 'claim', 'routed', NULL, 'accepted', NULL),
    (7, 'start', 'accepted', NULL, 'working', NULL),
    (8, 'reopen_accepted', 'accepted', NULL, 'routed', NULL),
    (9, 'reopen_working', 'working', NULL, 'routed', NULL),
    (10, 'pause', 'working', NULL, 'waiting', '|human|agent|'),
    (11, 'resume', 'waiting', '|human|agent|', 'working', NULL),
    (12, 'submit', 'working', NULL, 'verifying', NULL),
    (13, 'pass', 'verifying', NULL, 'completed', NULL),
    (14, 'await_approval', 'verifying', NULL, 'approval', NULL),
    (15, 'bounce', 'verifying', NULL, 'routed', NULL),
    (16, 'complete', 'approval', NULL, 'completed', NULL),
    (17, 'decline', 'approval', NULL, 'routed', NULL),
    (18, 'cancel_requested', 'requested', NULL, 'cancelled', NULL),
    (19, 'cancel_waiting', 'waiting', NULL, 'cancelled', NULL),
    (20, 'cancel_routed', 'routed', NULL, 'cancelled', NULL),
    (21, 'cancel_accepted', 'accepted', NULL, 'cancelled', NULL),
    (22, 'cancel_working', 'working', NULL, 'cancelled', NULL);


CREATE TRIGGER task_insert BEFORE INSERT ON tasks
WHEN NEW.state IS NOT 'requested' OR NEW.waiting_on IS NOT NULL
    OR NEW.lease_id IS NOT NULL
BEGIN SELECT RAISE(ABORT, 'invalid_state:insert_not_requested'); END;

CREATE TRIGGER task_created AFTER INSERT ON tasks
BEGIN
    INSERT INTO journal(task, at, actor, from_state, to_state, waiting_on, reason, detail)
    VALUES (NEW.number, NEW.created_at, NEW.actor, NULL, NEW.state, NULL, NEW.reason,
            NEW.detail);
END;

CREATE TRIGGER task_update BEFORE UPDATE ON tasks
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

CREATE TRIGGER task_journal AFTER UPDATE OF state ON tasks
BEGIN
    INSERT INTO journal(task, at, actor, from_state, to_state, waiting_on, reason, detail)
    VALUES (NEW.number, NEW.updated_at, NEW.actor, OLD.state, NEW.state, NEW.waiting_on,
            NEW.reason, NEW.detail);
END;

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

-- A journal row tells the truth about its task: it ends in the task's state, and a
-- row that changes state is one of the moves (or the creation).
CREATE TRIGGER journal_insert BEFORE INSERT ON journal
WHEN NEW.task IS NOT NULL AND (
    NEW.to_state IS NOT (SELECT state FROM tasks WHERE number = NEW.task)
    OR (NEW.from_state IS NOT NEW.to_state
        AND NOT (NEW.from_state IS NULL AND NEW.to_state = 'requested')
        AND NOT EXISTS (SELECT 1 FROM moves m WHERE m.from_state = NEW.from_state
                                               AND m.to_state = NEW.to_state)))
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
CREATE TRIGGER journal_no_update BEFORE UPDATE ON journal
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
