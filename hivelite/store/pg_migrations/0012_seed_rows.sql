-- Migration 12 (as SQLite's): the seeds' remaining rows. A task's role; each agent's
-- enrolment (seed 004's opt-in: the projects, roles and write rights it covers), written by
-- the owner right after its journal row; a lease only within its holder's enrolment and
-- role, holder moves only under the enrolment the claim was taken under; in team mode a
-- guest's own request withdrawn by an agent of the guest's owner; a result's draft (its
-- knowledge change), set only by the holder's submission; and its evidence's receipts as
-- hivelite checked them, written only with a new version of the result. Frozen once
-- released.
--
-- The new rules run first, as SQLite runs its newest triggers first, so every older rule
-- moves down: each is renamed twice (through an hlx name), so no two names ever meet.

DROP TRIGGER hl013_task_decided_by ON tasks;
DROP FUNCTION hl013_task_decided_by();
ALTER TRIGGER hl004_controls_lifted_by_owner ON controls RENAME TO hlx004_controls_lifted_by_owner;
ALTER FUNCTION hl004_controls_lifted_by_owner() RENAME TO hlx004_controls_lifted_by_owner;
ALTER TRIGGER hl005_tokens_by_owner ON tokens RENAME TO hlx005_tokens_by_owner;
ALTER FUNCTION hl005_tokens_by_owner() RENAME TO hlx005_tokens_by_owner;
ALTER TRIGGER hl006_budgets_by_owner ON budgets RENAME TO hlx006_budgets_by_owner;
ALTER FUNCTION hl006_budgets_by_owner() RENAME TO hlx006_budgets_by_owner;
ALTER TRIGGER hl007_required_plugins_by_owner ON required_plugins RENAME TO hlx007_required_plugins_by_owner;
ALTER FUNCTION hl007_required_plugins_by_owner() RENAME TO hlx007_required_plugins_by_owner;
ALTER TRIGGER hl008_policy_by_owner ON policy RENAME TO hlx008_policy_by_owner;
ALTER FUNCTION hl008_policy_by_owner() RENAME TO hlx008_policy_by_owner;
ALTER TRIGGER hl009_controls_by_owner ON controls RENAME TO hlx009_controls_by_owner;
ALTER FUNCTION hl009_controls_by_owner() RENAME TO hlx009_controls_by_owner;
ALTER TRIGGER hl010_updates_bounded ON updates RENAME TO hlx010_updates_bounded;
ALTER FUNCTION hl010_updates_bounded() RENAME TO hlx010_updates_bounded;
ALTER TRIGGER hl011_results_merged ON results RENAME TO hlx011_results_merged;
ALTER FUNCTION hl011_results_merged() RENAME TO hlx011_results_merged;
ALTER TRIGGER hl012_results_amended ON results RENAME TO hlx012_results_amended;
ALTER FUNCTION hl012_results_amended() RENAME TO hlx012_results_amended;
ALTER TRIGGER hl014_tokens_kept ON tokens RENAME TO hlx014_tokens_kept;
ALTER FUNCTION hl014_tokens_kept() RENAME TO hlx014_tokens_kept;
ALTER TRIGGER hl015_tokens_revoked_once ON tokens RENAME TO hlx015_tokens_revoked_once;
ALTER FUNCTION hl015_tokens_revoked_once() RENAME TO hlx015_tokens_revoked_once;
ALTER TRIGGER hl016_tokens_keys_kept ON tokens RENAME TO hlx016_tokens_keys_kept;
ALTER FUNCTION hl016_tokens_keys_kept() RENAME TO hlx016_tokens_keys_kept;
ALTER TRIGGER hl017_tokens_shape ON tokens RENAME TO hlx017_tokens_shape;
ALTER FUNCTION hl017_tokens_shape() RENAME TO hlx017_tokens_shape;
ALTER TRIGGER hl018_confirmations_why ON confirmations RENAME TO hlx018_confirmations_why;
ALTER FUNCTION hl018_confirmations_why() RENAME TO hlx018_confirmations_why;
ALTER TRIGGER hl019_confirmations_counted ON confirmations RENAME TO hlx019_confirmations_counted;
ALTER FUNCTION hl019_confirmations_counted() RENAME TO hlx019_confirmations_counted;
ALTER TRIGGER hl020_task_lease_controlled ON tasks RENAME TO hlx020_task_lease_controlled;
ALTER FUNCTION hl020_task_lease_controlled() RENAME TO hlx020_task_lease_controlled;
ALTER TRIGGER hl021_budgets_no_update ON budgets RENAME TO hlx021_budgets_no_update;
ALTER FUNCTION hl021_budgets_no_update() RENAME TO hlx021_budgets_no_update;
ALTER TRIGGER hl022_budgets_values ON budgets RENAME TO hlx022_budgets_values;
ALTER FUNCTION hl022_budgets_values() RENAME TO hlx022_budgets_values;
ALTER TRIGGER hl023_controls_kept ON controls RENAME TO hlx023_controls_kept;
ALTER FUNCTION hl023_controls_kept() RENAME TO hlx023_controls_kept;
ALTER TRIGGER hl024_controls_lifted_once ON controls RENAME TO hlx024_controls_lifted_once;
ALTER FUNCTION hl024_controls_lifted_once() RENAME TO hlx024_controls_lifted_once;
ALTER TRIGGER hl025_controls_keys_kept ON controls RENAME TO hlx025_controls_keys_kept;
ALTER FUNCTION hl025_controls_keys_kept() RENAME TO hlx025_controls_keys_kept;
ALTER TRIGGER hl026_controls_scope ON controls RENAME TO hlx026_controls_scope;
ALTER FUNCTION hl026_controls_scope() RENAME TO hlx026_controls_scope;
ALTER TRIGGER hl027_required_plugins_kind ON required_plugins RENAME TO hlx027_required_plugins_kind;
ALTER FUNCTION hl027_required_plugins_kind() RENAME TO hlx027_required_plugins_kind;
ALTER TRIGGER hl028_required_plugins_no_update ON required_plugins RENAME TO hlx028_required_plugins_no_update;
ALTER FUNCTION hl028_required_plugins_no_update() RENAME TO hlx028_required_plugins_no_update;
ALTER TRIGGER hl029_policy_no_update ON policy RENAME TO hlx029_policy_no_update;
ALTER FUNCTION hl029_policy_no_update() RENAME TO hlx029_policy_no_update;
ALTER TRIGGER hl030_policy_values ON policy RENAME TO hlx030_policy_values;
ALTER FUNCTION hl030_policy_values() RENAME TO hlx030_policy_values;
ALTER TRIGGER hl031_task_fields ON tasks RENAME TO hlx031_task_fields;
ALTER FUNCTION hl031_task_fields() RENAME TO hlx031_task_fields;
ALTER TRIGGER hl032_task_claim_ready ON tasks RENAME TO hlx032_task_claim_ready;
ALTER FUNCTION hl032_task_claim_ready() RENAME TO hlx032_task_claim_ready;
ALTER TRIGGER hl033_task_attempt_failed ON tasks RENAME TO hlx033_task_attempt_failed;
ALTER FUNCTION hl033_task_attempt_failed() RENAME TO hlx033_task_attempt_failed;
ALTER TRIGGER hl034_task_unblocks ON tasks RENAME TO hlx034_task_unblocks;
ALTER FUNCTION hl034_task_unblocks() RENAME TO hlx034_task_unblocks;
ALTER TRIGGER hl035_deps_with_task ON deps RENAME TO hlx035_deps_with_task;
ALTER FUNCTION hl035_deps_with_task() RENAME TO hlx035_deps_with_task;
ALTER TRIGGER hl036_deps_keys_kept ON deps RENAME TO hlx036_deps_keys_kept;
ALTER FUNCTION hl036_deps_keys_kept() RENAME TO hlx036_deps_keys_kept;
ALTER TRIGGER hl037_deps_fixed_delete ON deps RENAME TO hlx037_deps_fixed_delete;
ALTER FUNCTION hl037_deps_fixed_delete() RENAME TO hlx037_deps_fixed_delete;
ALTER TRIGGER hl038_deps_fixed_update ON deps RENAME TO hlx038_deps_fixed_update;
ALTER FUNCTION hl038_deps_fixed_update() RENAME TO hlx038_deps_fixed_update;
ALTER TRIGGER hl039_journal_no_update ON journal RENAME TO hlx039_journal_no_update;
ALTER FUNCTION hl039_journal_no_update() RENAME TO hlx039_journal_no_update;
ALTER TRIGGER hl040_task_journal ON tasks RENAME TO hlx040_task_journal;
ALTER FUNCTION hl040_task_journal() RENAME TO hlx040_task_journal;
ALTER TRIGGER hl041_task_created ON tasks RENAME TO hlx041_task_created;
ALTER FUNCTION hl041_task_created() RENAME TO hlx041_task_created;
ALTER TRIGGER hl042_meta_identity_fixed ON meta RENAME TO hlx042_meta_identity_fixed;
ALTER FUNCTION hl042_meta_identity_fixed() RENAME TO hlx042_meta_identity_fixed;
ALTER TRIGGER hl043_checkpoints_fixed ON checkpoints RENAME TO hlx043_checkpoints_fixed;
ALTER FUNCTION hl043_checkpoints_fixed() RENAME TO hlx043_checkpoints_fixed;
ALTER TRIGGER hl044_results_fixed ON results RENAME TO hlx044_results_fixed;
ALTER FUNCTION hl044_results_fixed() RENAME TO hlx044_results_fixed;
ALTER TRIGGER hl045_results_from_holder ON results RENAME TO hlx045_results_from_holder;
ALTER FUNCTION hl045_results_from_holder() RENAME TO hlx045_results_from_holder;
ALTER TRIGGER hl046_task_lease_length ON tasks RENAME TO hlx046_task_lease_length;
ALTER FUNCTION hl046_task_lease_length() RENAME TO hlx046_task_lease_length;
ALTER TRIGGER hl047_task_lease_taken ON tasks RENAME TO hlx047_task_lease_taken;
ALTER FUNCTION hl047_task_lease_taken() RENAME TO hlx047_task_lease_taken;
ALTER TRIGGER hl048_task_completion_decided ON tasks RENAME TO hlx048_task_completion_decided;
ALTER FUNCTION hl048_task_completion_decided() RENAME TO hlx048_task_completion_decided;
ALTER TRIGGER hl049_meta_kept ON meta RENAME TO hlx049_meta_kept;
ALTER FUNCTION hl049_meta_kept() RENAME TO hlx049_meta_kept;
ALTER TRIGGER hl050_meta_owner_fixed ON meta RENAME TO hlx050_meta_owner_fixed;
ALTER FUNCTION hl050_meta_owner_fixed() RENAME TO hlx050_meta_owner_fixed;
ALTER TRIGGER hl051_meta_keys_kept ON meta RENAME TO hlx051_meta_keys_kept;
ALTER FUNCTION hl051_meta_keys_kept() RENAME TO hlx051_meta_keys_kept;
ALTER TRIGGER hl052_journal_keys_kept ON journal RENAME TO hlx052_journal_keys_kept;
ALTER FUNCTION hl052_journal_keys_kept() RENAME TO hlx052_journal_keys_kept;
ALTER TRIGGER hl053_updates_keys_kept ON updates RENAME TO hlx053_updates_keys_kept;
ALTER FUNCTION hl053_updates_keys_kept() RENAME TO hlx053_updates_keys_kept;
ALTER TRIGGER hl054_confirmations_keys_kept ON confirmations RENAME TO hlx054_confirmations_keys_kept;
ALTER FUNCTION hl054_confirmations_keys_kept() RENAME TO hlx054_confirmations_keys_kept;
ALTER TRIGGER hl055_results_keys_kept ON results RENAME TO hlx055_results_keys_kept;
ALTER FUNCTION hl055_results_keys_kept() RENAME TO hlx055_results_keys_kept;
ALTER TRIGGER hl056_checkpoints_keys_kept ON checkpoints RENAME TO hlx056_checkpoints_keys_kept;
ALTER FUNCTION hl056_checkpoints_keys_kept() RENAME TO hlx056_checkpoints_keys_kept;
ALTER TRIGGER hl057_packets_keys_kept ON packets RENAME TO hlx057_packets_keys_kept;
ALTER FUNCTION hl057_packets_keys_kept() RENAME TO hlx057_packets_keys_kept;
ALTER TRIGGER hl058_tasks_keys_kept ON tasks RENAME TO hlx058_tasks_keys_kept;
ALTER FUNCTION hl058_tasks_keys_kept() RENAME TO hlx058_tasks_keys_kept;
ALTER TRIGGER hl059_checkpoints_no_delete ON checkpoints RENAME TO hlx059_checkpoints_no_delete;
ALTER FUNCTION hl059_checkpoints_no_delete() RENAME TO hlx059_checkpoints_no_delete;
ALTER TRIGGER hl060_checkpoints_update ON checkpoints RENAME TO hlx060_checkpoints_update;
ALTER FUNCTION hl060_checkpoints_update() RENAME TO hlx060_checkpoints_update;
ALTER TRIGGER hl061_checkpoints_insert ON checkpoints RENAME TO hlx061_checkpoints_insert;
ALTER FUNCTION hl061_checkpoints_insert() RENAME TO hlx061_checkpoints_insert;
ALTER TRIGGER hl062_journal_no_delete ON journal RENAME TO hlx062_journal_no_delete;
ALTER FUNCTION hl062_journal_no_delete() RENAME TO hlx062_journal_no_delete;
ALTER TRIGGER hl063_updates_no_delete ON updates RENAME TO hlx063_updates_no_delete;
ALTER FUNCTION hl063_updates_no_delete() RENAME TO hlx063_updates_no_delete;
ALTER TRIGGER hl064_updates_no_update ON updates RENAME TO hlx064_updates_no_update;
ALTER FUNCTION hl064_updates_no_update() RENAME TO hlx064_updates_no_update;
ALTER TRIGGER hl065_confirmations_no_delete ON confirmations RENAME TO hlx065_confirmations_no_delete;
ALTER FUNCTION hl065_confirmations_no_delete() RENAME TO hlx065_confirmations_no_delete;
ALTER TRIGGER hl066_confirmations_no_update ON confirmations RENAME TO hlx066_confirmations_no_update;
ALTER FUNCTION hl066_confirmations_no_update() RENAME TO hlx066_confirmations_no_update;
ALTER TRIGGER hl067_updates_insert ON updates RENAME TO hlx067_updates_insert;
ALTER FUNCTION hl067_updates_insert() RENAME TO hlx067_updates_insert;
ALTER TRIGGER hl068_confirmations_insert ON confirmations RENAME TO hlx068_confirmations_insert;
ALTER FUNCTION hl068_confirmations_insert() RENAME TO hlx068_confirmations_insert;
ALTER TRIGGER hl069_results_insert ON results RENAME TO hlx069_results_insert;
ALTER FUNCTION hl069_results_insert() RENAME TO hlx069_results_insert;
ALTER TRIGGER hl070_results_kept ON results RENAME TO hlx070_results_kept;
ALTER FUNCTION hl070_results_kept() RENAME TO hlx070_results_kept;
ALTER TRIGGER hl071_packets_fixed_delete ON packets RENAME TO hlx071_packets_fixed_delete;
ALTER FUNCTION hl071_packets_fixed_delete() RENAME TO hlx071_packets_fixed_delete;
ALTER TRIGGER hl072_packets_fixed_update ON packets RENAME TO hlx072_packets_fixed_update;
ALTER FUNCTION hl072_packets_fixed_update() RENAME TO hlx072_packets_fixed_update;
ALTER TRIGGER hl073_task_delete ON tasks RENAME TO hlx073_task_delete;
ALTER FUNCTION hl073_task_delete() RENAME TO hlx073_task_delete;
ALTER TRIGGER hl074_moves_fixed_delete ON moves RENAME TO hlx074_moves_fixed_delete;
ALTER FUNCTION hl074_moves_fixed_delete() RENAME TO hlx074_moves_fixed_delete;
ALTER TRIGGER hl075_moves_fixed_update ON moves RENAME TO hlx075_moves_fixed_update;
ALTER FUNCTION hl075_moves_fixed_update() RENAME TO hlx075_moves_fixed_update;
ALTER TRIGGER hl076_moves_fixed_insert ON moves RENAME TO hlx076_moves_fixed_insert;
ALTER FUNCTION hl076_moves_fixed_insert() RENAME TO hlx076_moves_fixed_insert;
ALTER TRIGGER hl077_journal_insert ON journal RENAME TO hlx077_journal_insert;
ALTER FUNCTION hl077_journal_insert() RENAME TO hlx077_journal_insert;
ALTER TRIGGER hl078_results_update ON results RENAME TO hlx078_results_update;
ALTER FUNCTION hl078_results_update() RENAME TO hlx078_results_update;
ALTER TRIGGER hl079_task_move ON tasks RENAME TO hlx079_task_move;
ALTER FUNCTION hl079_task_move() RENAME TO hlx079_task_move;
ALTER TRIGGER hl080_task_update ON tasks RENAME TO hlx080_task_update;
ALTER FUNCTION hl080_task_update() RENAME TO hlx080_task_update;
ALTER TRIGGER hl081_task_insert ON tasks RENAME TO hlx081_task_insert;
ALTER FUNCTION hl081_task_insert() RENAME TO hlx081_task_insert;
ALTER TRIGGER hl082_moves_fixed_truncate ON moves RENAME TO hlx082_moves_fixed_truncate;
ALTER FUNCTION hl082_moves_fixed_truncate() RENAME TO hlx082_moves_fixed_truncate;
ALTER TRIGGER hl083_tasks_no_truncate ON tasks RENAME TO hlx083_tasks_no_truncate;
ALTER FUNCTION hl083_tasks_no_truncate() RENAME TO hlx083_tasks_no_truncate;
ALTER TRIGGER hl084_packets_no_truncate ON packets RENAME TO hlx084_packets_no_truncate;
ALTER FUNCTION hl084_packets_no_truncate() RENAME TO hlx084_packets_no_truncate;
ALTER TRIGGER hl085_results_no_truncate ON results RENAME TO hlx085_results_no_truncate;
ALTER FUNCTION hl085_results_no_truncate() RENAME TO hlx085_results_no_truncate;
ALTER TRIGGER hl086_checkpoints_no_truncate ON checkpoints RENAME TO hlx086_checkpoints_no_truncate;
ALTER FUNCTION hl086_checkpoints_no_truncate() RENAME TO hlx086_checkpoints_no_truncate;
ALTER TRIGGER hl087_confirmations_no_truncate ON confirmations RENAME TO hlx087_confirmations_no_truncate;
ALTER FUNCTION hl087_confirmations_no_truncate() RENAME TO hlx087_confirmations_no_truncate;
ALTER TRIGGER hl088_updates_no_truncate ON updates RENAME TO hlx088_updates_no_truncate;
ALTER FUNCTION hl088_updates_no_truncate() RENAME TO hlx088_updates_no_truncate;
ALTER TRIGGER hl089_journal_no_truncate ON journal RENAME TO hlx089_journal_no_truncate;
ALTER FUNCTION hl089_journal_no_truncate() RENAME TO hlx089_journal_no_truncate;
ALTER TRIGGER hl090_deps_no_truncate ON deps RENAME TO hlx090_deps_no_truncate;
ALTER FUNCTION hl090_deps_no_truncate() RENAME TO hlx090_deps_no_truncate;
ALTER TRIGGER hl091_meta_no_truncate ON meta RENAME TO hlx091_meta_no_truncate;
ALTER FUNCTION hl091_meta_no_truncate() RENAME TO hlx091_meta_no_truncate;
ALTER TRIGGER hl092_controls_no_truncate ON controls RENAME TO hlx092_controls_no_truncate;
ALTER FUNCTION hl092_controls_no_truncate() RENAME TO hlx092_controls_no_truncate;
ALTER TRIGGER hl093_tokens_no_truncate ON tokens RENAME TO hlx093_tokens_no_truncate;
ALTER FUNCTION hl093_tokens_no_truncate() RENAME TO hlx093_tokens_no_truncate;
ALTER TRIGGER hl094_policy_no_truncate ON policy RENAME TO hlx094_policy_no_truncate;
ALTER FUNCTION hl094_policy_no_truncate() RENAME TO hlx094_policy_no_truncate;
ALTER TRIGGER hl095_budgets_no_truncate ON budgets RENAME TO hlx095_budgets_no_truncate;
ALTER FUNCTION hl095_budgets_no_truncate() RENAME TO hlx095_budgets_no_truncate;
ALTER TRIGGER hl096_required_plugins_no_truncate ON required_plugins RENAME TO hlx096_required_plugins_no_truncate;
ALTER FUNCTION hl096_required_plugins_no_truncate() RENAME TO hlx096_required_plugins_no_truncate;
ALTER TRIGGER hlx004_controls_lifted_by_owner ON controls RENAME TO hl019_controls_lifted_by_owner;
ALTER FUNCTION hlx004_controls_lifted_by_owner() RENAME TO hl019_controls_lifted_by_owner;
ALTER TRIGGER hlx005_tokens_by_owner ON tokens RENAME TO hl020_tokens_by_owner;
ALTER FUNCTION hlx005_tokens_by_owner() RENAME TO hl020_tokens_by_owner;
ALTER TRIGGER hlx006_budgets_by_owner ON budgets RENAME TO hl021_budgets_by_owner;
ALTER FUNCTION hlx006_budgets_by_owner() RENAME TO hl021_budgets_by_owner;
ALTER TRIGGER hlx007_required_plugins_by_owner ON required_plugins RENAME TO hl022_required_plugins_by_owner;
ALTER FUNCTION hlx007_required_plugins_by_owner() RENAME TO hl022_required_plugins_by_owner;
ALTER TRIGGER hlx008_policy_by_owner ON policy RENAME TO hl023_policy_by_owner;
ALTER FUNCTION hlx008_policy_by_owner() RENAME TO hl023_policy_by_owner;
ALTER TRIGGER hlx009_controls_by_owner ON controls RENAME TO hl024_controls_by_owner;
ALTER FUNCTION hlx009_controls_by_owner() RENAME TO hl024_controls_by_owner;
ALTER TRIGGER hlx010_updates_bounded ON updates RENAME TO hl025_updates_bounded;
ALTER FUNCTION hlx010_updates_bounded() RENAME TO hl025_updates_bounded;
ALTER TRIGGER hlx011_results_merged ON results RENAME TO hl026_results_merged;
ALTER FUNCTION hlx011_results_merged() RENAME TO hl026_results_merged;
ALTER TRIGGER hlx012_results_amended ON results RENAME TO hl027_results_amended;
ALTER FUNCTION hlx012_results_amended() RENAME TO hl027_results_amended;
ALTER TRIGGER hlx014_tokens_kept ON tokens RENAME TO hl028_tokens_kept;
ALTER FUNCTION hlx014_tokens_kept() RENAME TO hl028_tokens_kept;
ALTER TRIGGER hlx015_tokens_revoked_once ON tokens RENAME TO hl029_tokens_revoked_once;
ALTER FUNCTION hlx015_tokens_revoked_once() RENAME TO hl029_tokens_revoked_once;
ALTER TRIGGER hlx016_tokens_keys_kept ON tokens RENAME TO hl030_tokens_keys_kept;
ALTER FUNCTION hlx016_tokens_keys_kept() RENAME TO hl030_tokens_keys_kept;
ALTER TRIGGER hlx017_tokens_shape ON tokens RENAME TO hl031_tokens_shape;
ALTER FUNCTION hlx017_tokens_shape() RENAME TO hl031_tokens_shape;
ALTER TRIGGER hlx018_confirmations_why ON confirmations RENAME TO hl032_confirmations_why;
ALTER FUNCTION hlx018_confirmations_why() RENAME TO hl032_confirmations_why;
ALTER TRIGGER hlx019_confirmations_counted ON confirmations RENAME TO hl033_confirmations_counted;
ALTER FUNCTION hlx019_confirmations_counted() RENAME TO hl033_confirmations_counted;
ALTER TRIGGER hlx020_task_lease_controlled ON tasks RENAME TO hl034_task_lease_controlled;
ALTER FUNCTION hlx020_task_lease_controlled() RENAME TO hl034_task_lease_controlled;
ALTER TRIGGER hlx021_budgets_no_update ON budgets RENAME TO hl035_budgets_no_update;
ALTER FUNCTION hlx021_budgets_no_update() RENAME TO hl035_budgets_no_update;
ALTER TRIGGER hlx022_budgets_values ON budgets RENAME TO hl036_budgets_values;
ALTER FUNCTION hlx022_budgets_values() RENAME TO hl036_budgets_values;
ALTER TRIGGER hlx023_controls_kept ON controls RENAME TO hl037_controls_kept;
ALTER FUNCTION hlx023_controls_kept() RENAME TO hl037_controls_kept;
ALTER TRIGGER hlx024_controls_lifted_once ON controls RENAME TO hl038_controls_lifted_once;
ALTER FUNCTION hlx024_controls_lifted_once() RENAME TO hl038_controls_lifted_once;
ALTER TRIGGER hlx025_controls_keys_kept ON controls RENAME TO hl039_controls_keys_kept;
ALTER FUNCTION hlx025_controls_keys_kept() RENAME TO hl039_controls_keys_kept;
ALTER TRIGGER hlx026_controls_scope ON controls RENAME TO hl040_controls_scope;
ALTER FUNCTION hlx026_controls_scope() RENAME TO hl040_controls_scope;
ALTER TRIGGER hlx027_required_plugins_kind ON required_plugins RENAME TO hl041_required_plugins_kind;
ALTER FUNCTION hlx027_required_plugins_kind() RENAME TO hl041_required_plugins_kind;
ALTER TRIGGER hlx028_required_plugins_no_update ON required_plugins RENAME TO hl042_required_plugins_no_update;
ALTER FUNCTION hlx028_required_plugins_no_update() RENAME TO hl042_required_plugins_no_update;
ALTER TRIGGER hlx029_policy_no_update ON policy RENAME TO hl043_policy_no_update;
ALTER FUNCTION hlx029_policy_no_update() RENAME TO hl043_policy_no_update;
ALTER TRIGGER hlx030_policy_values ON policy RENAME TO hl044_policy_values;
ALTER FUNCTION hlx030_policy_values() RENAME TO hl044_policy_values;
ALTER TRIGGER hlx031_task_fields ON tasks RENAME TO hl045_task_fields;
ALTER FUNCTION hlx031_task_fields() RENAME TO hl045_task_fields;
ALTER TRIGGER hlx032_task_claim_ready ON tasks RENAME TO hl046_task_claim_ready;
ALTER FUNCTION hlx032_task_claim_ready() RENAME TO hl046_task_claim_ready;
ALTER TRIGGER hlx033_task_attempt_failed ON tasks RENAME TO hl047_task_attempt_failed;
ALTER FUNCTION hlx033_task_attempt_failed() RENAME TO hl047_task_attempt_failed;
ALTER TRIGGER hlx034_task_unblocks ON tasks RENAME TO hl048_task_unblocks;
ALTER FUNCTION hlx034_task_unblocks() RENAME TO hl048_task_unblocks;
ALTER TRIGGER hlx035_deps_with_task ON deps RENAME TO hl049_deps_with_task;
ALTER FUNCTION hlx035_deps_with_task() RENAME TO hl049_deps_with_task;
ALTER TRIGGER hlx036_deps_keys_kept ON deps RENAME TO hl050_deps_keys_kept;
ALTER FUNCTION hlx036_deps_keys_kept() RENAME TO hl050_deps_keys_kept;
ALTER TRIGGER hlx037_deps_fixed_delete ON deps RENAME TO hl051_deps_fixed_delete;
ALTER FUNCTION hlx037_deps_fixed_delete() RENAME TO hl051_deps_fixed_delete;
ALTER TRIGGER hlx038_deps_fixed_update ON deps RENAME TO hl052_deps_fixed_update;
ALTER FUNCTION hlx038_deps_fixed_update() RENAME TO hl052_deps_fixed_update;
ALTER TRIGGER hlx039_journal_no_update ON journal RENAME TO hl053_journal_no_update;
ALTER FUNCTION hlx039_journal_no_update() RENAME TO hl053_journal_no_update;
ALTER TRIGGER hlx040_task_journal ON tasks RENAME TO hl054_task_journal;
ALTER FUNCTION hlx040_task_journal() RENAME TO hl054_task_journal;
ALTER TRIGGER hlx041_task_created ON tasks RENAME TO hl055_task_created;
ALTER FUNCTION hlx041_task_created() RENAME TO hl055_task_created;
ALTER TRIGGER hlx042_meta_identity_fixed ON meta RENAME TO hl056_meta_identity_fixed;
ALTER FUNCTION hlx042_meta_identity_fixed() RENAME TO hl056_meta_identity_fixed;
ALTER TRIGGER hlx043_checkpoints_fixed ON checkpoints RENAME TO hl057_checkpoints_fixed;
ALTER FUNCTION hlx043_checkpoints_fixed() RENAME TO hl057_checkpoints_fixed;
ALTER TRIGGER hlx044_results_fixed ON results RENAME TO hl058_results_fixed;
ALTER FUNCTION hlx044_results_fixed() RENAME TO hl058_results_fixed;
ALTER TRIGGER hlx045_results_from_holder ON results RENAME TO hl059_results_from_holder;
ALTER FUNCTION hlx045_results_from_holder() RENAME TO hl059_results_from_holder;
ALTER TRIGGER hlx046_task_lease_length ON tasks RENAME TO hl060_task_lease_length;
ALTER FUNCTION hlx046_task_lease_length() RENAME TO hl060_task_lease_length;
ALTER TRIGGER hlx047_task_lease_taken ON tasks RENAME TO hl061_task_lease_taken;
ALTER FUNCTION hlx047_task_lease_taken() RENAME TO hl061_task_lease_taken;
ALTER TRIGGER hlx048_task_completion_decided ON tasks RENAME TO hl062_task_completion_decided;
ALTER FUNCTION hlx048_task_completion_decided() RENAME TO hl062_task_completion_decided;
ALTER TRIGGER hlx049_meta_kept ON meta RENAME TO hl063_meta_kept;
ALTER FUNCTION hlx049_meta_kept() RENAME TO hl063_meta_kept;
ALTER TRIGGER hlx050_meta_owner_fixed ON meta RENAME TO hl064_meta_owner_fixed;
ALTER FUNCTION hlx050_meta_owner_fixed() RENAME TO hl064_meta_owner_fixed;
ALTER TRIGGER hlx051_meta_keys_kept ON meta RENAME TO hl065_meta_keys_kept;
ALTER FUNCTION hlx051_meta_keys_kept() RENAME TO hl065_meta_keys_kept;
ALTER TRIGGER hlx052_journal_keys_kept ON journal RENAME TO hl066_journal_keys_kept;
ALTER FUNCTION hlx052_journal_keys_kept() RENAME TO hl066_journal_keys_kept;
ALTER TRIGGER hlx053_updates_keys_kept ON updates RENAME TO hl067_updates_keys_kept;
ALTER FUNCTION hlx053_updates_keys_kept() RENAME TO hl067_updates_keys_kept;
ALTER TRIGGER hlx054_confirmations_keys_kept ON confirmations RENAME TO hl068_confirmations_keys_kept;
ALTER FUNCTION hlx054_confirmations_keys_kept() RENAME TO hl068_confirmations_keys_kept;
ALTER TRIGGER hlx055_results_keys_kept ON results RENAME TO hl069_results_keys_kept;
ALTER FUNCTION hlx055_results_keys_kept() RENAME TO hl069_results_keys_kept;
ALTER TRIGGER hlx056_checkpoints_keys_kept ON checkpoints RENAME TO hl070_checkpoints_keys_kept;
ALTER FUNCTION hlx056_checkpoints_keys_kept() RENAME TO hl070_checkpoints_keys_kept;
ALTER TRIGGER hlx057_packets_keys_kept ON packets RENAME TO hl071_packets_keys_kept;
ALTER FUNCTION hlx057_packets_keys_kept() RENAME TO hl071_packets_keys_kept;
ALTER TRIGGER hlx058_tasks_keys_kept ON tasks RENAME TO hl072_tasks_keys_kept;
ALTER FUNCTION hlx058_tasks_keys_kept() RENAME TO hl072_tasks_keys_kept;
ALTER TRIGGER hlx059_checkpoints_no_delete ON checkpoints RENAME TO hl073_checkpoints_no_delete;
ALTER FUNCTION hlx059_checkpoints_no_delete() RENAME TO hl073_checkpoints_no_delete;
ALTER TRIGGER hlx060_checkpoints_update ON checkpoints RENAME TO hl074_checkpoints_update;
ALTER FUNCTION hlx060_checkpoints_update() RENAME TO hl074_checkpoints_update;
ALTER TRIGGER hlx061_checkpoints_insert ON checkpoints RENAME TO hl075_checkpoints_insert;
ALTER FUNCTION hlx061_checkpoints_insert() RENAME TO hl075_checkpoints_insert;
ALTER TRIGGER hlx062_journal_no_delete ON journal RENAME TO hl076_journal_no_delete;
ALTER FUNCTION hlx062_journal_no_delete() RENAME TO hl076_journal_no_delete;
ALTER TRIGGER hlx063_updates_no_delete ON updates RENAME TO hl077_updates_no_delete;
ALTER FUNCTION hlx063_updates_no_delete() RENAME TO hl077_updates_no_delete;
ALTER TRIGGER hlx064_updates_no_update ON updates RENAME TO hl078_updates_no_update;
ALTER FUNCTION hlx064_updates_no_update() RENAME TO hl078_updates_no_update;
ALTER TRIGGER hlx065_confirmations_no_delete ON confirmations RENAME TO hl079_confirmations_no_delete;
ALTER FUNCTION hlx065_confirmations_no_delete() RENAME TO hl079_confirmations_no_delete;
ALTER TRIGGER hlx066_confirmations_no_update ON confirmations RENAME TO hl080_confirmations_no_update;
ALTER FUNCTION hlx066_confirmations_no_update() RENAME TO hl080_confirmations_no_update;
ALTER TRIGGER hlx067_updates_insert ON updates RENAME TO hl081_updates_insert;
ALTER FUNCTION hlx067_updates_insert() RENAME TO hl081_updates_insert;
ALTER TRIGGER hlx068_confirmations_insert ON confirmations RENAME TO hl082_confirmations_insert;
ALTER FUNCTION hlx068_confirmations_insert() RENAME TO hl082_confirmations_insert;
ALTER TRIGGER hlx069_results_insert ON results RENAME TO hl083_results_insert;
ALTER FUNCTION hlx069_results_insert() RENAME TO hl083_results_insert;
ALTER TRIGGER hlx070_results_kept ON results RENAME TO hl084_results_kept;
ALTER FUNCTION hlx070_results_kept() RENAME TO hl084_results_kept;
ALTER TRIGGER hlx071_packets_fixed_delete ON packets RENAME TO hl085_packets_fixed_delete;
ALTER FUNCTION hlx071_packets_fixed_delete() RENAME TO hl085_packets_fixed_delete;
ALTER TRIGGER hlx072_packets_fixed_update ON packets RENAME TO hl086_packets_fixed_update;
ALTER FUNCTION hlx072_packets_fixed_update() RENAME TO hl086_packets_fixed_update;
ALTER TRIGGER hlx073_task_delete ON tasks RENAME TO hl087_task_delete;
ALTER FUNCTION hlx073_task_delete() RENAME TO hl087_task_delete;
ALTER TRIGGER hlx074_moves_fixed_delete ON moves RENAME TO hl088_moves_fixed_delete;
ALTER FUNCTION hlx074_moves_fixed_delete() RENAME TO hl088_moves_fixed_delete;
ALTER TRIGGER hlx075_moves_fixed_update ON moves RENAME TO hl089_moves_fixed_update;
ALTER FUNCTION hlx075_moves_fixed_update() RENAME TO hl089_moves_fixed_update;
ALTER TRIGGER hlx076_moves_fixed_insert ON moves RENAME TO hl090_moves_fixed_insert;
ALTER FUNCTION hlx076_moves_fixed_insert() RENAME TO hl090_moves_fixed_insert;
ALTER TRIGGER hlx077_journal_insert ON journal RENAME TO hl091_journal_insert;
ALTER FUNCTION hlx077_journal_insert() RENAME TO hl091_journal_insert;
ALTER TRIGGER hlx078_results_update ON results RENAME TO hl092_results_update;
ALTER FUNCTION hlx078_results_update() RENAME TO hl092_results_update;
ALTER TRIGGER hlx079_task_move ON tasks RENAME TO hl093_task_move;
ALTER FUNCTION hlx079_task_move() RENAME TO hl093_task_move;
ALTER TRIGGER hlx080_task_update ON tasks RENAME TO hl094_task_update;
ALTER FUNCTION hlx080_task_update() RENAME TO hl094_task_update;
ALTER TRIGGER hlx081_task_insert ON tasks RENAME TO hl095_task_insert;
ALTER FUNCTION hlx081_task_insert() RENAME TO hl095_task_insert;
ALTER TRIGGER hlx082_moves_fixed_truncate ON moves RENAME TO hl096_moves_fixed_truncate;
ALTER FUNCTION hlx082_moves_fixed_truncate() RENAME TO hl096_moves_fixed_truncate;
ALTER TRIGGER hlx083_tasks_no_truncate ON tasks RENAME TO hl097_tasks_no_truncate;
ALTER FUNCTION hlx083_tasks_no_truncate() RENAME TO hl097_tasks_no_truncate;
ALTER TRIGGER hlx084_packets_no_truncate ON packets RENAME TO hl098_packets_no_truncate;
ALTER FUNCTION hlx084_packets_no_truncate() RENAME TO hl098_packets_no_truncate;
ALTER TRIGGER hlx085_results_no_truncate ON results RENAME TO hl099_results_no_truncate;
ALTER FUNCTION hlx085_results_no_truncate() RENAME TO hl099_results_no_truncate;
ALTER TRIGGER hlx086_checkpoints_no_truncate ON checkpoints RENAME TO hl100_checkpoints_no_truncate;
ALTER FUNCTION hlx086_checkpoints_no_truncate() RENAME TO hl100_checkpoints_no_truncate;
ALTER TRIGGER hlx087_confirmations_no_truncate ON confirmations RENAME TO hl101_confirmations_no_truncate;
ALTER FUNCTION hlx087_confirmations_no_truncate() RENAME TO hl101_confirmations_no_truncate;
ALTER TRIGGER hlx088_updates_no_truncate ON updates RENAME TO hl102_updates_no_truncate;
ALTER FUNCTION hlx088_updates_no_truncate() RENAME TO hl102_updates_no_truncate;
ALTER TRIGGER hlx089_journal_no_truncate ON journal RENAME TO hl103_journal_no_truncate;
ALTER FUNCTION hlx089_journal_no_truncate() RENAME TO hl103_journal_no_truncate;
ALTER TRIGGER hlx090_deps_no_truncate ON deps RENAME TO hl104_deps_no_truncate;
ALTER FUNCTION hlx090_deps_no_truncate() RENAME TO hl104_deps_no_truncate;
ALTER TRIGGER hlx091_meta_no_truncate ON meta RENAME TO hl105_meta_no_truncate;
ALTER FUNCTION hlx091_meta_no_truncate() RENAME TO hl105_meta_no_truncate;
ALTER TRIGGER hlx092_controls_no_truncate ON controls RENAME TO hl106_controls_no_truncate;
ALTER FUNCTION hlx092_controls_no_truncate() RENAME TO hl106_controls_no_truncate;
ALTER TRIGGER hlx093_tokens_no_truncate ON tokens RENAME TO hl107_tokens_no_truncate;
ALTER FUNCTION hlx093_tokens_no_truncate() RENAME TO hl107_tokens_no_truncate;
ALTER TRIGGER hlx094_policy_no_truncate ON policy RENAME TO hl108_policy_no_truncate;
ALTER FUNCTION hlx094_policy_no_truncate() RENAME TO hl108_policy_no_truncate;
ALTER TRIGGER hlx095_budgets_no_truncate ON budgets RENAME TO hl109_budgets_no_truncate;
ALTER FUNCTION hlx095_budgets_no_truncate() RENAME TO hl109_budgets_no_truncate;
ALTER TRIGGER hlx096_required_plugins_no_truncate ON required_plugins RENAME TO hl110_required_plugins_no_truncate;
ALTER FUNCTION hlx096_required_plugins_no_truncate() RENAME TO hl110_required_plugins_no_truncate;

ALTER TABLE tasks ADD COLUMN role text;
ALTER TABLE tasks ADD COLUMN lease_scope bigint;
ALTER TABLE results ADD COLUMN draft text;
ALTER TABLE results ADD COLUMN receipts text;

CREATE TABLE enrolments(
    agent text PRIMARY KEY,
    projects text NOT NULL,
    roles text NOT NULL,
    rights text NOT NULL,
    active bigint NOT NULL,
    seq bigint NOT NULL,
    at text NOT NULL,
    by text NOT NULL
);

CREATE FUNCTION hl004_results_receipts_fixed() RETURNS trigger LANGUAGE plpgsql SET search_path FROM CURRENT AS $$
BEGIN
    IF NEW.receipts IS DISTINCT FROM OLD.receipts THEN
    IF NEW.version IS DISTINCT FROM OLD.version + 1 THEN
        RAISE EXCEPTION 'forbidden_right:receipts_fixed';
    ELSIF (NEW.receipts IS NOT NULL AND (jsonb_typeof(hl_json(NEW.receipts)) IS DISTINCT FROM 'array' OR EXISTS (SELECT 1 FROM jsonb_array_elements(hl_json(NEW.receipts)) v WHERE jsonb_typeof(v) NOT IN ('null', 'object')))) THEN
        RAISE EXCEPTION 'invalid_input:invalid_receipt';
    END IF;
    END IF;
    RETURN NEW;
END $$;
CREATE TRIGGER hl004_results_receipts_fixed BEFORE UPDATE OF receipts ON results FOR EACH ROW EXECUTE FUNCTION hl004_results_receipts_fixed();

CREATE FUNCTION hl005_results_receipts_shape() RETURNS trigger LANGUAGE plpgsql SET search_path FROM CURRENT AS $$
BEGIN
    IF (NEW.receipts IS NOT NULL AND (jsonb_typeof(hl_json(NEW.receipts)) IS DISTINCT FROM 'array' OR EXISTS (SELECT 1 FROM jsonb_array_elements(hl_json(NEW.receipts)) v WHERE jsonb_typeof(v) NOT IN ('null', 'object')))) THEN
        RAISE EXCEPTION 'invalid_input:invalid_receipt';
    END IF;
    RETURN NEW;
END $$;
CREATE TRIGGER hl005_results_receipts_shape BEFORE INSERT ON results FOR EACH ROW EXECUTE FUNCTION hl005_results_receipts_shape();

CREATE FUNCTION hl006_results_draft_fixed() RETURNS trigger LANGUAGE plpgsql SET search_path FROM CURRENT AS $$
BEGIN
    IF NEW.draft IS DISTINCT FROM OLD.draft AND NOT (NEW.version IS NOT DISTINCT FROM OLD.version + 1 AND EXISTS (SELECT 1 FROM tasks WHERE number = NEW.task AND state IN ('accepted', 'working') AND lease_holder IS NOT DISTINCT FROM NEW.worker AND lease_instance IS NOT DISTINCT FROM NEW.instance)) THEN
        RAISE EXCEPTION 'forbidden_right:draft_fixed';
    END IF;
    RETURN NEW;
END $$;
CREATE TRIGGER hl006_results_draft_fixed BEFORE UPDATE OF draft ON results FOR EACH ROW EXECUTE FUNCTION hl006_results_draft_fixed();

CREATE FUNCTION hl007_results_draft_reshaped() RETURNS trigger LANGUAGE plpgsql SET search_path FROM CURRENT AS $$
BEGIN
    IF NEW.draft IS NOT NULL AND (jsonb_typeof(hl_json(NEW.draft)) IS DISTINCT FROM 'object' OR (hl_json(NEW.draft) ->> 'kind') IS NULL OR (hl_json(NEW.draft) ->> 'kind') NOT IN ('decision', 'document', 'patch') OR jsonb_typeof(hl_json(NEW.draft) -> 'content') IS DISTINCT FROM 'string' OR NEW.outcome IS DISTINCT FROM 'completed') THEN
        RAISE EXCEPTION 'invalid_input:invalid_draft';
    END IF;
    RETURN NEW;
END $$;
CREATE TRIGGER hl007_results_draft_reshaped BEFORE UPDATE OF draft, outcome ON results FOR EACH ROW EXECUTE FUNCTION hl007_results_draft_reshaped();

CREATE FUNCTION hl008_results_draft_shape() RETURNS trigger LANGUAGE plpgsql SET search_path FROM CURRENT AS $$
BEGIN
    IF NEW.draft IS NOT NULL AND (jsonb_typeof(hl_json(NEW.draft)) IS DISTINCT FROM 'object' OR (hl_json(NEW.draft) ->> 'kind') IS NULL OR (hl_json(NEW.draft) ->> 'kind') NOT IN ('decision', 'document', 'patch') OR jsonb_typeof(hl_json(NEW.draft) -> 'content') IS DISTINCT FROM 'string' OR NEW.outcome IS DISTINCT FROM 'completed') THEN
        RAISE EXCEPTION 'invalid_input:invalid_draft';
    END IF;
    RETURN NEW;
END $$;
CREATE TRIGGER hl008_results_draft_shape BEFORE INSERT ON results FOR EACH ROW EXECUTE FUNCTION hl008_results_draft_shape();

CREATE FUNCTION hl009_task_decided_by() RETURNS trigger LANGUAGE plpgsql SET search_path FROM CURRENT AS $$
BEGIN
    IF NEW.state IN ('cancelled', 'rejected', 'routed') AND (
    (NEW.state = 'routed' AND OLD.state IN ('waiting') AND OLD.waiting_on IN ('owner_approval'))
    OR (NEW.state = 'rejected' AND OLD.state IN ('waiting') AND OLD.waiting_on IN ('owner_approval'))
    OR (NEW.state = 'routed' AND OLD.state IN ('approval'))
    OR (NEW.state = 'cancelled' AND OLD.state IN ('accepted', 'requested', 'routed', 'waiting', 'working')))
    AND NEW.actor IS DISTINCT FROM (SELECT value FROM meta WHERE key = 'owner')
    AND NOT (NEW.state = 'cancelled' AND coalesce((SELECT value FROM policy WHERE key = 'mode'), 'personal') = 'team' AND strpos(NEW.actor, '/') > 0 AND (CASE WHEN strpos(NEW.actor, '/') > 0 THEN substr(NEW.actor, 1, strpos(NEW.actor, '/') - 1) ELSE '' END) = (CASE WHEN strpos(OLD.requester, '/') > 0 THEN substr(OLD.requester, 1, strpos(OLD.requester, '/') - 1) ELSE '' END) AND (CASE WHEN strpos(OLD.requester, '/') > 0 THEN substr(OLD.requester, 1, strpos(OLD.requester, '/') - 1) ELSE '' END) IS DISTINCT FROM (SELECT value FROM meta WHERE key = 'owner')) THEN
    IF OLD.state NOT IN ('approval') THEN
        RAISE EXCEPTION 'forbidden_right:not_owner';
    ELSIF NOT EXISTS (SELECT 1 FROM confirmations c JOIN results r ON r.task = c.task AND r.version = c.version WHERE c.task = NEW.number AND c.reviewer = NEW.actor AND c.verdict = 'reject' AND c.counted <> 0) THEN
        RAISE EXCEPTION 'forbidden_right:not_decided';
    END IF;
    END IF;
    RETURN NEW;
END $$;
CREATE TRIGGER hl009_task_decided_by BEFORE UPDATE OF state ON tasks FOR EACH ROW EXECUTE FUNCTION hl009_task_decided_by();

CREATE FUNCTION hl010_task_holder_enrolled() RETURNS trigger LANGUAGE plpgsql SET search_path FROM CURRENT AS $$
BEGIN
    IF OLD.lease_id IS NOT NULL AND NEW.state IS DISTINCT FROM OLD.state AND NEW.state IN ('verifying', 'waiting', 'working') AND OLD.lease_scope IS DISTINCT FROM (SELECT seq FROM enrolments WHERE agent = OLD.lease_holder) THEN
    IF EXISTS (SELECT 1 FROM enrolments WHERE agent = OLD.lease_holder AND active = 0) THEN
        RAISE EXCEPTION 'invalid_state:optin_inactive';
    ELSIF TRUE THEN
        RAISE EXCEPTION 'invalid_state:optin_changed';
    END IF;
    END IF;
    RETURN NEW;
END $$;
CREATE TRIGGER hl010_task_holder_enrolled BEFORE UPDATE OF state ON tasks FOR EACH ROW EXECUTE FUNCTION hl010_task_holder_enrolled();

CREATE FUNCTION hl011_task_lease_enrolled() RETURNS trigger LANGUAGE plpgsql SET search_path FROM CURRENT AS $$
BEGIN
    IF NEW.lease_id IS NOT NULL AND (NEW.lease_id IS DISTINCT FROM OLD.lease_id OR NEW.lease_scope IS DISTINCT FROM OLD.lease_scope) THEN
    IF NEW.lease_id IS NOT DISTINCT FROM OLD.lease_id THEN
        RAISE EXCEPTION 'invalid_input:immutable_field';
    ELSIF EXISTS (SELECT 1 FROM enrolments e WHERE e.agent = NEW.lease_holder AND e.active = 0) THEN
        RAISE EXCEPTION 'invalid_state:optin_inactive';
    ELSIF NEW.lease_scope IS DISTINCT FROM (SELECT seq FROM enrolments WHERE agent = NEW.lease_holder) THEN
        RAISE EXCEPTION 'invalid_state:optin_changed';
    ELSIF EXISTS (SELECT 1 FROM enrolments e WHERE e.agent = NEW.lease_holder AND (NOT 'tasks.work' = ANY(string_to_array(e.rights, ',')) OR (jsonb_array_length(hl_json(e.projects)) > 0 AND NOT EXISTS (SELECT 1 FROM jsonb_array_elements_text(hl_json(e.projects)) p WHERE p = NEW.project)))) THEN
        RAISE EXCEPTION 'forbidden_right:optin_scope';
    ELSIF NEW.role IS NOT NULL AND NOT EXISTS (SELECT 1 FROM enrolments e WHERE e.agent = NEW.lease_holder AND EXISTS (SELECT 1 FROM jsonb_array_elements_text(hl_json(e.roles)) r WHERE r = NEW.role)) THEN
        RAISE EXCEPTION 'forbidden_right:not_permitted';
    END IF;
    END IF;
    RETURN NEW;
END $$;
CREATE TRIGGER hl011_task_lease_enrolled BEFORE UPDATE OF lease_id, lease_scope ON tasks FOR EACH ROW EXECUTE FUNCTION hl011_task_lease_enrolled();

CREATE FUNCTION hl012_enrolments_replaced() RETURNS trigger LANGUAGE plpgsql SET search_path FROM CURRENT AS $$
BEGIN
    IF NOT EXISTS (SELECT 1 FROM (SELECT seq, actor, reason, hl_json(detail) AS detail FROM journal ORDER BY seq DESC LIMIT 1) j WHERE j.seq > OLD.seq AND j.reason = 'enrolment' AND j.detail ->> 'agent' = OLD.agent) THEN
        RAISE EXCEPTION 'forbidden_right:enrolment_not_journaled';
    END IF;
    RETURN OLD;
END $$;
CREATE TRIGGER hl012_enrolments_replaced BEFORE DELETE ON enrolments FOR EACH ROW EXECUTE FUNCTION hl012_enrolments_replaced();

CREATE FUNCTION hl013_enrolments_no_update() RETURNS trigger LANGUAGE plpgsql SET search_path FROM CURRENT AS $$
BEGIN
    RAISE EXCEPTION 'forbidden_right:append_only';
    RETURN NEW;
END $$;
CREATE TRIGGER hl013_enrolments_no_update BEFORE UPDATE ON enrolments FOR EACH ROW EXECUTE FUNCTION hl013_enrolments_no_update();

CREATE FUNCTION hl014_enrolments_journaled() RETURNS trigger LANGUAGE plpgsql SET search_path FROM CURRENT AS $$
BEGIN
    IF NOT EXISTS (SELECT 1 FROM (SELECT seq, actor, reason, hl_json(detail) AS detail FROM journal ORDER BY seq DESC LIMIT 1) j WHERE j.seq = NEW.seq AND j.reason = 'enrolment' AND j.actor IS NOT DISTINCT FROM NEW."by" AND j.detail ->> 'agent' = NEW.agent AND j.detail -> 'projects' = hl_json(NEW.projects) AND j.detail -> 'roles' = hl_json(NEW.roles) AND j.detail ->> 'rights' = NEW.rights AND j.detail ->> 'active' = NEW.active::text) THEN
        RAISE EXCEPTION 'forbidden_right:enrolment_not_journaled';
    END IF;
    RETURN NEW;
END $$;
CREATE TRIGGER hl014_enrolments_journaled BEFORE INSERT ON enrolments FOR EACH ROW EXECUTE FUNCTION hl014_enrolments_journaled();

CREATE FUNCTION hl015_enrolments_shape() RETURNS trigger LANGUAGE plpgsql SET search_path FROM CURRENT AS $$
BEGIN
    IF NEW.active NOT IN (0, 1) OR NEW.rights = '' OR NOT (jsonb_typeof(hl_json(NEW.projects)) = 'array' AND NOT EXISTS (SELECT 1 FROM jsonb_array_elements(hl_json(NEW.projects)) v WHERE jsonb_typeof(v) <> 'string' OR NOT (v #>> '{}') ~ '^[a-z0-9][a-z0-9-]{0,38}$')) OR NOT (jsonb_typeof(hl_json(NEW.roles)) = 'array' AND NOT EXISTS (SELECT 1 FROM jsonb_array_elements(hl_json(NEW.roles)) v WHERE jsonb_typeof(v) <> 'string' OR NOT (v #>> '{}') ~ '^[a-z][a-z0-9-]{0,63}$')) OR NOT string_to_array(NEW.rights, ',') <@ ARRAY['tasks.propose', 'tasks.work']::text[] THEN
        RAISE EXCEPTION 'invalid_input:invalid_enrolment';
    END IF;
    RETURN NEW;
END $$;
CREATE TRIGGER hl015_enrolments_shape BEFORE INSERT ON enrolments FOR EACH ROW EXECUTE FUNCTION hl015_enrolments_shape();

CREATE FUNCTION hl016_enrolments_by_owner() RETURNS trigger LANGUAGE plpgsql SET search_path FROM CURRENT AS $$
BEGIN
    IF NEW."by" IS DISTINCT FROM (SELECT value FROM meta WHERE key = 'owner') THEN
        RAISE EXCEPTION 'forbidden_right:not_owner';
    END IF;
    RETURN NEW;
END $$;
CREATE TRIGGER hl016_enrolments_by_owner BEFORE INSERT ON enrolments FOR EACH ROW EXECUTE FUNCTION hl016_enrolments_by_owner();

CREATE FUNCTION hl017_task_role_fixed() RETURNS trigger LANGUAGE plpgsql SET search_path FROM CURRENT AS $$
BEGIN
    IF NEW.role IS DISTINCT FROM OLD.role THEN
        RAISE EXCEPTION 'invalid_input:immutable_field';
    END IF;
    RETURN NEW;
END $$;
CREATE TRIGGER hl017_task_role_fixed BEFORE UPDATE OF role ON tasks FOR EACH ROW EXECUTE FUNCTION hl017_task_role_fixed();

CREATE FUNCTION hl018_task_role() RETURNS trigger LANGUAGE plpgsql SET search_path FROM CURRENT AS $$
BEGIN
    IF NEW.role IS NOT NULL AND NEW.role !~ '^[a-z][a-z0-9-]{0,63}$' THEN
        RAISE EXCEPTION 'invalid_input:invalid_role';
    END IF;
    RETURN NEW;
END $$;
CREATE TRIGGER hl018_task_role BEFORE INSERT ON tasks FOR EACH ROW EXECUTE FUNCTION hl018_task_role();

CREATE FUNCTION hl111_enrolments_no_truncate() RETURNS trigger LANGUAGE plpgsql SET search_path FROM CURRENT AS $$
BEGIN
    RAISE EXCEPTION 'forbidden_right:append_only';
    RETURN NULL;
END $$;
CREATE TRIGGER hl111_enrolments_no_truncate BEFORE TRUNCATE ON enrolments FOR EACH STATEMENT EXECUTE FUNCTION hl111_enrolments_no_truncate();
