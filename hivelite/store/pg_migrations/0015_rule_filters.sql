-- Migration 15 on PostgreSQL (frozen once released): the same rules, called only when they
-- can refuse. A trigger's WHEN is evaluated by the server itself, where a call of a rule's
-- PL/pgSQL function costs some tens of microseconds; so the rules most moves cannot break
-- (pg_schema.FILTERED) are filtered by their condition's leading test without a subquery
-- (pg_schema.guard: implied by the condition, so the rule is still called for every write
-- it would refuse, and its function, unchanged, still decides). Each trigger is made again
-- under its own name, so the rules fire in the same order. And the index of live leases is
-- made in the "C" collation the store compares lease times in (the oldest live lease, read
-- before every write, and the sweep's order), so the server can use it. SQLite's
-- migration 15 changes nothing.
DROP TRIGGER hl004_results_receipts_fixed ON results;
CREATE TRIGGER hl004_results_receipts_fixed BEFORE UPDATE OF receipts ON results FOR EACH ROW WHEN (NEW.receipts IS DISTINCT FROM OLD.receipts) EXECUTE FUNCTION hl004_results_receipts_fixed();
DROP TRIGGER hl005_results_receipts_shape ON results;
CREATE TRIGGER hl005_results_receipts_shape BEFORE INSERT ON results FOR EACH ROW WHEN (NEW.receipts IS NOT NULL) EXECUTE FUNCTION hl005_results_receipts_shape();
DROP TRIGGER hl006_results_draft_fixed ON results;
CREATE TRIGGER hl006_results_draft_fixed BEFORE UPDATE OF draft ON results FOR EACH ROW WHEN (NEW.draft IS DISTINCT FROM OLD.draft) EXECUTE FUNCTION hl006_results_draft_fixed();
DROP TRIGGER hl007_results_draft_reshaped ON results;
CREATE TRIGGER hl007_results_draft_reshaped BEFORE UPDATE OF draft, outcome ON results FOR EACH ROW WHEN (NEW.draft IS NOT NULL) EXECUTE FUNCTION hl007_results_draft_reshaped();
DROP TRIGGER hl008_results_draft_shape ON results;
CREATE TRIGGER hl008_results_draft_shape BEFORE INSERT ON results FOR EACH ROW WHEN (NEW.draft IS NOT NULL) EXECUTE FUNCTION hl008_results_draft_shape();
DROP TRIGGER hl009_task_decided_by ON tasks;
CREATE TRIGGER hl009_task_decided_by BEFORE UPDATE OF state ON tasks FOR EACH ROW WHEN (NEW.state IN ('cancelled', 'rejected', 'routed')) EXECUTE FUNCTION hl009_task_decided_by();
DROP TRIGGER hl010_task_holder_enrolled ON tasks;
CREATE TRIGGER hl010_task_holder_enrolled BEFORE UPDATE OF state ON tasks FOR EACH ROW WHEN (OLD.lease_id IS NOT NULL) EXECUTE FUNCTION hl010_task_holder_enrolled();
DROP TRIGGER hl011_task_lease_enrolled ON tasks;
CREATE TRIGGER hl011_task_lease_enrolled BEFORE UPDATE OF lease_id, lease_scope ON tasks FOR EACH ROW WHEN (NEW.lease_id IS NOT NULL) EXECUTE FUNCTION hl011_task_lease_enrolled();
DROP TRIGGER hl017_task_role_fixed ON tasks;
CREATE TRIGGER hl017_task_role_fixed BEFORE UPDATE OF role ON tasks FOR EACH ROW WHEN (NEW.role IS DISTINCT FROM OLD.role) EXECUTE FUNCTION hl017_task_role_fixed();
DROP TRIGGER hl034_task_lease_controlled ON tasks;
CREATE TRIGGER hl034_task_lease_controlled BEFORE UPDATE OF lease_id ON tasks FOR EACH ROW WHEN (NEW.lease_id IS NOT NULL) EXECUTE FUNCTION hl034_task_lease_controlled();
DROP TRIGGER hl046_task_claim_ready ON tasks;
CREATE TRIGGER hl046_task_claim_ready BEFORE UPDATE OF state ON tasks FOR EACH ROW WHEN (OLD.state = 'routed') EXECUTE FUNCTION hl046_task_claim_ready();
DROP TRIGGER hl047_task_attempt_failed ON tasks;
CREATE TRIGGER hl047_task_attempt_failed AFTER UPDATE OF state ON tasks FOR EACH ROW WHEN (OLD.state = 'verifying') EXECUTE FUNCTION hl047_task_attempt_failed();
DROP TRIGGER hl048_task_unblocks ON tasks;
CREATE TRIGGER hl048_task_unblocks AFTER UPDATE OF state ON tasks FOR EACH ROW WHEN (NEW.state = 'completed') EXECUTE FUNCTION hl048_task_unblocks();
DROP TRIGGER hl062_task_completion_decided ON tasks;
CREATE TRIGGER hl062_task_completion_decided BEFORE UPDATE OF state ON tasks FOR EACH ROW WHEN (NEW.state = 'completed') EXECUTE FUNCTION hl062_task_completion_decided();
DROP INDEX tasks_live_leases;
CREATE INDEX tasks_live_leases ON tasks((lease_expires COLLATE "C")) WHERE lease_id IS NOT NULL;
