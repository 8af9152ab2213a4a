-- Migration 15 on PostgreSQL (frozen once released): the same rules, called only when they
-- can refuse. A trigger's WHEN is evaluated by the server itself, where a call of a rule's
-- PL/pgSQL function costs some tens of microseconds; so every rule whose condition has a
-- part without a subquery is filtered by that part (pg_schema.guard: implied by the
-- condition, so the rule is still called for every write it would refuse, and its function,
-- unchanged, still decides). Each trigger is made again under its own name, so the rules
-- fire in the same order. And the index of live leases is made in the "C" collation the
-- store compares lease times in (the oldest live lease, read before every write, and the
-- order of the sweep), so the server can use it. SQLite's migration 15 changes nothing.
DROP TRIGGER hl004_results_receipts_fixed ON results;
CREATE TRIGGER hl004_results_receipts_fixed BEFORE UPDATE OF receipts ON results FOR EACH ROW WHEN ((NEW.receipts IS DISTINCT FROM OLD.receipts) AND ((NEW.version IS DISTINCT FROM OLD.version + 1) OR (NEW.receipts IS NOT NULL))) EXECUTE FUNCTION hl004_results_receipts_fixed();
DROP TRIGGER hl005_results_receipts_shape ON results;
CREATE TRIGGER hl005_results_receipts_shape BEFORE INSERT ON results FOR EACH ROW WHEN (NEW.receipts IS NOT NULL) EXECUTE FUNCTION hl005_results_receipts_shape();
DROP TRIGGER hl006_results_draft_fixed ON results;
CREATE TRIGGER hl006_results_draft_fixed BEFORE UPDATE OF draft ON results FOR EACH ROW WHEN (NEW.draft IS DISTINCT FROM OLD.draft) EXECUTE FUNCTION hl006_results_draft_fixed();
DROP TRIGGER hl007_results_draft_reshaped ON results;
CREATE TRIGGER hl007_results_draft_reshaped BEFORE UPDATE OF draft, outcome ON results FOR EACH ROW WHEN (NEW.draft IS NOT NULL) EXECUTE FUNCTION hl007_results_draft_reshaped();
DROP TRIGGER hl008_results_draft_shape ON results;
CREATE TRIGGER hl008_results_draft_shape BEFORE INSERT ON results FOR EACH ROW WHEN (NEW.draft IS NOT NULL) EXECUTE FUNCTION hl008_results_draft_shape();
DROP TRIGGER hl009_task_decided_by ON tasks;
CREATE TRIGGER hl009_task_decided_by BEFORE UPDATE OF state ON tasks FOR EACH ROW WHEN ((NEW.state IN ('cancelled', 'rejected', 'routed')) AND (((NEW.state = 'routed') AND (OLD.state IN ('waiting')) AND (OLD.waiting_on IN ('owner_approval'))) OR ((NEW.state = 'rejected') AND (OLD.state IN ('waiting')) AND (OLD.waiting_on IN ('owner_approval'))) OR ((NEW.state = 'routed') AND (OLD.state IN ('approval'))) OR ((NEW.state = 'cancelled') AND (OLD.state IN ('accepted', 'requested', 'routed', 'waiting', 'working'))))) EXECUTE FUNCTION hl009_task_decided_by();
DROP TRIGGER hl010_task_holder_enrolled ON tasks;
CREATE TRIGGER hl010_task_holder_enrolled BEFORE UPDATE OF state ON tasks FOR EACH ROW WHEN ((OLD.lease_id IS NOT NULL) AND (NEW.state IS DISTINCT FROM OLD.state) AND (NEW.state IN ('verifying', 'waiting', 'working'))) EXECUTE FUNCTION hl010_task_holder_enrolled();
DROP TRIGGER hl011_task_lease_enrolled ON tasks;
CREATE TRIGGER hl011_task_lease_enrolled BEFORE UPDATE OF lease_id, lease_scope ON tasks FOR EACH ROW WHEN ((NEW.lease_id IS NOT NULL) AND ((NEW.lease_id IS DISTINCT FROM OLD.lease_id) OR (NEW.lease_scope IS DISTINCT FROM OLD.lease_scope))) EXECUTE FUNCTION hl011_task_lease_enrolled();
DROP TRIGGER hl017_task_role_fixed ON tasks;
CREATE TRIGGER hl017_task_role_fixed BEFORE UPDATE OF role ON tasks FOR EACH ROW WHEN (NEW.role IS DISTINCT FROM OLD.role) EXECUTE FUNCTION hl017_task_role_fixed();
DROP TRIGGER hl018_task_role ON tasks;
CREATE TRIGGER hl018_task_role BEFORE INSERT ON tasks FOR EACH ROW WHEN ((NEW.role IS NOT NULL) AND (NEW.role !~ '^[a-z][a-z0-9-]{0,63}$')) EXECUTE FUNCTION hl018_task_role();
DROP TRIGGER hl019_controls_lifted_by_owner ON controls;
CREATE TRIGGER hl019_controls_lifted_by_owner BEFORE UPDATE OF lifted_by ON controls FOR EACH ROW WHEN ((NEW.lifted_by IS NOT NULL) AND (NEW.lifted_by IS DISTINCT FROM OLD.lifted_by)) EXECUTE FUNCTION hl019_controls_lifted_by_owner();
DROP TRIGGER hl025_updates_bounded ON updates;
CREATE TRIGGER hl025_updates_bounded BEFORE INSERT ON updates FOR EACH ROW WHEN (((NEW.tokens IS NOT NULL) AND ((NEW.tokens < 0) OR (NEW.tokens > 1000000000000))) OR ((NEW.usd_micros IS NOT NULL) AND ((NEW.usd_micros < 0) OR (NEW.usd_micros > 1000000000000)))) EXECUTE FUNCTION hl025_updates_bounded();
DROP TRIGGER hl029_tokens_revoked_once ON tokens;
CREATE TRIGGER hl029_tokens_revoked_once BEFORE UPDATE ON tokens FOR EACH ROW WHEN ((OLD.revoked_at IS NOT NULL) OR (NEW.revoked_at IS NULL) OR (NEW.id IS DISTINCT FROM OLD.id) OR (NEW.agent IS DISTINCT FROM OLD.agent) OR (NEW.instance IS DISTINCT FROM OLD.instance) OR (NEW.rights IS DISTINCT FROM OLD.rights) OR (NEW.hash IS DISTINCT FROM OLD.hash) OR (NEW.created_at IS DISTINCT FROM OLD.created_at) OR (NEW.expires_at IS DISTINCT FROM OLD.expires_at) OR (NEW."by" IS DISTINCT FROM OLD."by")) EXECUTE FUNCTION hl029_tokens_revoked_once();
DROP TRIGGER hl031_tokens_shape ON tokens;
CREATE TRIGGER hl031_tokens_shape BEFORE INSERT ON tokens FOR EACH ROW WHEN ((NEW.revoked_at IS NOT NULL) OR (length(NEW.hash) <> 64) OR (NEW.hash ~ '[^0-9a-f]') OR (NOT ((NEW.agent IS NULL AND NEW.instance IS NULL AND NEW.rights = 'owner') OR (NEW.agent IS NOT NULL AND NEW.instance IS NOT NULL AND NEW.rights <> '' AND NEW.instance = lower(rtrim(btrim(NEW.instance, ' '), '.')) AND string_to_array(NEW.rights, ',') <@ ARRAY['tasks.read', 'tasks.propose', 'tasks.work']::text[])))) EXECUTE FUNCTION hl031_tokens_shape();
DROP TRIGGER hl032_confirmations_why ON confirmations;
CREATE TRIGGER hl032_confirmations_why BEFORE INSERT ON confirmations FOR EACH ROW WHEN (((NEW.counted <> 0) AND (NEW.why IS NOT NULL)) OR ((NEW.counted = 0) AND (NEW.why IS NULL))) EXECUTE FUNCTION hl032_confirmations_why();
DROP TRIGGER hl034_task_lease_controlled ON tasks;
CREATE TRIGGER hl034_task_lease_controlled BEFORE UPDATE OF lease_id ON tasks FOR EACH ROW WHEN ((NEW.lease_id IS NOT NULL) AND (NEW.lease_id IS DISTINCT FROM OLD.lease_id)) EXECUTE FUNCTION hl034_task_lease_controlled();
DROP TRIGGER hl036_budgets_values ON budgets;
CREATE TRIGGER hl036_budgets_values BEFORE INSERT ON budgets FOR EACH ROW WHEN ((NEW.tasks < 0) OR (NEW.tokens < 0) OR (NEW.usd_micros < 0)) EXECUTE FUNCTION hl036_budgets_values();
DROP TRIGGER hl038_controls_lifted_once ON controls;
CREATE TRIGGER hl038_controls_lifted_once BEFORE UPDATE ON controls FOR EACH ROW WHEN ((OLD.lifted_at IS NOT NULL) OR (NEW.lifted_at IS NULL) OR (NEW.lifted_by IS NULL) OR (NEW.id IS DISTINCT FROM OLD.id) OR (NEW.kind IS DISTINCT FROM OLD.kind) OR (NEW.agent IS DISTINCT FROM OLD.agent) OR (NEW.instance IS DISTINCT FROM OLD.instance) OR (NEW.task IS DISTINCT FROM OLD.task) OR (NEW.at IS DISTINCT FROM OLD.at) OR (NEW."by" IS DISTINCT FROM OLD."by") OR (NEW.reason IS DISTINCT FROM OLD.reason)) EXECUTE FUNCTION hl038_controls_lifted_once();
DROP TRIGGER hl040_controls_scope ON controls;
CREATE TRIGGER hl040_controls_scope BEFORE INSERT ON controls FOR EACH ROW WHEN ((NEW.lifted_at IS NOT NULL) OR (NEW.lifted_by IS NOT NULL) OR (NEW.instance IS DISTINCT FROM lower(rtrim(btrim(NEW.instance, ' '), '.'))) OR (NOT ((NEW.kind = 'hold' AND NEW.task IS NULL AND (NEW.agent IS NULL) <> (NEW.instance IS NULL)) OR (NEW.kind = 'veto' AND NEW.task IS NOT NULL AND NEW.agent IS NOT NULL AND NEW.instance IS NULL) OR (NEW.kind = 'stop' AND NEW.task IS NULL AND (NEW.agent IS NULL OR NEW.instance IS NULL))))) EXECUTE FUNCTION hl040_controls_scope();
DROP TRIGGER hl044_policy_values ON policy;
CREATE TRIGGER hl044_policy_values BEFORE INSERT ON policy FOR EACH ROW WHEN (NOT ((NEW.key = 'mode' AND NEW.value IN ('personal', 'team')) OR (NEW.key = 'proposals' AND NEW.value IN ('gate', 'owner')) OR (NEW.key = 'timezone' AND length(NEW.value) BETWEEN 1 AND 64) OR ((NEW.key = 'threshold' OR (NEW.key ~ '^threshold:.' AND length(NEW.key) <= 80)) AND NEW.value ~ '^[0-9]{1,4}$' AND NEW.value::integer <= 1000))) EXECUTE FUNCTION hl044_policy_values();
DROP TRIGGER hl045_task_fields ON tasks;
CREATE TRIGGER hl045_task_fields BEFORE UPDATE OF priority, labels, fields_version, attempts, attempt_limit ON tasks FOR EACH ROW WHEN ((OLD.state NOT IN ('cancelled', 'completed', 'rejected')) AND ((NEW.priority NOT IN ('high', 'low', 'normal', 'urgent')) OR (((NEW.priority IS DISTINCT FROM OLD.priority) OR (NEW.labels IS DISTINCT FROM OLD.labels) OR (NEW.attempt_limit IS DISTINCT FROM OLD.attempt_limit) OR (NEW.fields_version IS DISTINCT FROM OLD.fields_version)) AND (NEW.fields_version IS DISTINCT FROM OLD.fields_version + 1)) OR (NEW.attempts < OLD.attempts))) EXECUTE FUNCTION hl045_task_fields();
DROP TRIGGER hl046_task_claim_ready ON tasks;
CREATE TRIGGER hl046_task_claim_ready BEFORE UPDATE OF state ON tasks FOR EACH ROW WHEN (((OLD.state = 'routed') AND (NEW.state = 'accepted')) OR ((OLD.state = 'routed') AND (NEW.state = 'accepted') AND (NEW.attempts >= NEW.attempt_limit))) EXECUTE FUNCTION hl046_task_claim_ready();
DROP TRIGGER hl047_task_attempt_failed ON tasks;
CREATE TRIGGER hl047_task_attempt_failed AFTER UPDATE OF state ON tasks FOR EACH ROW WHEN ((OLD.state = 'verifying') AND (NEW.state = 'routed')) EXECUTE FUNCTION hl047_task_attempt_failed();
DROP TRIGGER hl048_task_unblocks ON tasks;
CREATE TRIGGER hl048_task_unblocks AFTER UPDATE OF state ON tasks FOR EACH ROW WHEN (NEW.state = 'completed') EXECUTE FUNCTION hl048_task_unblocks();
DROP TRIGGER hl056_meta_identity_fixed ON meta;
CREATE TRIGGER hl056_meta_identity_fixed BEFORE UPDATE ON meta FOR EACH ROW WHEN (OLD.key = 'store_id') EXECUTE FUNCTION hl056_meta_identity_fixed();
DROP TRIGGER hl057_checkpoints_fixed ON checkpoints;
CREATE TRIGGER hl057_checkpoints_fixed BEFORE UPDATE ON checkpoints FOR EACH ROW WHEN (NEW.task IS DISTINCT FROM OLD.task) EXECUTE FUNCTION hl057_checkpoints_fixed();
DROP TRIGGER hl058_results_fixed ON results;
CREATE TRIGGER hl058_results_fixed BEFORE UPDATE ON results FOR EACH ROW WHEN ((NEW.task IS DISTINCT FROM OLD.task) OR ((NEW.worker IS DISTINCT FROM OLD.worker) OR (NEW.instance IS DISTINCT FROM OLD.instance) OR (NEW.session IS DISTINCT FROM OLD.session) OR (NEW.outcome IS DISTINCT FROM OLD.outcome) OR (NEW.threshold IS DISTINCT FROM OLD.threshold)) OR ((NEW.merge_commit IS NOT NULL) AND (NEW.merge_commit IS DISTINCT FROM OLD.merge_commit))) EXECUTE FUNCTION hl058_results_fixed();
DROP TRIGGER hl060_task_lease_length ON tasks;
CREATE TRIGGER hl060_task_lease_length BEFORE UPDATE OF lease_expires ON tasks FOR EACH ROW WHEN ((OLD.state NOT IN ('cancelled', 'completed', 'rejected')) AND (NEW.lease_expires IS NOT NULL)) EXECUTE FUNCTION hl060_task_lease_length();
DROP TRIGGER hl061_task_lease_taken ON tasks;
CREATE TRIGGER hl061_task_lease_taken BEFORE UPDATE OF lease_id, lease_token, lease_holder, lease_instance, lease_session, lease_expires ON tasks FOR EACH ROW WHEN ((OLD.state NOT IN ('cancelled', 'completed', 'rejected')) AND (NEW.state IN ('accepted', 'working')) AND (NEW.lease_id IS NOT NULL) AND (NEW.lease_token > OLD.lease_token - (CASE WHEN NEW.lease_id IS NOT DISTINCT FROM OLD.lease_id THEN 1 ELSE 0 END)) AND ((NEW.lease_id IS DISTINCT FROM OLD.lease_id) OR (NEW.lease_token IS DISTINCT FROM OLD.lease_token) OR (NEW.lease_holder IS DISTINCT FROM OLD.lease_holder) OR (NEW.lease_instance IS DISTINCT FROM OLD.lease_instance) OR (NEW.lease_session IS DISTINCT FROM OLD.lease_session)) AND (NOT (((OLD.state = 'routed' AND NEW.state = 'accepted') OR (OLD.state = 'waiting' AND NEW.state = 'working')) AND OLD.lease_id IS NULL AND NEW.lease_holder IS NOT DISTINCT FROM NEW.assignee AND NEW.lease_instance IS NOT NULL AND NEW.lease_token = OLD.lease_token + 1))) EXECUTE FUNCTION hl061_task_lease_taken();
DROP TRIGGER hl062_task_completion_decided ON tasks;
CREATE TRIGGER hl062_task_completion_decided BEFORE UPDATE OF state ON tasks FOR EACH ROW WHEN ((NEW.state = 'completed') AND (OLD.state IN ('approval', 'verifying'))) EXECUTE FUNCTION hl062_task_completion_decided();
DROP TRIGGER hl064_meta_owner_fixed ON meta;
CREATE TRIGGER hl064_meta_owner_fixed BEFORE UPDATE ON meta FOR EACH ROW WHEN ((OLD.key = 'owner') OR (NEW.key IS DISTINCT FROM OLD.key)) EXECUTE FUNCTION hl064_meta_owner_fixed();
DROP TRIGGER hl092_results_update ON results;
CREATE TRIGGER hl092_results_update BEFORE UPDATE ON results FOR EACH ROW WHEN ((NOT (OLD.merge_commit IS NULL AND NEW.merge_commit IS NOT NULL AND NEW.task IS NOT DISTINCT FROM OLD.task AND NEW.body IS NOT DISTINCT FROM OLD.body AND NEW.version IS NOT DISTINCT FROM OLD.version AND NEW.worker IS NOT DISTINCT FROM OLD.worker AND NEW.instance IS NOT DISTINCT FROM OLD.instance AND NEW.session IS NOT DISTINCT FROM OLD.session AND NEW.outcome IS NOT DISTINCT FROM OLD.outcome AND NEW.threshold IS NOT DISTINCT FROM OLD.threshold)) OR ((NEW.body IS DISTINCT FROM OLD.body) AND (NEW.version <= OLD.version))) EXECUTE FUNCTION hl092_results_update();
DROP TRIGGER hl093_task_move ON tasks;
CREATE TRIGGER hl093_task_move BEFORE UPDATE OF state, waiting_on ON tasks FOR EACH ROW WHEN ((OLD.state NOT IN ('cancelled', 'completed', 'rejected')) AND ((NEW.state = 'waiting') = (NEW.waiting_on IS NOT NULL)) AND ((NEW.waiting_on IS NULL) OR (NEW.waiting_on IN ('agent', 'human', 'owner_approval')))) EXECUTE FUNCTION hl093_task_move();
DROP TRIGGER hl094_task_update ON tasks;
CREATE TRIGGER hl094_task_update BEFORE UPDATE ON tasks FOR EACH ROW WHEN ((OLD.state IN ('cancelled', 'completed', 'rejected')) OR ((NEW.number IS DISTINCT FROM OLD.number) OR (NEW.id IS DISTINCT FROM OLD.id) OR (NEW.created_at IS DISTINCT FROM OLD.created_at) OR (NEW.requester IS DISTINCT FROM OLD.requester) OR (NEW.assignee IS DISTINCT FROM OLD.assignee) OR (NEW.project IS DISTINCT FROM OLD.project)) OR (((NEW.state = 'waiting') = (NEW.waiting_on IS NULL)) OR ((NEW.waiting_on IS NOT NULL) AND (NEW.waiting_on NOT IN ('agent', 'human', 'owner_approval')))) OR ((NEW.lease_token < OLD.lease_token) OR ((NEW.lease_id IS NOT NULL) AND (NEW.lease_id IS DISTINCT FROM OLD.lease_id) AND (NEW.lease_token <= OLD.lease_token))) OR ((NEW.lease_id IS NOT NULL) AND (NEW.state NOT IN ('accepted', 'working'))) OR ((NEW.lease_id IS NULL) AND (NEW.state IN ('accepted', 'working'))) OR ((NEW.state IS DISTINCT FROM OLD.state) AND (NEW.state IN ('approval', 'completed', 'verifying')))) EXECUTE FUNCTION hl094_task_update();
DROP TRIGGER hl095_task_insert ON tasks;
CREATE TRIGGER hl095_task_insert BEFORE INSERT ON tasks FOR EACH ROW WHEN ((NEW.state IS DISTINCT FROM 'requested') OR (NEW.waiting_on IS NOT NULL) OR (NEW.lease_id IS NOT NULL)) EXECUTE FUNCTION hl095_task_insert();
DROP INDEX tasks_live_leases;
CREATE INDEX tasks_live_leases ON tasks((lease_expires COLLATE "C")) WHERE lease_id IS NOT NULL;
