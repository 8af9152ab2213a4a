-- Migration 2: a task's history reads its journal rows by task, not by scanning the journal.
CREATE INDEX journal_by_task ON journal(task, seq);
