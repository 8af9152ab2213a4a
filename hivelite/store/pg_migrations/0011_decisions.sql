-- Migration 11 (as SQLite's): who decides, and what decides, written only by its verb.
-- The owner's moves (approve, deny, cancel) by the store's owner, a decline by the owner or
-- a verifier's counted rejection; a result's body and version changed only by its holder's
-- submission or its worker's journaled amend; a merge recorded once, journaled, on a
-- completed task, by the worker or the owner; usage rows non-negative and bounded; the
-- owner's tables written by the owner. Frozen once released.
--
-- A table's triggers run in name order and each name starts with its place among all the
-- rules (pg_schema), which is SQLite's order: the new rules run first, as SQLite runs the
-- newest trigger first, so every older rule (and its function) moves down their number.

ALTER TRIGGER hl086_required_plugins_no_truncate ON required_plugins RENAME TO hl096_required_plugins_no_truncate;
ALTER FUNCTION hl086_required_plugins_no_truncate() RENAME TO hl096_required_plugins_no_truncate;
ALTER TRIGGER hl085_budgets_no_truncate ON budgets RENAME TO hl095_budgets_no_truncate;
ALTER FUNCTION hl085_budgets_no_truncate() RENAME TO hl095_budgets_no_truncate;
ALTER TRIGGER hl084_policy_no_truncate ON policy RENAME TO hl094_policy_no_truncate;
ALTER FUNCTION hl084_policy_no_truncate() RENAME TO hl094_policy_no_truncate;
ALTER TRIGGER hl083_tokens_no_truncate ON tokens RENAME TO hl093_tokens_no_truncate;
ALTER FUNCTION hl083_tokens_no_truncate() RENAME TO hl093_tokens_no_truncate;
ALTER TRIGGER hl082_controls_no_truncate ON controls RENAME TO hl092_controls_no_truncate;
ALTER FUNCTION hl082_controls_no_truncate() RENAME TO hl092_controls_no_truncate;
ALTER TRIGGER hl081_meta_no_truncate ON meta RENAME TO hl091_meta_no_truncate;
ALTER FUNCTION hl081_meta_no_truncate() RENAME TO hl091_meta_no_truncate;
ALTER TRIGGER hl080_deps_no_truncate ON deps RENAME TO hl090_deps_no_truncate;
ALTER FUNCTION hl080_deps_no_truncate() RENAME TO hl090_deps_no_truncate;
ALTER TRIGGER hl079_journal_no_truncate ON journal RENAME TO hl089_journal_no_truncate;
ALTER FUNCTION hl079_journal_no_truncate() RENAME TO hl089_journal_no_truncate;
ALTER TRIGGER hl078_updates_no_truncate ON updates RENAME TO hl088_updates_no_truncate;
ALTER FUNCTION hl078_updates_no_truncate() RENAME TO hl088_updates_no_truncate;
ALTER TRIGGER hl077_confirmations_no_truncate ON confirmations RENAME TO hl087_confirmations_no_truncate;
ALTER FUNCTION hl077_confirmations_no_truncate() RENAME TO hl087_confirmations_no_truncate;
ALTER TRIGGER hl076_checkpoints_no_truncate ON checkpoints RENAME TO hl086_checkpoints_no_truncate;
ALTER FUNCTION hl076_checkpoints_no_truncate() RENAME TO hl086_checkpoints_no_truncate;
ALTER TRIGGER hl075_results_no_truncate ON results RENAME TO hl085_results_no_truncate;
ALTER FUNCTION hl075_results_no_truncate() RENAME TO hl085_results_no_truncate;
ALTER TRIGGER hl074_packets_no_truncate ON packets RENAME TO hl084_packets_no_truncate;
ALTER FUNCTION hl074_packets_no_truncate() RENAME TO hl084_packets_no_truncate;
ALTER TRIGGER hl073_tasks_no_truncate ON tasks RENAME TO hl083_tasks_no_truncate;
ALTER FUNCTION hl073_tasks_no_truncate() RENAME TO hl083_tasks_no_truncate;
ALTER TRIGGER hl072_moves_fixed_truncate ON moves RENAME TO hl082_moves_fixed_truncate;
ALTER FUNCTION hl072_moves_fixed_truncate() RENAME TO hl082_moves_fixed_truncate;
ALTER TRIGGER hl071_task_insert ON tasks RENAME TO hl081_task_insert;
ALTER FUNCTION hl071_task_insert() RENAME TO hl081_task_insert;
ALTER TRIGGER hl070_task_update ON tasks RENAME TO hl080_task_update;
ALTER FUNCTION hl070_task_update() RENAME TO hl080_task_update;
ALTER TRIGGER hl069_task_move ON tasks RENAME TO hl079_task_move;
ALTER FUNCTION hl069_task_move() RENAME TO hl079_task_move;
ALTER TRIGGER hl068_results_update ON results RENAME TO hl078_results_update;
ALTER FUNCTION hl068_results_update() RENAME TO hl078_results_update;
ALTER TRIGGER hl067_journal_insert ON journal RENAME TO hl077_journal_insert;
ALTER FUNCTION hl067_journal_insert() RENAME TO hl077_journal_insert;
ALTER TRIGGER hl066_moves_fixed_insert ON moves RENAME TO hl076_moves_fixed_insert;
ALTER FUNCTION hl066_moves_fixed_insert() RENAME TO hl076_moves_fixed_insert;
ALTER TRIGGER hl065_moves_fixed_update ON moves RENAME TO hl075_moves_fixed_update;
ALTER FUNCTION hl065_moves_fixed_update() RENAME TO hl075_moves_fixed_update;
ALTER TRIGGER hl064_moves_fixed_delete ON moves RENAME TO hl074_moves_fixed_delete;
ALTER FUNCTION hl064_moves_fixed_delete() RENAME TO hl074_moves_fixed_delete;
ALTER TRIGGER hl063_task_delete ON tasks RENAME TO hl073_task_delete;
ALTER FUNCTION hl063_task_delete() RENAME TO hl073_task_delete;
ALTER TRIGGER hl062_packets_fixed_update ON packets RENAME TO hl072_packets_fixed_update;
ALTER FUNCTION hl062_packets_fixed_update() RENAME TO hl072_packets_fixed_update;
ALTER TRIGGER hl061_packets_fixed_delete ON packets RENAME TO hl071_packets_fixed_delete;
ALTER FUNCTION hl061_packets_fixed_delete() RENAME TO hl071_packets_fixed_delete;
ALTER TRIGGER hl060_results_kept ON results RENAME TO hl070_results_kept;
ALTER FUNCTION hl060_results_kept() RENAME TO hl070_results_kept;
ALTER TRIGGER hl059_results_insert ON results RENAME TO hl069_results_insert;
ALTER FUNCTION hl059_results_insert() RENAME TO hl069_results_insert;
ALTER TRIGGER hl058_confirmations_insert ON confirmations RENAME TO hl068_confirmations_insert;
ALTER FUNCTION hl058_confirmations_insert() RENAME TO hl068_confirmations_insert;
ALTER TRIGGER hl057_updates_insert ON updates RENAME TO hl067_updates_insert;
ALTER FUNCTION hl057_updates_insert() RENAME TO hl067_updates_insert;
ALTER TRIGGER hl056_confirmations_no_update ON confirmations RENAME TO hl066_confirmations_no_update;
ALTER FUNCTION hl056_confirmations_no_update() RENAME TO hl066_confirmations_no_update;
ALTER TRIGGER hl055_confirmations_no_delete ON confirmations RENAME TO hl065_confirmations_no_delete;
ALTER FUNCTION hl055_confirmations_no_delete() RENAME TO hl065_confirmations_no_delete;
ALTER TRIGGER hl054_updates_no_update ON updates RENAME TO hl064_updates_no_update;
ALTER FUNCTION hl054_updates_no_update() RENAME TO hl064_updates_no_update;
ALTER TRIGGER hl053_updates_no_delete ON updates RENAME TO hl063_updates_no_delete;
ALTER FUNCTION hl053_updates_no_delete() RENAME TO hl063_updates_no_delete;
ALTER TRIGGER hl052_journal_no_delete ON journal RENAME TO hl062_journal_no_delete;
ALTER FUNCTION hl052_journal_no_delete() RENAME TO hl062_journal_no_delete;
ALTER TRIGGER hl051_checkpoints_insert ON checkpoints RENAME TO hl061_checkpoints_insert;
ALTER FUNCTION hl051_checkpoints_insert() RENAME TO hl061_checkpoints_insert;
ALTER TRIGGER hl050_checkpoints_update ON checkpoints RENAME TO hl060_checkpoints_update;
ALTER FUNCTION hl050_checkpoints_update() RENAME TO hl060_checkpoints_update;
ALTER TRIGGER hl049_checkpoints_no_delete ON checkpoints RENAME TO hl059_checkpoints_no_delete;
ALTER FUNCTION hl049_checkpoints_no_delete() RENAME TO hl059_checkpoints_no_delete;
ALTER TRIGGER hl048_tasks_keys_kept ON tasks RENAME TO hl058_tasks_keys_kept;
ALTER FUNCTION hl048_tasks_keys_kept() RENAME TO hl058_tasks_keys_kept;
ALTER TRIGGER hl047_packets_keys_kept ON packets RENAME TO hl057_packets_keys_kept;
ALTER FUNCTION hl047_packets_keys_kept() RENAME TO hl057_packets_keys_kept;
ALTER TRIGGER hl046_checkpoints_keys_kept ON checkpoints RENAME TO hl056_checkpoints_keys_kept;
ALTER FUNCTION hl046_checkpoints_keys_kept() RENAME TO hl056_checkpoints_keys_kept;
ALTER TRIGGER hl045_results_keys_kept ON results RENAME TO hl055_results_keys_kept;
ALTER FUNCTION hl045_results_keys_kept() RENAME TO hl055_results_keys_kept;
ALTER TRIGGER hl044_confirmations_keys_kept ON confirmations RENAME TO hl054_confirmations_keys_kept;
ALTER FUNCTION hl044_confirmations_keys_kept() RENAME TO hl054_confirmations_keys_kept;
ALTER TRIGGER hl043_updates_keys_kept ON updates RENAME TO hl053_updates_keys_kept;
ALTER FUNCTION hl043_updates_keys_kept() RENAME TO hl053_updates_keys_kept;
ALTER TRIGGER hl042_journal_keys_kept ON journal RENAME TO hl052_journal_keys_kept;
ALTER FUNCTION hl042_journal_keys_kept() RENAME TO hl052_journal_keys_kept;
ALTER TRIGGER hl041_meta_keys_kept ON meta RENAME TO hl051_meta_keys_kept;
ALTER FUNCTION hl041_meta_keys_kept() RENAME TO hl051_meta_keys_kept;
ALTER TRIGGER hl040_meta_owner_fixed ON meta RENAME TO hl050_meta_owner_fixed;
ALTER FUNCTION hl040_meta_owner_fixed() RENAME TO hl050_meta_owner_fixed;
ALTER TRIGGER hl039_meta_kept ON meta RENAME TO hl049_meta_kept;
ALTER FUNCTION hl039_meta_kept() RENAME TO hl049_meta_kept;
ALTER TRIGGER hl038_task_completion_decided ON tasks RENAME TO hl048_task_completion_decided;
ALTER FUNCTION hl038_task_completion_decided() RENAME TO hl048_task_completion_decided;
ALTER TRIGGER hl037_task_lease_taken ON tasks RENAME TO hl047_task_lease_taken;
ALTER FUNCTION hl037_task_lease_taken() RENAME TO hl047_task_lease_taken;
ALTER TRIGGER hl036_task_lease_length ON tasks RENAME TO hl046_task_lease_length;
ALTER FUNCTION hl036_task_lease_length() RENAME TO hl046_task_lease_length;
ALTER TRIGGER hl035_results_from_holder ON results RENAME TO hl045_results_from_holder;
ALTER FUNCTION hl035_results_from_holder() RENAME TO hl045_results_from_holder;
ALTER TRIGGER hl034_results_fixed ON results RENAME TO hl044_results_fixed;
ALTER FUNCTION hl034_results_fixed() RENAME TO hl044_results_fixed;
ALTER TRIGGER hl033_checkpoints_fixed ON checkpoints RENAME TO hl043_checkpoints_fixed;
ALTER FUNCTION hl033_checkpoints_fixed() RENAME TO hl043_checkpoints_fixed;
ALTER TRIGGER hl032_meta_identity_fixed ON meta RENAME TO hl042_meta_identity_fixed;
ALTER FUNCTION hl032_meta_identity_fixed() RENAME TO hl042_meta_identity_fixed;
ALTER TRIGGER hl031_task_created ON tasks RENAME TO hl041_task_created;
ALTER FUNCTION hl031_task_created() RENAME TO hl041_task_created;
ALTER TRIGGER hl030_task_journal ON tasks RENAME TO hl040_task_journal;
ALTER FUNCTION hl030_task_journal() RENAME TO hl040_task_journal;
ALTER TRIGGER hl029_journal_no_update ON journal RENAME TO hl039_journal_no_update;
ALTER FUNCTION hl029_journal_no_update() RENAME TO hl039_journal_no_update;
ALTER TRIGGER hl028_deps_fixed_update ON deps RENAME TO hl038_deps_fixed_update;
ALTER FUNCTION hl028_deps_fixed_update() RENAME TO hl038_deps_fixed_update;
ALTER TRIGGER hl027_deps_fixed_delete ON deps RENAME TO hl037_deps_fixed_delete;
ALTER FUNCTION hl027_deps_fixed_delete() RENAME TO hl037_deps_fixed_delete;
ALTER TRIGGER hl026_deps_keys_kept ON deps RENAME TO hl036_deps_keys_kept;
ALTER FUNCTION hl026_deps_keys_kept() RENAME TO hl036_deps_keys_kept;
ALTER TRIGGER hl025_deps_with_task ON deps RENAME TO hl035_deps_with_task;
ALTER FUNCTION hl025_deps_with_task() RENAME TO hl035_deps_with_task;
ALTER TRIGGER hl024_task_unblocks ON tasks RENAME TO hl034_task_unblocks;
ALTER FUNCTION hl024_task_unblocks() RENAME TO hl034_task_unblocks;
ALTER TRIGGER hl023_task_attempt_failed ON tasks RENAME TO hl033_task_attempt_failed;
ALTER FUNCTION hl023_task_attempt_failed() RENAME TO hl033_task_attempt_failed;
ALTER TRIGGER hl022_task_claim_ready ON tasks RENAME TO hl032_task_claim_ready;
ALTER FUNCTION hl022_task_claim_ready() RENAME TO hl032_task_claim_ready;
ALTER TRIGGER hl021_task_fields ON tasks RENAME TO hl031_task_fields;
ALTER FUNCTION hl021_task_fields() RENAME TO hl031_task_fields;
ALTER TRIGGER hl020_policy_values ON policy RENAME TO hl030_policy_values;
ALTER FUNCTION hl020_policy_values() RENAME TO hl030_policy_values;
ALTER TRIGGER hl019_policy_no_update ON policy RENAME TO hl029_policy_no_update;
ALTER FUNCTION hl019_policy_no_update() RENAME TO hl029_policy_no_update;
ALTER TRIGGER hl018_required_plugins_no_update ON required_plugins RENAME TO hl028_required_plugins_no_update;
ALTER FUNCTION hl018_required_plugins_no_update() RENAME TO hl028_required_plugins_no_update;
ALTER TRIGGER hl017_required_plugins_kind ON required_plugins RENAME TO hl027_required_plugins_kind;
ALTER FUNCTION hl017_required_plugins_kind() RENAME TO hl027_required_plugins_kind;
ALTER TRIGGER hl016_controls_scope ON controls RENAME TO hl026_controls_scope;
ALTER FUNCTION hl016_controls_scope() RENAME TO hl026_controls_scope;
ALTER TRIGGER hl015_controls_keys_kept ON controls RENAME TO hl025_controls_keys_kept;
ALTER FUNCTION hl015_controls_keys_kept() RENAME TO hl025_controls_keys_kept;
ALTER TRIGGER hl014_controls_lifted_once ON controls RENAME TO hl024_controls_lifted_once;
ALTER FUNCTION hl014_controls_lifted_once() RENAME TO hl024_controls_lifted_once;
ALTER TRIGGER hl013_controls_kept ON controls RENAME TO hl023_controls_kept;
ALTER FUNCTION hl013_controls_kept() RENAME TO hl023_controls_kept;
ALTER TRIGGER hl012_budgets_values ON budgets RENAME TO hl022_budgets_values;
ALTER FUNCTION hl012_budgets_values() RENAME TO hl022_budgets_values;
ALTER TRIGGER hl011_budgets_no_update ON budgets RENAME TO hl021_budgets_no_update;
ALTER FUNCTION hl011_budgets_no_update() RENAME TO hl021_budgets_no_update;
ALTER TRIGGER hl010_task_lease_controlled ON tasks RENAME TO hl020_task_lease_controlled;
ALTER FUNCTION hl010_task_lease_controlled() RENAME TO hl020_task_lease_controlled;
ALTER TRIGGER hl009_confirmations_counted ON confirmations RENAME TO hl019_confirmations_counted;
ALTER FUNCTION hl009_confirmations_counted() RENAME TO hl019_confirmations_counted;
ALTER TRIGGER hl008_confirmations_why ON confirmations RENAME TO hl018_confirmations_why;
ALTER FUNCTION hl008_confirmations_why() RENAME TO hl018_confirmations_why;
ALTER TRIGGER hl007_tokens_shape ON tokens RENAME TO hl017_tokens_shape;
ALTER FUNCTION hl007_tokens_shape() RENAME TO hl017_tokens_shape;
ALTER TRIGGER hl006_tokens_keys_kept ON tokens RENAME TO hl016_tokens_keys_kept;
ALTER FUNCTION hl006_tokens_keys_kept() RENAME TO hl016_tokens_keys_kept;
ALTER TRIGGER hl005_tokens_revoked_once ON tokens RENAME TO hl015_tokens_revoked_once;
ALTER FUNCTION hl005_tokens_revoked_once() RENAME TO hl015_tokens_revoked_once;
ALTER TRIGGER hl004_tokens_kept ON tokens RENAME TO hl014_tokens_kept;
ALTER FUNCTION hl004_tokens_kept() RENAME TO hl014_tokens_kept;

CREATE FUNCTION hl004_controls_lifted_by_owner() RETURNS trigger LANGUAGE plpgsql SET search_path FROM CURRENT AS $$
BEGIN
    IF NEW.lifted_by IS NOT NULL AND NEW.lifted_by IS DISTINCT FROM OLD.lifted_by AND NEW.lifted_by IS DISTINCT FROM (SELECT value FROM meta WHERE key = 'owner') THEN
        RAISE EXCEPTION 'forbidden_right:not_owner';
    END IF;
    RETURN NEW;
END $$;
CREATE TRIGGER hl004_controls_lifted_by_owner BEFORE UPDATE OF lifted_by ON controls FOR EACH ROW EXECUTE FUNCTION hl004_controls_lifted_by_owner();

CREATE FUNCTION hl005_tokens_by_owner() RETURNS trigger LANGUAGE plpgsql SET search_path FROM CURRENT AS $$
BEGIN
    IF NEW."by" IS DISTINCT FROM (SELECT value FROM meta WHERE key = 'owner') THEN
        RAISE EXCEPTION 'forbidden_right:not_owner';
    END IF;
    RETURN NEW;
END $$;
CREATE TRIGGER hl005_tokens_by_owner BEFORE INSERT ON tokens FOR EACH ROW EXECUTE FUNCTION hl005_tokens_by_owner();

CREATE FUNCTION hl006_budgets_by_owner() RETURNS trigger LANGUAGE plpgsql SET search_path FROM CURRENT AS $$
BEGIN
    IF NEW."by" IS DISTINCT FROM (SELECT value FROM meta WHERE key = 'owner') THEN
        RAISE EXCEPTION 'forbidden_right:not_owner';
    END IF;
    RETURN NEW;
END $$;
CREATE TRIGGER hl006_budgets_by_owner BEFORE INSERT ON budgets FOR EACH ROW EXECUTE FUNCTION hl006_budgets_by_owner();

CREATE FUNCTION hl007_required_plugins_by_owner() RETURNS trigger LANGUAGE plpgsql SET search_path FROM CURRENT AS $$
BEGIN
    IF NEW."by" IS DISTINCT FROM (SELECT value FROM meta WHERE key = 'owner') THEN
        RAISE EXCEPTION 'forbidden_right:not_owner';
    END IF;
    RETURN NEW;
END $$;
CREATE TRIGGER hl007_required_plugins_by_owner BEFORE INSERT ON required_plugins FOR EACH ROW EXECUTE FUNCTION hl007_required_plugins_by_owner();

CREATE FUNCTION hl008_policy_by_owner() RETURNS trigger LANGUAGE plpgsql SET search_path FROM CURRENT AS $$
BEGIN
    IF NEW."by" IS DISTINCT FROM (SELECT value FROM meta WHERE key = 'owner') THEN
        RAISE EXCEPTION 'forbidden_right:not_owner';
    END IF;
    RETURN NEW;
END $$;
CREATE TRIGGER hl008_policy_by_owner BEFORE INSERT ON policy FOR EACH ROW EXECUTE FUNCTION hl008_policy_by_owner();

CREATE FUNCTION hl009_controls_by_owner() RETURNS trigger LANGUAGE plpgsql SET search_path FROM CURRENT AS $$
BEGIN
    IF NEW."by" IS DISTINCT FROM (SELECT value FROM meta WHERE key = 'owner') THEN
        RAISE EXCEPTION 'forbidden_right:not_owner';
    END IF;
    RETURN NEW;
END $$;
CREATE TRIGGER hl009_controls_by_owner BEFORE INSERT ON controls FOR EACH ROW EXECUTE FUNCTION hl009_controls_by_owner();

CREATE FUNCTION hl010_updates_bounded() RETURNS trigger LANGUAGE plpgsql SET search_path FROM CURRENT AS $$
BEGIN
    IF (NEW.tokens IS NOT NULL AND (NEW.tokens < 0 OR NEW.tokens > 1000000000000)) OR (NEW.usd_micros IS NOT NULL AND (NEW.usd_micros < 0 OR NEW.usd_micros > 1000000000000)) THEN
        RAISE EXCEPTION 'invalid_input:invalid_usage';
    END IF;
    RETURN NEW;
END $$;
CREATE TRIGGER hl010_updates_bounded BEFORE INSERT ON updates FOR EACH ROW EXECUTE FUNCTION hl010_updates_bounded();

CREATE FUNCTION hl011_results_merged() RETURNS trigger LANGUAGE plpgsql SET search_path FROM CURRENT AS $$
BEGIN
    IF (NEW.merge_commit IS DISTINCT FROM OLD.merge_commit OR NEW.merged_by IS DISTINCT FROM OLD.merged_by)
        AND NOT (OLD.merge_commit IS NOT NULL AND (SELECT state FROM tasks WHERE number = OLD.task) IN ('cancelled', 'completed', 'rejected'))
        AND NOT (NEW.merge_commit IS NOT NULL AND (SELECT state FROM tasks WHERE number = OLD.task) NOT IN ('cancelled', 'completed', 'rejected'))
        AND NOT (OLD.merge_commit IS NULL AND NEW.merge_commit IS NOT NULL AND (NEW.merged_by IS NOT DISTINCT FROM (SELECT value FROM meta WHERE key = 'owner') OR NEW.merged_by IS NOT DISTINCT FROM OLD.worker) AND EXISTS (SELECT 1 FROM (SELECT to_state, actor, reason, hl_json(detail) AS detail FROM journal WHERE task = OLD.task ORDER BY seq DESC LIMIT 1) j WHERE j.to_state = 'completed' AND j.reason = 'merge_recorded' AND j.actor IS NOT DISTINCT FROM NEW.merged_by AND j.detail ->> 'merge_commit' = NEW.merge_commit)) THEN
    IF NEW.merge_commit IS NULL OR (SELECT state FROM tasks WHERE number = OLD.task) IS DISTINCT FROM 'completed' THEN
        RAISE EXCEPTION 'invalid_state:not_amendable';
    ELSIF NOT (NEW.merged_by IS NOT DISTINCT FROM (SELECT value FROM meta WHERE key = 'owner') OR NEW.merged_by IS NOT DISTINCT FROM OLD.worker) THEN
        RAISE EXCEPTION 'forbidden_right:not_submitter';
    END IF;
    RAISE EXCEPTION 'forbidden_right:merge_not_journaled';
    END IF;
    RETURN NEW;
END $$;
CREATE TRIGGER hl011_results_merged BEFORE UPDATE OF merge_commit, merged_by ON results FOR EACH ROW EXECUTE FUNCTION hl011_results_merged();

CREATE FUNCTION hl012_results_amended() RETURNS trigger LANGUAGE plpgsql SET search_path FROM CURRENT AS $$
BEGIN
    IF (NEW.body IS DISTINCT FROM OLD.body OR NEW.version IS DISTINCT FROM OLD.version)
        AND (SELECT state FROM tasks WHERE number = OLD.task) NOT IN ('cancelled', 'completed', 'rejected')
        AND NOT (NEW.version IS NOT DISTINCT FROM OLD.version + 1 AND EXISTS (SELECT 1 FROM tasks WHERE number = NEW.task AND state IN ('accepted', 'working') AND lease_holder IS NOT DISTINCT FROM NEW.worker AND lease_instance IS NOT DISTINCT FROM NEW.instance))
        AND ((NEW.task IS NOT DISTINCT FROM OLD.task AND NEW.worker IS NOT DISTINCT FROM OLD.worker AND NEW.instance IS NOT DISTINCT FROM OLD.instance AND NEW.session IS NOT DISTINCT FROM OLD.session AND NEW.outcome IS NOT DISTINCT FROM OLD.outcome AND NEW.threshold IS NOT DISTINCT FROM OLD.threshold) OR EXISTS (SELECT 1 FROM tasks WHERE number = NEW.task AND state IN ('accepted', 'working') AND lease_holder IS NOT DISTINCT FROM NEW.worker AND lease_instance IS NOT DISTINCT FROM NEW.instance))
        AND NOT (NEW.version IS NOT DISTINCT FROM OLD.version + 1 AND EXISTS (SELECT 1 FROM (SELECT to_state, actor, reason, hl_json(detail) AS detail FROM journal WHERE task = OLD.task ORDER BY seq DESC LIMIT 1) j WHERE j.to_state = 'approval' AND j.reason = 'amended' AND j.actor IS NOT DISTINCT FROM OLD.worker AND j.detail ->> 'version' = NEW.version::text)) THEN
    IF NEW.version IS DISTINCT FROM OLD.version + 1 THEN
        RAISE EXCEPTION 'invalid_state:result_version';
    END IF;
    RAISE EXCEPTION 'forbidden_right:amend_not_journaled';
    END IF;
    RETURN NEW;
END $$;
CREATE TRIGGER hl012_results_amended BEFORE UPDATE OF body, version ON results FOR EACH ROW EXECUTE FUNCTION hl012_results_amended();

CREATE FUNCTION hl013_task_decided_by() RETURNS trigger LANGUAGE plpgsql SET search_path FROM CURRENT AS $$
BEGIN
    IF NEW.state IN ('cancelled', 'rejected', 'routed') AND (
    (NEW.state = 'routed' AND OLD.state IN ('waiting') AND OLD.waiting_on IN ('owner_approval'))
    OR (NEW.state = 'rejected' AND OLD.state IN ('waiting') AND OLD.waiting_on IN ('owner_approval'))
    OR (NEW.state = 'routed' AND OLD.state IN ('approval'))
    OR (NEW.state = 'cancelled' AND OLD.state IN ('accepted', 'requested', 'routed', 'waiting', 'working')))
    AND NEW.actor IS DISTINCT FROM (SELECT value FROM meta WHERE key = 'owner') THEN
    IF OLD.state NOT IN ('approval') THEN
        RAISE EXCEPTION 'forbidden_right:not_owner';
    ELSIF NOT EXISTS (SELECT 1 FROM confirmations c JOIN results r ON r.task = c.task AND r.version = c.version WHERE c.task = NEW.number AND c.reviewer = NEW.actor AND c.verdict = 'reject' AND c.counted <> 0) THEN
        RAISE EXCEPTION 'forbidden_right:not_decided';
    END IF;
    END IF;
    RETURN NEW;
END $$;
CREATE TRIGGER hl013_task_decided_by BEFORE UPDATE OF state ON tasks FOR EACH ROW EXECUTE FUNCTION hl013_task_decided_by();
