-- Migration 22 (frozen once released): the last tables that decide are held by the store
-- (issue 48). A day's count of an agent's claims starts from the journal and only grows by
-- one a claim (schema.KEPT_COUNTS); a watch is made unanswered, never handed to another
-- caller or token, moved or extended, and an answer or a cancel once kept stays; a watch's
-- seal under the owner's key shows the rest (schema.KEPT_WATCHES).
-- A day's count of an agent's claims (migration 22) starts from the journal and grows by
-- one a claim: a count set lower lets a budgeted agent claim past its daily budget. A row
-- starts a day with the claims the journal holds since that day began; on the same day it
-- only ever grows by one. Removing a row loses nothing: the next claim counts the journal.
CREATE TRIGGER claim_counts_started BEFORE INSERT ON claim_counts
WHEN NEW.claims IS NOT (SELECT count(*) FROM journal WHERE actor = NEW.agent
                        AND at >= NEW.day AND from_state = 'routed' AND to_state = 'accepted')
BEGIN SELECT RAISE(ABORT, 'forbidden_right:count_forged'); END;

CREATE TRIGGER claim_counts_grown BEFORE UPDATE ON claim_counts
WHEN NEW.agent IS NOT OLD.agent
    OR (NEW.day IS OLD.day AND NEW.claims IS NOT OLD.claims + 1)
    OR (NEW.day IS NOT OLD.day AND NEW.claims IS NOT (
        SELECT count(*) FROM journal WHERE actor = NEW.agent AND at >= NEW.day
        AND from_state = 'routed' AND to_state = 'accepted'))
BEGIN SELECT RAISE(ABORT, 'forbidden_right:count_forged'); END;

-- A watch (migration 22) is made unanswered and never handed on: its caller, token, task,
-- question and expiry stay as made, an answer or a cancel once kept stays; its seal, under
-- the owner's key, shows an answer or a watch written outside hivelite.
ALTER TABLE watches ADD COLUMN seal TEXT;

CREATE TRIGGER watches_made BEFORE INSERT ON watches
WHEN NEW.answer IS NOT NULL OR NEW.cancelled_at IS NOT NULL
BEGIN SELECT RAISE(ABORT, 'forbidden_right:watch_kept'); END;

CREATE TRIGGER watches_kept BEFORE UPDATE ON watches
WHEN NEW.id IS NOT OLD.id OR NEW.caller IS NOT OLD.caller OR NEW.token IS NOT OLD.token
    OR NEW.verb IS NOT OLD.verb OR NEW.asked IS NOT OLD.asked
    OR NEW.created_at IS NOT OLD.created_at OR NEW.expires_at IS NOT OLD.expires_at
    OR NEW.poll_ms IS NOT OLD.poll_ms
    OR (OLD.number IS NOT NULL AND NEW.number IS NOT OLD.number)
    OR (OLD.answer IS NOT NULL AND NEW.answer IS NOT OLD.answer)
    OR (OLD.cancelled_at IS NOT NULL AND NEW.cancelled_at IS NOT OLD.cancelled_at)
BEGIN SELECT RAISE(ABORT, 'forbidden_right:watch_kept'); END;
