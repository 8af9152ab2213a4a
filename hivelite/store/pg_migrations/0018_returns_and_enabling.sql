-- Migration 18 on PostgreSQL (frozen once released), as SQLite's: every result that comes
-- back counts an attempt (schema.ATTEMPT_COUNTED), the counts of tasks made before it
-- (RETURNS_BACKFILL), the plugins an owner enabled kept in the policy
-- (schema.policy_values_sql), and the notice owed to a store made before (PLUGINS_NOTICE).
-- SQLite makes two triggers again, so they now run first of the rules; the rules here are
-- renamed to keep SQLite's order (by way of hlx names: no two at once).
ALTER TRIGGER hl004_results_receipts_fixed ON results RENAME TO hlx004_results_receipts_fixed;
ALTER FUNCTION hl004_results_receipts_fixed() RENAME TO hlx004_results_receipts_fixed;
ALTER TRIGGER hl005_results_receipts_shape ON results RENAME TO hlx005_results_receipts_shape;
ALTER FUNCTION hl005_results_receipts_shape() RENAME TO hlx005_results_receipts_shape;
ALTER TRIGGER hl006_results_draft_fixed ON results RENAME TO hlx006_results_draft_fixed;
ALTER FUNCTION hl006_results_draft_fixed() RENAME TO hlx006_results_draft_fixed;
ALTER TRIGGER hl007_results_draft_reshaped ON results RENAME TO hlx007_results_draft_reshaped;
ALTER FUNCTION hl007_results_draft_reshaped() RENAME TO hlx007_results_draft_reshaped;
ALTER TRIGGER hl008_results_draft_shape ON results RENAME TO hlx008_results_draft_shape;
ALTER FUNCTION hl008_results_draft_shape() RENAME TO hlx008_results_draft_shape;
ALTER TRIGGER hl009_task_decided_by ON tasks RENAME TO hlx009_task_decided_by;
ALTER FUNCTION hl009_task_decided_by() RENAME TO hlx009_task_decided_by;
ALTER TRIGGER hl010_task_holder_enrolled ON tasks RENAME TO hlx010_task_holder_enrolled;
ALTER FUNCTION hl010_task_holder_enrolled() RENAME TO hlx010_task_holder_enrolled;
ALTER TRIGGER hl011_task_lease_enrolled ON tasks RENAME TO hlx011_task_lease_enrolled;
ALTER FUNCTION hl011_task_lease_enrolled() RENAME TO hlx011_task_lease_enrolled;
ALTER TRIGGER hl012_enrolments_replaced ON enrolments RENAME TO hlx012_enrolments_replaced;
ALTER FUNCTION hl012_enrolments_replaced() RENAME TO hlx012_enrolments_replaced;
ALTER TRIGGER hl013_enrolments_no_update ON enrolments RENAME TO hlx013_enrolments_no_update;
ALTER FUNCTION hl013_enrolments_no_update() RENAME TO hlx013_enrolments_no_update;
ALTER TRIGGER hl014_enrolments_journaled ON enrolments RENAME TO hlx014_enrolments_journaled;
ALTER FUNCTION hl014_enrolments_journaled() RENAME TO hlx014_enrolments_journaled;
ALTER TRIGGER hl015_enrolments_shape ON enrolments RENAME TO hlx015_enrolments_shape;
ALTER FUNCTION hl015_enrolments_shape() RENAME TO hlx015_enrolments_shape;
ALTER TRIGGER hl016_enrolments_by_owner ON enrolments RENAME TO hlx016_enrolments_by_owner;
ALTER FUNCTION hl016_enrolments_by_owner() RENAME TO hlx016_enrolments_by_owner;
ALTER TRIGGER hl017_task_role_fixed ON tasks RENAME TO hlx017_task_role_fixed;
ALTER FUNCTION hl017_task_role_fixed() RENAME TO hlx017_task_role_fixed;
ALTER TRIGGER hl018_task_role ON tasks RENAME TO hlx018_task_role;
ALTER FUNCTION hl018_task_role() RENAME TO hlx018_task_role;
ALTER TRIGGER hl019_controls_lifted_by_owner ON controls RENAME TO hlx019_controls_lifted_by_owner;
ALTER FUNCTION hl019_controls_lifted_by_owner() RENAME TO hlx019_controls_lifted_by_owner;
ALTER TRIGGER hl020_tokens_by_owner ON tokens RENAME TO hlx020_tokens_by_owner;
ALTER FUNCTION hl020_tokens_by_owner() RENAME TO hlx020_tokens_by_owner;
ALTER TRIGGER hl021_budgets_by_owner ON budgets RENAME TO hlx021_budgets_by_owner;
ALTER FUNCTION hl021_budgets_by_owner() RENAME TO hlx021_budgets_by_owner;
ALTER TRIGGER hl022_required_plugins_by_owner ON required_plugins RENAME TO hlx022_required_plugins_by_owner;
ALTER FUNCTION hl022_required_plugins_by_owner() RENAME TO hlx022_required_plugins_by_owner;
ALTER TRIGGER hl023_policy_by_owner ON policy RENAME TO hlx023_policy_by_owner;
ALTER FUNCTION hl023_policy_by_owner() RENAME TO hlx023_policy_by_owner;
ALTER TRIGGER hl024_controls_by_owner ON controls RENAME TO hlx024_controls_by_owner;
ALTER FUNCTION hl024_controls_by_owner() RENAME TO hlx024_controls_by_owner;
ALTER TRIGGER hl025_updates_bounded ON updates RENAME TO hlx025_updates_bounded;
ALTER FUNCTION hl025_updates_bounded() RENAME TO hlx025_updates_bounded;
ALTER TRIGGER hl026_results_merged ON results RENAME TO hlx026_results_merged;
ALTER FUNCTION hl026_results_merged() RENAME TO hlx026_results_merged;
ALTER TRIGGER hl027_results_amended ON results RENAME TO hlx027_results_amended;
ALTER FUNCTION hl027_results_amended() RENAME TO hlx027_results_amended;
ALTER TRIGGER hl028_tokens_kept ON tokens RENAME TO hlx028_tokens_kept;
ALTER FUNCTION hl028_tokens_kept() RENAME TO hlx028_tokens_kept;
ALTER TRIGGER hl029_tokens_revoked_once ON tokens RENAME TO hlx029_tokens_revoked_once;
ALTER FUNCTION hl029_tokens_revoked_once() RENAME TO hlx029_tokens_revoked_once;
ALTER TRIGGER hl030_tokens_keys_kept ON tokens RENAME TO hlx030_tokens_keys_kept;
ALTER FUNCTION hl030_tokens_keys_kept() RENAME TO hlx030_tokens_keys_kept;
ALTER TRIGGER hl031_tokens_shape ON tokens RENAME TO hlx031_tokens_shape;
ALTER FUNCTION hl031_tokens_shape() RENAME TO hlx031_tokens_shape;
ALTER TRIGGER hl032_confirmations_why ON confirmations RENAME TO hlx032_confirmations_why;
ALTER FUNCTION hl032_confirmations_why() RENAME TO hlx032_confirmations_why;
ALTER TRIGGER hl033_confirmations_counted ON confirmations RENAME TO hlx033_confirmations_counted;
ALTER FUNCTION hl033_confirmations_counted() RENAME TO hlx033_confirmations_counted;
ALTER TRIGGER hl034_task_lease_controlled ON tasks RENAME TO hlx034_task_lease_controlled;
ALTER FUNCTION hl034_task_lease_controlled() RENAME TO hlx034_task_lease_controlled;
ALTER TRIGGER hl035_budgets_no_update ON budgets RENAME TO hlx035_budgets_no_update;
ALTER FUNCTION hl035_budgets_no_update() RENAME TO hlx035_budgets_no_update;
ALTER TRIGGER hl036_budgets_values ON budgets RENAME TO hlx036_budgets_values;
ALTER FUNCTION hl036_budgets_values() RENAME TO hlx036_budgets_values;
ALTER TRIGGER hl037_controls_kept ON controls RENAME TO hlx037_controls_kept;
ALTER FUNCTION hl037_controls_kept() RENAME TO hlx037_controls_kept;
ALTER TRIGGER hl038_controls_lifted_once ON controls RENAME TO hlx038_controls_lifted_once;
ALTER FUNCTION hl038_controls_lifted_once() RENAME TO hlx038_controls_lifted_once;
ALTER TRIGGER hl039_controls_keys_kept ON controls RENAME TO hlx039_controls_keys_kept;
ALTER FUNCTION hl039_controls_keys_kept() RENAME TO hlx039_controls_keys_kept;
ALTER TRIGGER hl040_controls_scope ON controls RENAME TO hlx040_controls_scope;
ALTER FUNCTION hl040_controls_scope() RENAME TO hlx040_controls_scope;
ALTER TRIGGER hl041_required_plugins_kind ON required_plugins RENAME TO hlx041_required_plugins_kind;
ALTER FUNCTION hl041_required_plugins_kind() RENAME TO hlx041_required_plugins_kind;
ALTER TRIGGER hl042_required_plugins_no_update ON required_plugins RENAME TO hlx042_required_plugins_no_update;
ALTER FUNCTION hl042_required_plugins_no_update() RENAME TO hlx042_required_plugins_no_update;
ALTER TRIGGER hl043_policy_no_update ON policy RENAME TO hlx043_policy_no_update;
ALTER FUNCTION hl043_policy_no_update() RENAME TO hlx043_policy_no_update;
ALTER TRIGGER hl044_policy_values ON policy RENAME TO hlx044_policy_values;
ALTER FUNCTION hl044_policy_values() RENAME TO hlx044_policy_values;
ALTER TRIGGER hl045_task_fields ON tasks RENAME TO hlx045_task_fields;
ALTER FUNCTION hl045_task_fields() RENAME TO hlx045_task_fields;
ALTER TRIGGER hl046_task_claim_ready ON tasks RENAME TO hlx046_task_claim_ready;
ALTER FUNCTION hl046_task_claim_ready() RENAME TO hlx046_task_claim_ready;
ALTER TRIGGER hl047_task_attempt_failed ON tasks RENAME TO hlx047_task_attempt_failed;
ALTER FUNCTION hl047_task_attempt_failed() RENAME TO hlx047_task_attempt_failed;
ALTER TRIGGER hlx004_results_receipts_fixed ON results RENAME TO hl006_results_receipts_fixed;
ALTER FUNCTION hlx004_results_receipts_fixed() RENAME TO hl006_results_receipts_fixed;
ALTER TRIGGER hlx005_results_receipts_shape ON results RENAME TO hl007_results_receipts_shape;
ALTER FUNCTION hlx005_results_receipts_shape() RENAME TO hl007_results_receipts_shape;
ALTER TRIGGER hlx006_results_draft_fixed ON results RENAME TO hl008_results_draft_fixed;
ALTER FUNCTION hlx006_results_draft_fixed() RENAME TO hl008_results_draft_fixed;
ALTER TRIGGER hlx007_results_draft_reshaped ON results RENAME TO hl009_results_draft_reshaped;
ALTER FUNCTION hlx007_results_draft_reshaped() RENAME TO hl009_results_draft_reshaped;
ALTER TRIGGER hlx008_results_draft_shape ON results RENAME TO hl010_results_draft_shape;
ALTER FUNCTION hlx008_results_draft_shape() RENAME TO hl010_results_draft_shape;
ALTER TRIGGER hlx009_task_decided_by ON tasks RENAME TO hl011_task_decided_by;
ALTER FUNCTION hlx009_task_decided_by() RENAME TO hl011_task_decided_by;
ALTER TRIGGER hlx010_task_holder_enrolled ON tasks RENAME TO hl012_task_holder_enrolled;
ALTER FUNCTION hlx010_task_holder_enrolled() RENAME TO hl012_task_holder_enrolled;
ALTER TRIGGER hlx011_task_lease_enrolled ON tasks RENAME TO hl013_task_lease_enrolled;
ALTER FUNCTION hlx011_task_lease_enrolled() RENAME TO hl013_task_lease_enrolled;
ALTER TRIGGER hlx012_enrolments_replaced ON enrolments RENAME TO hl014_enrolments_replaced;
ALTER FUNCTION hlx012_enrolments_replaced() RENAME TO hl014_enrolments_replaced;
ALTER TRIGGER hlx013_enrolments_no_update ON enrolments RENAME TO hl015_enrolments_no_update;
ALTER FUNCTION hlx013_enrolments_no_update() RENAME TO hl015_enrolments_no_update;
ALTER TRIGGER hlx014_enrolments_journaled ON enrolments RENAME TO hl016_enrolments_journaled;
ALTER FUNCTION hlx014_enrolments_journaled() RENAME TO hl016_enrolments_journaled;
ALTER TRIGGER hlx015_enrolments_shape ON enrolments RENAME TO hl017_enrolments_shape;
ALTER FUNCTION hlx015_enrolments_shape() RENAME TO hl017_enrolments_shape;
ALTER TRIGGER hlx016_enrolments_by_owner ON enrolments RENAME TO hl018_enrolments_by_owner;
ALTER FUNCTION hlx016_enrolments_by_owner() RENAME TO hl018_enrolments_by_owner;
ALTER TRIGGER hlx017_task_role_fixed ON tasks RENAME TO hl019_task_role_fixed;
ALTER FUNCTION hlx017_task_role_fixed() RENAME TO hl019_task_role_fixed;
ALTER TRIGGER hlx018_task_role ON tasks RENAME TO hl020_task_role;
ALTER FUNCTION hlx018_task_role() RENAME TO hl020_task_role;
ALTER TRIGGER hlx019_controls_lifted_by_owner ON controls RENAME TO hl021_controls_lifted_by_owner;
ALTER FUNCTION hlx019_controls_lifted_by_owner() RENAME TO hl021_controls_lifted_by_owner;
ALTER TRIGGER hlx020_tokens_by_owner ON tokens RENAME TO hl022_tokens_by_owner;
ALTER FUNCTION hlx020_tokens_by_owner() RENAME TO hl022_tokens_by_owner;
ALTER TRIGGER hlx021_budgets_by_owner ON budgets RENAME TO hl023_budgets_by_owner;
ALTER FUNCTION hlx021_budgets_by_owner() RENAME TO hl023_budgets_by_owner;
ALTER TRIGGER hlx022_required_plugins_by_owner ON required_plugins RENAME TO hl024_required_plugins_by_owner;
ALTER FUNCTION hlx022_required_plugins_by_owner() RENAME TO hl024_required_plugins_by_owner;
ALTER TRIGGER hlx023_policy_by_owner ON policy RENAME TO hl025_policy_by_owner;
ALTER FUNCTION hlx023_policy_by_owner() RENAME TO hl025_policy_by_owner;
ALTER TRIGGER hlx024_controls_by_owner ON controls RENAME TO hl026_controls_by_owner;
ALTER FUNCTION hlx024_controls_by_owner() RENAME TO hl026_controls_by_owner;
ALTER TRIGGER hlx025_updates_bounded ON updates RENAME TO hl027_updates_bounded;
ALTER FUNCTION hlx025_updates_bounded() RENAME TO hl027_updates_bounded;
ALTER TRIGGER hlx026_results_merged ON results RENAME TO hl028_results_merged;
ALTER FUNCTION hlx026_results_merged() RENAME TO hl028_results_merged;
ALTER TRIGGER hlx027_results_amended ON results RENAME TO hl029_results_amended;
ALTER FUNCTION hlx027_results_amended() RENAME TO hl029_results_amended;
ALTER TRIGGER hlx028_tokens_kept ON tokens RENAME TO hl030_tokens_kept;
ALTER FUNCTION hlx028_tokens_kept() RENAME TO hl030_tokens_kept;
ALTER TRIGGER hlx029_tokens_revoked_once ON tokens RENAME TO hl031_tokens_revoked_once;
ALTER FUNCTION hlx029_tokens_revoked_once() RENAME TO hl031_tokens_revoked_once;
ALTER TRIGGER hlx030_tokens_keys_kept ON tokens RENAME TO hl032_tokens_keys_kept;
ALTER FUNCTION hlx030_tokens_keys_kept() RENAME TO hl032_tokens_keys_kept;
ALTER TRIGGER hlx031_tokens_shape ON tokens RENAME TO hl033_tokens_shape;
ALTER FUNCTION hlx031_tokens_shape() RENAME TO hl033_tokens_shape;
ALTER TRIGGER hlx032_confirmations_why ON confirmations RENAME TO hl034_confirmations_why;
ALTER FUNCTION hlx032_confirmations_why() RENAME TO hl034_confirmations_why;
ALTER TRIGGER hlx033_confirmations_counted ON confirmations RENAME TO hl035_confirmations_counted;
ALTER FUNCTION hlx033_confirmations_counted() RENAME TO hl035_confirmations_counted;
ALTER TRIGGER hlx034_task_lease_controlled ON tasks RENAME TO hl036_task_lease_controlled;
ALTER FUNCTION hlx034_task_lease_controlled() RENAME TO hl036_task_lease_controlled;
ALTER TRIGGER hlx035_budgets_no_update ON budgets RENAME TO hl037_budgets_no_update;
ALTER FUNCTION hlx035_budgets_no_update() RENAME TO hl037_budgets_no_update;
ALTER TRIGGER hlx036_budgets_values ON budgets RENAME TO hl038_budgets_values;
ALTER FUNCTION hlx036_budgets_values() RENAME TO hl038_budgets_values;
ALTER TRIGGER hlx037_controls_kept ON controls RENAME TO hl039_controls_kept;
ALTER FUNCTION hlx037_controls_kept() RENAME TO hl039_controls_kept;
ALTER TRIGGER hlx038_controls_lifted_once ON controls RENAME TO hl040_controls_lifted_once;
ALTER FUNCTION hlx038_controls_lifted_once() RENAME TO hl040_controls_lifted_once;
ALTER TRIGGER hlx039_controls_keys_kept ON controls RENAME TO hl041_controls_keys_kept;
ALTER FUNCTION hlx039_controls_keys_kept() RENAME TO hl041_controls_keys_kept;
ALTER TRIGGER hlx040_controls_scope ON controls RENAME TO hl042_controls_scope;
ALTER FUNCTION hlx040_controls_scope() RENAME TO hl042_controls_scope;
ALTER TRIGGER hlx041_required_plugins_kind ON required_plugins RENAME TO hl043_required_plugins_kind;
ALTER FUNCTION hlx041_required_plugins_kind() RENAME TO hl043_required_plugins_kind;
ALTER TRIGGER hlx042_required_plugins_no_update ON required_plugins RENAME TO hl044_required_plugins_no_update;
ALTER FUNCTION hlx042_required_plugins_no_update() RENAME TO hl044_required_plugins_no_update;
ALTER TRIGGER hlx043_policy_no_update ON policy RENAME TO hl045_policy_no_update;
ALTER FUNCTION hlx043_policy_no_update() RENAME TO hl045_policy_no_update;
ALTER TRIGGER hlx044_policy_values ON policy RENAME TO hl004_policy_values;
ALTER FUNCTION hlx044_policy_values() RENAME TO hl004_policy_values;
ALTER TRIGGER hlx045_task_fields ON tasks RENAME TO hl046_task_fields;
ALTER FUNCTION hlx045_task_fields() RENAME TO hl046_task_fields;
ALTER TRIGGER hlx046_task_claim_ready ON tasks RENAME TO hl047_task_claim_ready;
ALTER FUNCTION hlx046_task_claim_ready() RENAME TO hl047_task_claim_ready;
ALTER TRIGGER hlx047_task_attempt_failed ON tasks RENAME TO hl005_task_attempt_failed;
ALTER FUNCTION hlx047_task_attempt_failed() RENAME TO hl005_task_attempt_failed;
CREATE OR REPLACE FUNCTION hl005_task_attempt_failed() RETURNS trigger LANGUAGE plpgsql SET search_path FROM CURRENT AS $$
BEGIN
    IF OLD.state IN ('verifying', 'approval') AND NEW.state = 'routed' THEN
        UPDATE tasks SET attempts = attempts + 1 WHERE number = NEW.number;
    END IF;
    RETURN NEW;
END $$;
DROP TRIGGER hl005_task_attempt_failed ON tasks;
CREATE TRIGGER hl005_task_attempt_failed AFTER UPDATE OF state ON tasks FOR EACH ROW WHEN (OLD.state IN ('verifying', 'approval')) EXECUTE FUNCTION hl005_task_attempt_failed();
CREATE OR REPLACE FUNCTION hl004_policy_values() RETURNS trigger LANGUAGE plpgsql SET search_path FROM CURRENT AS $$
BEGIN
    IF NOT ((NEW.key = 'mode' AND NEW.value IN ('personal', 'team')) OR (NEW.key = 'proposals' AND NEW.value IN ('gate', 'owner')) OR (NEW.key = 'timezone' AND length(NEW.value) BETWEEN 1 AND 64) OR ((NEW.key = 'threshold' OR (NEW.key ~ '^threshold:.' AND length(NEW.key) <= 80)) AND NEW.value ~ '^[0-9]{1,4}$' AND NEW.value::integer <= 1000) OR (NEW.key ~ '^plugin:[A-Za-z0-9_.-]{1,64}$' AND NEW.value = 'enabled') OR (NEW.key = 'plugins_notice' AND NEW.value = 'due')) THEN
        RAISE EXCEPTION 'invalid_input:invalid_policy';
    END IF;
    RETURN NEW;
END $$;
DROP TRIGGER hl004_policy_values ON policy;
CREATE TRIGGER hl004_policy_values BEFORE INSERT ON policy FOR EACH ROW EXECUTE FUNCTION hl004_policy_values();
UPDATE tasks SET attempts = greatest(attempts, (
    SELECT count(*) FROM journal j WHERE j.task = tasks.number
      AND j.from_state IN ('verifying', 'approval') AND j.to_state = 'routed'))
WHERE state NOT IN ('cancelled', 'completed', 'rejected');
UPDATE tasks SET attempt_limit = attempts + 1, fields_version = fields_version + 1
WHERE state NOT IN ('cancelled', 'completed', 'rejected') AND attempts >= attempt_limit
  AND attempt_limit > (SELECT count(*) FROM journal j WHERE j.task = tasks.number
      AND j.from_state = 'verifying' AND j.to_state = 'routed'
      AND hl_json(j.detail) ->> 'outcome' = 'failed');
INSERT INTO policy(key, value, at, by)
SELECT 'plugins_notice', 'due',
       to_char(now() AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"'), value
FROM meta WHERE key = 'owner';
