-- Migration 10: task_board leads with the task's number and leaves out its 26-character
-- id, the widest column in the tools that show the view (frozen: never edit).
DROP VIEW task_board;
CREATE VIEW task_board AS
SELECT t.number,
       CASE WHEN json_valid(p.body) THEN json_extract(p.body, '$.task') END AS title,
       t.state, t.waiting_on, t.assignee, t.requester, t.project, t.priority, t.labels,
       t.lease_holder AS holder, t.lease_instance AS instance,
       t.lease_expires AS claim_expires, t.created_at, t.updated_at
FROM tasks t JOIN packets p ON p.task = t.number;
