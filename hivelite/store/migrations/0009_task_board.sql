-- Migration 9: the task_board view for other tools on the file (frozen: never edit).
-- One row per task with its title, state, parties and claim holder; no lease id and
-- no fencing token. A view is read, never written.
CREATE VIEW task_board AS
SELECT t.number, t.id,
       CASE WHEN json_valid(p.body) THEN json_extract(p.body, '$.task') END AS title,
       t.state, t.waiting_on, t.assignee, t.requester, t.project, t.priority, t.labels,
       t.lease_holder AS holder, t.lease_instance AS instance,
       t.lease_expires AS claim_expires, t.created_at, t.updated_at
FROM tasks t JOIN packets p ON p.task = t.number;
