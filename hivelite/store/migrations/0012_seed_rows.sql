-- Migration 12: the seeds' remaining rows (frozen: never edit). A task's role; each
-- agent's enrolment (seed 004's opt-in: the projects, roles and write rights it covers),
-- written by the owner right after its journal row; a lease only within its holder's
-- enrolment and role, holder moves only under the enrolment the claim was taken under; in
-- team mode a guest's own request withdrawn by an agent of the guest's owner; a result's
-- draft (its knowledge change), set only by the holder's submission; and its evidence's
-- receipts as hivelite checked them, written only with a new version of the result.

DROP TRIGGER task_decided_by;

ALTER TABLE tasks ADD COLUMN role TEXT;
ALTER TABLE tasks ADD COLUMN lease_scope INTEGER;

CREATE TABLE enrolments(
    agent TEXT PRIMARY KEY,
    projects TEXT NOT NULL,
    roles TEXT NOT NULL,
    rights TEXT NOT NULL,
    active INTEGER NOT NULL,
    seq INTEGER NOT NULL,
    at TEXT NOT NULL,
    by TEXT NOT NULL
) WITHOUT ROWID;

-- A role is seed 004's slug, and a task keeps the role it was handed off with.
CREATE TRIGGER task_role BEFORE INSERT ON tasks
WHEN NEW.role IS NOT NULL AND NOT (NEW.role GLOB '[a-z]*' AND NEW.role NOT GLOB '*[^a-z0-9-]*' AND length(NEW.role) <= 64)
BEGIN SELECT RAISE(ABORT, 'invalid_input:invalid_role'); END;

CREATE TRIGGER task_role_fixed BEFORE UPDATE OF role ON tasks
WHEN NEW.role IS NOT OLD.role
BEGIN SELECT RAISE(ABORT, 'invalid_input:immutable_field'); END;

-- An enrolment is the owner's, written whole (its projects and roles JSON arrays of slugs,
-- [] for every project; some of the write rights), right after the journal row that
-- records exactly it; it is replaced, never edited, and only after a newer such row.
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

-- A lease is taken within its holder's enrolment, which it names (lease_scope: the seq of
-- the enrolment's journal row; NULL for an agent with none), and a task with a role only
-- by an agent enrolled in that role.
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

-- The holder works on under the enrolment its claim was taken under: after a change of
-- it, the holder's next move is refused (it may still give the task back).
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

-- The owner's decisions are the owner's: approve, deny and cancel are made by the store's
-- owner; a decline by the owner, or by a verifier whose counted rejection of the current
-- result it is; in team mode, a guest's own request is also withdrawn by an agent of the
-- guest's owner (the requester's).
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

ALTER TABLE results ADD COLUMN draft TEXT;
ALTER TABLE results ADD COLUMN receipts TEXT;

-- A draft is an object with its kind and its content, and only with a completed outcome.
CREATE TRIGGER results_draft_shape BEFORE INSERT ON results
WHEN NEW.draft IS NOT NULL AND (NOT json_valid(NEW.draft) OR json_type(NEW.draft) IS NOT 'object' OR coalesce(json_extract(NEW.draft, '$.kind'), '') NOT IN ('decision', 'document', 'patch') OR json_type(NEW.draft, '$.content') IS NOT 'text' OR NEW.outcome IS NOT 'completed')
BEGIN SELECT RAISE(ABORT, 'invalid_input:invalid_draft'); END;

CREATE TRIGGER results_draft_reshaped BEFORE UPDATE OF draft, outcome ON results
WHEN NEW.draft IS NOT NULL AND (NOT json_valid(NEW.draft) OR json_type(NEW.draft) IS NOT 'object' OR coalesce(json_extract(NEW.draft, '$.kind'), '') NOT IN ('decision', 'document', 'patch') OR json_type(NEW.draft, '$.content') IS NOT 'text' OR NEW.outcome IS NOT 'completed')
BEGIN SELECT RAISE(ABORT, 'invalid_input:invalid_draft'); END;

-- It changes only with a new submission by the task's holder.
CREATE TRIGGER results_draft_fixed BEFORE UPDATE OF draft ON results
WHEN NEW.draft IS NOT OLD.draft AND NOT (NEW.version IS OLD.version + 1 AND EXISTS (SELECT 1 FROM tasks WHERE number = NEW.task AND state IN ('accepted', 'working') AND lease_holder IS NEW.worker AND lease_instance IS NEW.instance))
BEGIN SELECT RAISE(ABORT, 'forbidden_right:draft_fixed'); END;

-- Receipts are a JSON array of nulls and objects, written with a new version alone.
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
