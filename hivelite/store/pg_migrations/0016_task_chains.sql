-- Migration 16 on PostgreSQL (frozen once released): a chain per task, so that writers on
-- different tasks never wait for each other. From the row meta.tasks_chained_from names on,
-- each journal row links to the row before it of its own task (hivelite writes the link and
-- its MAC under the task's row lock; chain.py), and the rule that numbers a row gives it its
-- global link (the one before it, its seq, its hash), which heads witnessed outside the store
-- and the seal rows name. Journal and usage rows are numbered under the numbers lock, which
-- the numbering rule takes and holds to the commit: rows are numbered in commit order, with
-- no gap, as before. Each task row's chain becomes the hash of its newest journal row (an
-- event row left it behind before). SQLite's migration 16 changes nothing: one writer at a
-- time keeps its journal one chain. An event about a closed task moves its chain's head,
-- and nothing else of its row.
ALTER TABLE journal ADD COLUMN glink text;
CREATE OR REPLACE FUNCTION hl001_journal_number() RETURNS trigger LANGUAGE plpgsql SET search_path FROM CURRENT AS $$
BEGIN
    PERFORM pg_advisory_xact_lock(
        ('x' || left(encode(sha256(convert_to('hivelite-chain:' || TG_TABLE_SCHEMA, 'UTF8')), 'hex'), 16))::bit(64)::bigint);
    IF NEW.seq IS NULL THEN
        NEW.seq := (SELECT coalesce(max(seq), 0) + 1 FROM journal);
    END IF;
    NEW.glink := left(encode(sha256(convert_to(coalesce((SELECT coalesce(glink, hash)
        FROM journal WHERE seq = NEW.seq - 1), (SELECT value FROM meta
        WHERE key = 'store_id'), '') || '|' || NEW.seq || '|' || coalesce(NEW.hash, '~'),
        'UTF8')), 'hex'), 32);
    RETURN NEW;
END $$;
CREATE OR REPLACE FUNCTION hl002_updates_number() RETURNS trigger LANGUAGE plpgsql SET search_path FROM CURRENT AS $$
BEGIN
    PERFORM pg_advisory_xact_lock(
        ('x' || left(encode(sha256(convert_to('hivelite-chain:' || TG_TABLE_SCHEMA, 'UTF8')), 'hex'), 16))::bit(64)::bigint);
    IF NEW.seq IS NULL THEN
        NEW.seq := (SELECT coalesce(max(seq), 0) + 1 FROM updates);
    END IF;
    RETURN NEW;
END $$;
CREATE OR REPLACE FUNCTION hl094_task_update() RETURNS trigger LANGUAGE plpgsql SET search_path FROM CURRENT AS $$
BEGIN
    IF OLD.state IN ('cancelled', 'completed', 'rejected') AND NOT (NEW.chain IS DISTINCT FROM OLD.chain AND to_jsonb(NEW) - 'chain' = to_jsonb(OLD) - 'chain' AND NEW.chain IS NOT DISTINCT FROM (SELECT hash FROM journal WHERE task = NEW.number ORDER BY seq DESC LIMIT 1)) THEN
        RAISE EXCEPTION 'invalid_state:task_closed';
    ELSIF NEW.number IS DISTINCT FROM OLD.number OR NEW.id IS DISTINCT FROM OLD.id OR NEW.created_at IS DISTINCT FROM OLD.created_at OR NEW.requester IS DISTINCT FROM OLD.requester OR NEW.assignee IS DISTINCT FROM OLD.assignee OR NEW.project IS DISTINCT FROM OLD.project THEN
        RAISE EXCEPTION 'invalid_input:immutable_field';
    ELSIF (NEW.state = 'waiting') = (NEW.waiting_on IS NULL) OR (NEW.waiting_on IS NOT NULL AND NEW.waiting_on NOT IN ('agent', 'human', 'owner_approval')) THEN
        RAISE EXCEPTION 'invalid_state:waiting_on_mismatch';
    ELSIF NEW.lease_token < OLD.lease_token OR (NEW.lease_id IS NOT NULL AND NEW.lease_id IS DISTINCT FROM OLD.lease_id AND NEW.lease_token <= OLD.lease_token) THEN
        RAISE EXCEPTION 'invalid_state:fencing_token';
    ELSIF NEW.lease_id IS NOT NULL AND NEW.state NOT IN ('accepted', 'working') THEN
        RAISE EXCEPTION 'invalid_state:claim_outlives_state';
    ELSIF NEW.lease_id IS NULL AND NEW.state IN ('accepted', 'working') THEN
        RAISE EXCEPTION 'invalid_state:claim_missing';
    ELSIF NEW.state IS DISTINCT FROM OLD.state AND NEW.state IN ('approval', 'completed', 'verifying') AND NOT EXISTS (SELECT 1 FROM results WHERE task = NEW.number) THEN
        RAISE EXCEPTION 'invalid_state:result_missing';
    END IF;
    RETURN NEW;
END $$;
INSERT INTO meta(key, value) SELECT 'tasks_chained_from', (coalesce(max(seq), 0) + 1)::text FROM journal;
UPDATE tasks SET chain = h.hash FROM (SELECT DISTINCT ON (task) task, hash FROM journal
    WHERE task IS NOT NULL ORDER BY task, seq DESC) h
WHERE tasks.number = h.task AND tasks.chain IS DISTINCT FROM h.hash;
