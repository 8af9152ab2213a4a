-- Migration 5: the work queue (frozen: never edit). A task's dependencies as rows, the
-- count of those still open, its failed attempts and their limit; one partial index of
-- the ready tasks by assignee, priority rank and age, which `next` reads.
ALTER TABLE tasks ADD COLUMN waits INTEGER NOT NULL DEFAULT 0;
ALTER TABLE tasks ADD COLUMN attempts INTEGER NOT NULL DEFAULT 0;
ALTER TABLE tasks ADD COLUMN attempt_limit INTEGER NOT NULL DEFAULT 3;

CREATE TABLE deps(
    task INTEGER NOT NULL REFERENCES tasks(number),
    on_task INTEGER NOT NULL REFERENCES tasks(number),
    PRIMARY KEY (task, on_task)
) WITHOUT ROWID;
CREATE INDEX deps_by_dependency ON deps(on_task);

INSERT INTO deps(task, on_task)
SELECT DISTINCT p.task, t.number FROM packets p,
    json_each(CASE WHEN json_valid(p.body) THEN p.body END, '$.depends_on') d
    JOIN tasks t ON t.id = d.value;
UPDATE tasks SET waits = (
    SELECT count(*) FROM deps d JOIN tasks o ON o.number = d.on_task
    WHERE d.task = tasks.number AND o.state IS NOT 'completed')
WHERE state NOT IN ('cancelled', 'completed', 'rejected')
  AND EXISTS (SELECT 1 FROM deps d WHERE d.task = tasks.number);
UPDATE tasks SET attempts = (
    SELECT count(*) FROM journal j WHERE j.task = tasks.number
      AND j.from_state = 'verifying' AND j.to_state = 'routed'
      AND json_extract(CASE WHEN json_valid(j.detail) THEN j.detail END, '$.outcome') = 'failed')
WHERE state NOT IN ('cancelled', 'completed', 'rejected');
UPDATE tasks SET attempt_limit = max(attempts + 1, 3)
WHERE state = 'routed' AND attempts >= 3;

CREATE INDEX tasks_queue ON tasks(assignee,
    CASE priority WHEN 'urgent' THEN 0 WHEN 'high' THEN 1 WHEN 'normal' THEN 2 ELSE 3 END,
    number)
WHERE state = 'routed' AND waits = 0 AND attempts < attempt_limit;

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

-- A completed task is one open dependency fewer for each task that waits on it.
CREATE TRIGGER task_unblocks AFTER UPDATE OF state ON tasks
WHEN NEW.state = 'completed'
BEGIN
    UPDATE tasks SET waits = waits - 1
    WHERE number IN (SELECT task FROM deps WHERE on_task = NEW.number)
      AND state NOT IN ('cancelled', 'completed', 'rejected');
END;

-- A failed outcome sent back to routed is one attempt more.
CREATE TRIGGER task_attempt_failed AFTER UPDATE OF state ON tasks
WHEN OLD.state = 'verifying' AND NEW.state = 'routed'
    AND json_extract(NEW.detail, '$.outcome') = 'failed'
BEGIN
    UPDATE tasks SET attempts = attempts + 1 WHERE number = NEW.number;
END;

-- A claim takes only a ready task: every dependency completed, attempts left.
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

-- Priority and labels change only with the next fields version; attempts only grow; a
-- priority is one of the four.
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
