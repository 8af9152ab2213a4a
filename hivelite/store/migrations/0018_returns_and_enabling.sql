-- Migration 18 (frozen once released): every result that comes back counts an attempt
-- (a failed outcome, evidence refused, a verifier's reject, the owner's decline), so a
-- result sent back at once can no longer hand the same task to a worker for ever
-- (schema.ATTEMPT_COUNTED says why), and the counts of tasks made before it
-- (schema.RETURNS_BACKFILL). And installing a plugin no longer enables it: the policy holds
-- the plugins the owner enabled on the store (schema.policy_values_sql), and a store made
-- before is marked for the notice its first open gives (schema.PLUGINS_NOTICE).
DROP TRIGGER task_attempt_failed;
CREATE TRIGGER task_attempt_failed AFTER UPDATE OF state ON tasks
WHEN OLD.state IN ('verifying', 'approval') AND NEW.state = 'routed'
BEGIN
    UPDATE tasks SET attempts = attempts + 1 WHERE number = NEW.number;
END;

UPDATE tasks SET attempts = max(attempts, (
    SELECT count(*) FROM journal j WHERE j.task = tasks.number
      AND j.from_state IN ('verifying', 'approval') AND j.to_state = 'routed'))
WHERE state NOT IN ('cancelled', 'completed', 'rejected');
UPDATE tasks SET attempt_limit = attempts + 1, fields_version = fields_version + 1
WHERE state NOT IN ('cancelled', 'completed', 'rejected') AND attempts >= attempt_limit
  AND attempt_limit > (SELECT count(*) FROM journal j WHERE j.task = tasks.number
      AND j.from_state = 'verifying' AND j.to_state = 'routed'
      AND json_extract(CASE WHEN json_valid(j.detail) THEN j.detail END, '$.outcome')
          = 'failed');
DROP TRIGGER policy_values;
CREATE TRIGGER policy_values BEFORE INSERT ON policy
WHEN NOT (
    (NEW.key = 'mode' AND NEW.value IN ('personal', 'team'))
    OR (NEW.key = 'proposals' AND NEW.value IN ('gate', 'owner'))
    OR (NEW.key = 'timezone' AND length(NEW.value) BETWEEN 1 AND 64)
    OR ((NEW.key = 'threshold' OR (NEW.key GLOB 'threshold:?*'
                                   AND length(NEW.key) <= 80))
        AND NEW.value GLOB '[0-9]*' AND NEW.value NOT GLOB '*[^0-9]*'
        AND length(NEW.value) <= 4 AND CAST(NEW.value AS INTEGER) <= 1000)
    OR (NEW.key GLOB 'plugin:?*' AND NEW.key NOT GLOB 'plugin:*[^A-Za-z0-9_.-]*'
        AND length(NEW.key) <= 71 AND NEW.value = 'enabled')
    OR (NEW.key = 'plugins_notice' AND NEW.value = 'due'))
BEGIN SELECT RAISE(ABORT, 'invalid_input:invalid_policy'); END;
INSERT INTO policy(key, value, at, by)
SELECT 'plugins_notice', 'due', strftime('%Y-%m-%dT%H:%M:%fZ', 'now'), value
FROM meta WHERE key = 'owner';
