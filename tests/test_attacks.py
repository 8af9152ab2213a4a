"""Raw SQL against a real store, on both engines: one list of cases, each run on SQLite and
on PostgreSQL unless marked for one engine (issue 30, part 7).

Each case runs through a plain connection with no hivelite in between (on SQLite, no
``recursive_triggers``; on PostgreSQL, the store's schema on the ``search_path``) against
one store the library made (``attacks.made_by_the_library``) plus tasks raw SQL walked
into every state (``attacks.made_by_raw_sql``), inside a transaction rolled back after
it. A refusal names the same ``code:reason`` on both engines, the library reports it as
its own error, and every row is as it was; a write the rules allow stands, and leaves
what ``then`` says. The same text runs on both engines unless the dialect forces one of
its own (``REPLACE`` against ``ON CONFLICT``, ``DROP TRIGGER`` against ``DISABLE
TRIGGER``); what only one engine has (``REPLACE``, ``TRUNCATE``, ``search_path``) is a
case of that engine alone. ``docs/decisions.md`` says how the suite is organised.
"""

from __future__ import annotations

import itertools
import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from hivelite import Caller, ForbiddenRight, Hive, InvalidInput, InvalidState, ManualClock
from hivelite.core.protocol import (
    MAX_USAGE,
    MOVES,
    MOVES_BY_PAIR,
    TERMINAL,
    State,
    WaitingOn,
    find_move,
)
from hivelite.store.schema import OWNER_DECIDES

from . import pg
from .attacks import (
    AT,
    CLAIMED_BY_CODER,
    ENGINES,
    EVIDENCE,
    POSTGRES,
    SQLITE,
    Case,
    Raw,
    Run,
    Sql,
    Stores,
    case,
    columns,
    literal,
    params,
)
from .conftest import CODER, GUEST, OWNER, REVIEWER, START, held_task, own_task

NOW = "2026-12-02T09:00:00.000Z"
LATER = "2026-12-02T10:00:00.000Z"
TESTER = Caller.agent("ana/tester", "tablet")


def event(task: str, values: str, columns: str) -> dict[str, str]:
    """A raw journal row about ``task`` (SQL), one text per engine: on SQLite it links to
    the task's head, as the store requires of a row about a task (migration 13)."""
    return {"sqlite": f"INSERT INTO journal(task, {columns}, prev) VALUES ({task}, {values},"
                      f" (SELECT last_seq FROM tasks WHERE number = {task}))",
            "postgres": f"INSERT INTO journal(task, {columns}) VALUES ({task}, {values})"}


@pytest.fixture(scope="module")
def stores(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Stores]:
    made = Stores(tmp_path_factory.mktemp("attacked"))
    yield made
    made.close()


def run(stores: Stores, engine: str, c: Case) -> None:
    raw, numbers = stores(engine)
    Run(raw, numbers)(c)


def newest(task: str, what: str) -> str:
    """The query of one value (a column, or a row as text) of ``task``'s newest journal
    row."""
    return f"SELECT {what} FROM journal WHERE task = {{{task}}} ORDER BY seq DESC LIMIT 1"


def state_of(task: str) -> str:
    return f"SELECT state FROM tasks WHERE number = {{{task}}}"


# -- the journal is append-only ---------------------------------------------------------

JOURNAL = [
    case("journal row rewritten", "UPDATE journal SET reason = 'rewritten' WHERE seq = 1",
         "forbidden_right:append_only"),
    case("journal rows moved on", "UPDATE journal SET to_state = 'completed'",
         "forbidden_right:append_only"),
    case("journal row renumbered", "UPDATE journal SET seq = seq + 1000 WHERE seq = 2",
         "forbidden_right:append_only"),
    case("journal actor rewritten", "UPDATE journal SET actor = 'x'",
         "forbidden_right:append_only"),
    case("journal row deleted", "DELETE FROM journal WHERE seq = 1",
         "forbidden_right:append_only"),
    case("journal wiped", "DELETE FROM journal", "forbidden_right:append_only"),
    case("journal row forged: a move the task did not make",
         "INSERT INTO journal(task, at, actor, from_state, to_state)"
         " VALUES ({routed}, '" + NOW + "', 'ana', 'routed', 'completed')",
         "forbidden_right:journal_forged"),
    case("journal row forged: a closed task reopened",
         "INSERT INTO journal(task, at, actor, from_state, to_state)"
         " VALUES ({completed}, '" + NOW + "', 'raw', 'completed', 'cancelled')",
         "forbidden_right:journal_forged"),
    case("journal row forged: a move to where the task is not",
         "INSERT INTO journal(task, at, actor, from_state, to_state)"
         " VALUES ({completed}, '" + NOW + "', 'raw', 'routed', 'completed')",
         "forbidden_right:journal_forged"),
    case("journal row forged over a kept seq",
         "INSERT INTO journal(seq, task, at, actor, from_state, to_state)"
         " VALUES (1, {routed}, '" + NOW + "', 'ana', 'routed', 'completed')",
         "forbidden_right:rows_are_kept"),
    case("an event that moves nothing stands",
         event("{completed}", "'" + NOW + "', 'raw', 'completed', 'completed'",
               "at, actor, from_state, to_state"), None,
         then=[(newest("completed", "actor"), "raw")]),
]

# -- tasks are kept, and born requested -----------------------------------------------

INSERT = ("INSERT INTO tasks(number, id, state, waiting_on, lease_id, lease_token, project,"
          " requester, assignee, created_at, updated_at) VALUES ((SELECT max(number) + 1"
          " FROM tasks), 't-new', {state}, {waiting}, {lease}, {token}, 'demo', 'ana/planner',"
          " 'ana/coder', '" + NOW + "', '" + NOW + "')")


def inserted(state: str, waiting: str = "NULL", lease: str = "NULL", token: int = 0) -> str:
    return INSERT.format(state=f"'{state}'", waiting=waiting, lease=lease, token=token)


BIRTH = [
    *(case(f"task deleted in {state}", f"DELETE FROM tasks WHERE number = {{r_{state}}}",
           "forbidden_right:tasks_are_kept")
      for state in ("requested", "working", "completed", "cancelled")),
    case("every task deleted", "DELETE FROM tasks", "forbidden_right:tasks_are_kept"),
    *(case(f"task born {s.value}",
           inserted(s.value, "'human'" if s is State.waiting else "NULL"),
           "invalid_state:insert_not_requested")
      for s in State if s is not State.requested),
    *(case(f"task born requested waiting on {w}", inserted("requested", f"'{w}'"),
           "invalid_state:insert_not_requested")
      for w in ("owner_approval", "human", "agent")),
    case("task born with a lease", inserted("requested", lease="'lease-1'", token=1),
         "invalid_state:insert_not_requested"),
    case("task born twice, by its number",
         "INSERT INTO tasks(number, id, state, project, requester, assignee, created_at,"
         " updated_at) VALUES ({routed}, 't-new', 'requested', 'demo', 'ana/planner',"
         " 'ana/coder', '" + NOW + "', '" + NOW + "')", "forbidden_right:rows_are_kept"),
    case("a task born requested is journaled as created",
         "INSERT INTO tasks(number, id, state, project, requester, assignee, created_at,"
         " updated_at, actor, reason, detail) VALUES ((SELECT max(number) + 1 FROM tasks),"
         " 't-new', 'requested', 'demo', 'ana/planner', 'ana/coder', '" + NOW + "', '"
         + LATER + "', 'ana/planner', 'handoff', '{{\"k\":1}}')", None,
         then=[("SELECT count(*) FROM journal WHERE task = (SELECT number FROM tasks"
                " WHERE id = 't-new')", 1),
               ("SELECT at || ' ' || actor || ' ' || coalesce(from_state, '-') || ' ' ||"
                " to_state || ' ' || coalesce(waiting_on, '-') || ' ' || reason || ' ' ||"
                " detail FROM journal WHERE seq = (SELECT max(seq) FROM journal)",
                f"{NOW} ana/planner - requested - handoff " + '{"k":1}')]),
]

# -- a terminal task is closed to every change ----------------------------------------

TERMINAL_CHANGES = {
    "state back": "state = 'routed'",
    "state to itself": "state = state",
    "state cancelled": "state = 'cancelled'",
    "reason": "reason = 'changed my mind'",
    "priority": "priority = 'high'",
    "labels": "labels = '[\"x\"]'",
    "updated_at": f"updated_at = '{LATER}'",
    "actor": "actor = 'ana'",
    "detail": "detail = '{{}}'",
    "fields_version": "fields_version = fields_version + 1",
    "lease_token": "lease_token = lease_token + 1",
    "lease": "lease_id = 'l9', lease_token = lease_token + 1",
    "waiting_on": "waiting_on = 'human'",
    "assignee": "assignee = 'ana/other'",
    "nothing": "priority = priority",
    "state and token": "state = 'routed', lease_token = 0",
}
CLOSED = [
    case(f"{state} task: {name}", f"UPDATE tasks SET {change} WHERE number = {{r_{state}}}",
         "invalid_state:task_closed")
    for state in ("cancelled", "completed", "rejected")
    for name, change in TERMINAL_CHANGES.items()
]

# -- waiting_on matches state -----------------------------------------------------------

WAITING = [
    *(case(f"waiting on {w} cleared",
           f"UPDATE tasks SET waiting_on = NULL WHERE number = {{r_{w}}}",
           "invalid_state:waiting_on_mismatch")
      for w in ("owner_approval", "human", "agent")),
    *(case(f"waiting_on on a {s} task", f"UPDATE tasks SET waiting_on = 'human' WHERE number ="
           f" {{r_{s}}}", "invalid_state:waiting_on_mismatch")
      for s in ("requested", "routed", "accepted", "working", "verifying", "approval")),
    *(case(f"waiting on {value!r}", f"UPDATE tasks SET waiting_on = '{value}' WHERE number ="
           " {r_human}", "invalid_state:waiting_on_mismatch")
      for value in ("bogus", "", "Human", "owner")),
    case("out of waiting with waiting_on kept",
         "UPDATE tasks SET state = 'working' WHERE number = {r_human}",
         "invalid_state:waiting_on_mismatch"),
    case("into waiting without waiting_on",
         "UPDATE tasks SET state = 'waiting', waiting_on = NULL WHERE number = {r_working}",
         "invalid_state:waiting_on_mismatch"),
    case("into waiting on something unknown",
         "UPDATE tasks SET state = 'waiting', waiting_on = 'bogus' WHERE number = {r_working}",
         "invalid_state:waiting_on_mismatch"),
    # waiting(x) -> waiting(y) is no move: else a paused task could pose as one held for
    # the owner (and be approved), and the journal would no longer replay to waiting_on
    *(case(f"waiting on {start} turned to {value}",
           f"UPDATE tasks SET waiting_on = '{value}' WHERE number = {{r_{start}}}",
           "invalid_state:no_such_move")
      for start, value in (("human", "owner_approval"), ("agent", "owner_approval"),
                           ("owner_approval", "human"), ("human", "agent"))),
]

# -- a result exists from verifying on ----------------------------------------------

WITHOUT_RESULTS = {  # the result of the task gone, its own rule set aside to reach the next
    "sqlite": "DROP TRIGGER results_kept",
    "postgres": "ALTER TABLE results DISABLE TRIGGER USER",
}
RESULTS_BACK = {"sqlite": "SELECT 1", "postgres": "ALTER TABLE results ENABLE TRIGGER USER"}


def without_result(task: str) -> tuple[dict[str, str], str, dict[str, str]]:
    return (WITHOUT_RESULTS, f"DELETE FROM results WHERE task = {{{task}}}", RESULTS_BACK)


RESULTS_EXIST = [
    case("verifying without a result",
         "UPDATE tasks SET state = 'verifying', lease_id = NULL WHERE number = {r_working}",
         "invalid_state:result_missing"),
    case("approval without a result",
         "UPDATE tasks SET state = 'approval' WHERE number = {r_verifying}",
         "invalid_state:result_missing", *without_result("r_verifying")),
    case("completed without a result",
         "UPDATE tasks SET state = 'completed' WHERE number = {r_verifying}",
         "invalid_state:result_missing", *without_result("r_verifying")),
    case("completed from approval without a result",
         "UPDATE tasks SET state = 'completed' WHERE number = {r_approval}",
         "invalid_state:result_missing", *without_result("r_approval")),
    *(case(f"result removed in {s}", f"DELETE FROM results WHERE task = {{r_{s}}}",
           "forbidden_right:results_are_kept") for s in ("verifying", "approval", "completed")),
    case("every result removed", "DELETE FROM results", "forbidden_right:results_are_kept"),
]

# -- fencing tokens and the live lease ----------------------------------------------

RELEASE = ("UPDATE tasks SET state = 'routed', lease_id = NULL WHERE number = {l_accepted}")
RECLAIM = ("UPDATE tasks SET state = 'accepted', lease_id = '{lease}', lease_token = 4, "
           + CLAIMED_BY_CODER + " WHERE number = {{l_accepted}}")
LEASES = [
    *(case(f"token lowered in {s}", f"UPDATE tasks SET lease_token = 2 WHERE number = {{l_{s}}}",
           "invalid_state:fencing_token") for s in ("accepted", "working")),
    *(case(f"token zeroed with the lease in {s}", "UPDATE tasks SET lease_token = 0,"
           f" lease_id = NULL WHERE number = {{l_{s}}}", "invalid_state:fencing_token")
      for s in ("accepted", "working")),
    case("token of a claimed task zeroed",
         "UPDATE tasks SET lease_token = 0 WHERE number = {claimed}",
         "invalid_state:fencing_token"),
    *(case(f"new lease at token {t}", f"UPDATE tasks SET lease_id = 'l2', lease_token = {t}"
           " WHERE number = {l_accepted}", "invalid_state:fencing_token") for t in (3, 2, 0)),
    *(case(f"lease {lease} again after no lease at the same token",
           RECLAIM.format(lease=lease), "invalid_state:fencing_token",
           RELEASE, RECLAIM.format(lease="l3"), RELEASE) for lease in ("l3", "l4")),
    case("live lease replaced by a higher token",
         "UPDATE tasks SET lease_id = 'l2', lease_token = 4 WHERE number = {l_accepted}",
         "forbidden_right:lease_by_claim_only"),
    *(case(f"live lease's {column} changed", f"UPDATE tasks SET {column} = {value}"
           " WHERE number = {l_accepted}", "forbidden_right:lease_by_claim_only")
      for column, value in (("lease_holder", "'ana/thief'"), ("lease_instance", "'elsewhere'"),
                            ("lease_session", "'s9'"))),
    *(case(f"claimed task's {name}", f"UPDATE tasks SET {change} WHERE number = {{claimed}}",
           "forbidden_right:lease_by_claim_only")
      for name, change in (("holder", "lease_holder = 'ana/thief'"),
                           ("instance", "lease_instance = 'elsewhere'"),
                           ("lease forged", "lease_id = 'Lforged', lease_token = lease_token + 1"),
                           ("token skipped", "lease_token = lease_token + 5"))),
    *(case(f"lease on a {name} task", "UPDATE tasks SET lease_id = 'l1', lease_token ="
           f" lease_token + 1 WHERE number = {{r_{name}}}", "invalid_state:claim_outlives_state")
      for name in ("requested", "routed", "human", "verifying", "approval")),
    case("a claimed state without a lease",
         "UPDATE tasks SET state = 'accepted' WHERE number = {routed}",
         "invalid_state:claim_missing"),
    *(case(f"lease expiring {expires}", f"UPDATE tasks SET lease_expires = '{expires}'"
           " WHERE number = {claimed}", "invalid_input:lease_length")
      for expires in ("9999-12-31T23:59:59.999Z", "2026-12-02T09:16:00.000Z",
                      "2026-12-02T09:04:00.000Z", "2026-12-02T08:00:00.000Z",
                      "2026-12-03T09:00:00.000Z")),
]
FROM_CLAIM = {  # (leased task, target, waiting_on)
    "accepted to routed": ("l_accepted", "routed", "NULL"),
    "working to routed": ("l_working", "routed", "NULL"),
    "working to waiting": ("l_working", "waiting", "'human'"),
    "working to verifying": ("l_working", "verifying", "NULL"),
}
SUBMITTED = ("INSERT INTO results(task, body, worker, instance) VALUES ({{{task}}}, '{{{{}}}}',"
             " 'ana/coder', 'laptop')")
for _name, (_task, _target, _waiting) in FROM_CLAIM.items():
    LEASES += [
        case(f"{_name} keeping the lease", f"UPDATE tasks SET state = '{_target}', waiting_on ="
             f" {_waiting} WHERE number = {{{_task}}}", "invalid_state:claim_outlives_state",
             SUBMITTED.format(task=_task)),
        case(f"{_name} ending the lease", f"UPDATE tasks SET state = '{_target}', waiting_on ="
             f" {_waiting}, lease_id = NULL WHERE number = {{{_task}}}", None,
             SUBMITTED.format(task=_task), then=[(state_of(_task), _target)]),
    ]
TAKE = ("UPDATE tasks SET state = 'accepted', lease_id = 'L2', lease_token = {token},"
        " lease_holder = '{holder}', lease_instance = 'laptop', updated_at = '" + NOW + "',"
        " lease_expires = '2026-12-02T09:10:00.000Z' WHERE number = {{claimed}}")
GIVEN_BACK = ("UPDATE tasks SET state = 'routed', lease_id = NULL, lease_holder = NULL,"
              " lease_instance = NULL, lease_expires = NULL WHERE number = {claimed}")
LEASES += [
    case("claim by someone not the assignee", TAKE.format(token=2, holder="ana/thief"),
         "forbidden_right:lease_by_claim_only", GIVEN_BACK),
    case("claim skipping a token", TAKE.format(token=5, holder="ana/coder"),
         "forbidden_right:lease_by_claim_only", GIVEN_BACK),
    case("claim by a guest on a task never claimed",
         "UPDATE tasks SET state = 'accepted', lease_id = 'Lx', lease_token = 1,"
         " lease_holder = 'guest/scout', lease_instance = 'x', lease_expires ="
         " '2026-12-02T09:10:00.000Z', updated_at = '" + NOW + "' WHERE number = {routed}",
         "forbidden_right:lease_by_claim_only"),
    case("a real claim stands", TAKE.format(token=2, holder="ana/coder"), None, GIVEN_BACK,
         then=[("SELECT lease_holder FROM tasks WHERE number = {claimed}", "ana/coder")]),
]

# -- the task's own columns ---------------------------------------------------------

IMMUTABLE = {
    "id": "'other-id'", "number": "number + 1000", "requester": "'bob/planner'",
    "assignee": "'bob/coder'", "project": "'elsewhere'", "created_at": f"'{LATER}'",
}
COLUMNS = [
    *(case(f"{column} changed in {s}", f"UPDATE tasks SET {column} = {value}"
           f" WHERE number = {{r_{s}}}", "invalid_input:immutable_field")
      for s in ("requested", "working") for column, value in IMMUTABLE.items()),
    case("assignee of a library task changed",
         "UPDATE tasks SET assignee = 'guest/scout' WHERE number = {routed}",
         "invalid_input:immutable_field"),
    case("the fields change, and write no journal row",
         "UPDATE tasks SET priority = 'high', labels = '[\"a\"]', updated_at = '" + LATER
         + "', fields_version = 2 WHERE number = {r_working}", None,
         then=[("SELECT priority || labels || fields_version FROM tasks"
                " WHERE number = {r_working}", 'high["a"]2'),
               ("SELECT count(*) FROM journal WHERE task = {r_working}", 4)]),
    case("a note on a task writes no journal row",
         "UPDATE tasks SET reason = 'note', actor = 'ana' WHERE number = {r_routed}", None,
         then=[("SELECT count(*) FROM journal WHERE task = {r_routed}", 2)]),
    case("a raw claim is journaled once",
         "UPDATE tasks SET state = 'accepted', updated_at = '" + LATER + "', actor ="
         " 'ana/coder', reason = 'claimed', detail = '{{\"token\": 1}}', lease_id = 'l1',"
         " lease_token = 1, lease_holder = 'ana/coder', lease_instance = 'laptop',"
         " lease_expires = '2026-12-02T10:10:00.000Z' WHERE number = {r_routed}", None,
         then=[("SELECT count(*) FROM journal WHERE task = {r_routed}", 3),
               (newest("r_routed", "at || ' ' || actor || ' ' || from_state || ' ' || to_state"
                       " || ' ' || coalesce(waiting_on, '-') || ' ' || reason || ' ' || detail"),
                f"{LATER} ana/coder routed accepted - claimed " + '{"token": 1}')]),
    case("a pause is journaled with its waiting_on",
         "UPDATE tasks SET state = 'waiting', waiting_on = 'agent', actor = 'ana/coder',"
         " reason = 'asked ana/reviewer', lease_id = NULL WHERE number = {r_working}", None,
         then=[(newest("r_working", "actor || ' ' || from_state || ' ' || to_state || ' ' ||"
                       " waiting_on || ' ' || reason"),
                "ana/coder working waiting agent asked ana/reviewer")]),
    case("priority unknown", "UPDATE tasks SET priority = 'asap', fields_version ="
         " fields_version + 1 WHERE number = {routed}", "invalid_input:invalid_priority"),
    case("labels changed without a new fields version",
         "UPDATE tasks SET labels = '[\"x\"]' WHERE number = {routed}",
         "invalid_state:stale_base"),
]

# -- the moves table is fixed ---------------------------------------------------------

MOVES_TABLE = [
    case("move added", "INSERT INTO moves(number, name, from_state, to_state)"
         " VALUES (23, 'shortcut', 'requested', 'completed')", "forbidden_right:protocol_fixed"),
    case("move added with every column",
         "INSERT INTO moves VALUES (99, 'shortcut', 'routed', NULL, 'completed', NULL)",
         "forbidden_right:protocol_fixed"),
    case("move retargeted", "UPDATE moves SET to_state = 'completed' WHERE number = 1",
         "forbidden_right:protocol_fixed"),
    case("move's waiting_on widened", "UPDATE moves SET from_waiting = NULL WHERE number = 4",
         "forbidden_right:protocol_fixed"),
    case("move deleted", "DELETE FROM moves WHERE number = 22",
         "forbidden_right:protocol_fixed"),
    case("every move deleted", "DELETE FROM moves", "forbidden_right:protocol_fixed"),
    case("a move the table lacks", "UPDATE tasks SET state = 'completed' WHERE number = {routed}",
         "invalid_state:no_such_move"),
    case("a temporary moves table", "UPDATE tasks SET state = 'completed' WHERE number = {routed}",
         "invalid_state:no_such_move",
         {"sqlite": "CREATE TEMP TABLE moves AS SELECT * FROM main.moves",
          "postgres": "CREATE TEMP TABLE moves AS SELECT * FROM moves"},
         {"sqlite": "INSERT INTO temp.moves VALUES (99, 'x', 'routed', NULL, 'completed', NULL)",
          "postgres": "INSERT INTO pg_temp.moves VALUES (99, 'x', 'routed', NULL, 'completed',"
                      " NULL)"},
         {"sqlite": "CREATE TEMP TABLE results AS SELECT * FROM main.results",
          "postgres": "CREATE TEMP TABLE results AS SELECT * FROM results"},
         {"sqlite": "INSERT INTO temp.results(task, body, worker, instance, threshold)"
                    " VALUES ({routed}, '{{}}', 'ana/coder', 'laptop', 0)",
          "postgres": "INSERT INTO pg_temp.results(task, body, worker, instance, threshold)"
                      " VALUES ({routed}, '{{}}', 'ana/coder', 'laptop', 0)"}),
    case("another schema first on the search_path",
         "UPDATE {schema}.tasks SET state = 'completed' WHERE number = {routed}",
         "invalid_state:no_such_move",
         "CREATE SCHEMA mallory", "CREATE TABLE mallory.moves AS SELECT * FROM moves",
         "INSERT INTO mallory.moves VALUES (99, 'x', 'routed', NULL, 'completed', NULL)",
         "CREATE TABLE mallory.results AS SELECT * FROM results",
         "INSERT INTO mallory.results(task, body, worker, instance, threshold)"
         " VALUES ({routed}, '{{}}', 'ana/coder', 'laptop', 0)",
         "SET LOCAL search_path = mallory, {schema}", engines=POSTGRES),
]

# -- the protocol's moves: every pair of states, and the waiting_on qualifiers ----------

LEGAL = {m.pair for m in MOVES}
WALKED_IN = {None: "", WaitingOn.owner_approval: "r_owner_approval",
             WaitingOn.human: "r_human", WaitingOn.agent: "r_agent"}
LEASED = (State.accepted, State.working)
WITH_RESULT = (State.verifying, State.approval, State.completed)


def moved(source: State, from_waiting: WaitingOn | None, target: State,
          to_waiting: WaitingOn | None) -> Case:
    """The raw UPDATE that moves a walked task from ``source`` to ``target`` as the
    library would (a lease taken on the way into a claim and ended on the way out, the
    owner named for the owner's moves), and what the store makes of it."""
    task = WALKED_IN[from_waiting] or f"r_{source.value}"
    lease = ""
    if target in LEASED and source not in LEASED:
        lease = (", lease_token = lease_token + 1, lease_id = 'Lraw' || (lease_token + 1), "
                 + CLAIMED_BY_CODER)
    elif target not in LEASED:
        lease = (", lease_id = NULL, lease_holder = NULL, lease_instance = NULL,"
                 " lease_session = NULL, lease_expires = NULL")
    decided = any(m.source is source and m.target is target for m in OWNER_DECIDES)
    actor = "(SELECT value FROM meta WHERE key = 'owner')" if decided else "'raw'"
    waiting = f"'{to_waiting.value}'" if to_waiting else "NULL"
    before = ([f"INSERT INTO results(task, body, worker, instance, threshold) VALUES"
               f" ({{{task}}}, '{{{{}}}}', 'ana/coder', 'laptop', 0)"]
              if source is State.working and target in WITH_RESULT else [])
    left = f"{source.value}({from_waiting.value})" if from_waiting else source.value
    right = f"{target.value}({to_waiting.value})" if to_waiting else target.value
    legal = find_move(source, target, from_waiting, to_waiting) is not None
    ends = f"{to_waiting.value if to_waiting else '-'}"
    sql = (f"UPDATE tasks SET state = '{target.value}', waiting_on = {waiting},"
           f" actor = {actor}, reason = 'raw sql'{lease} WHERE number = {{{task}}}")
    if legal:
        return case(f"move {left} -> {right}", sql, None, *before, then=[
            (f"SELECT state || ' ' || coalesce(waiting_on, '-') FROM tasks"
             f" WHERE number = {{{task}}}", f"{target.value} {ends}"),
            (newest(task, "from_state || ' ' || to_state || ' ' || coalesce(waiting_on, '-')"),
             f"{source.value} {target.value} {ends}")])
    reason = "task_closed" if source in TERMINAL else "no_such_move"
    return case(f"move {left} -> {right}", sql, f"invalid_state:{reason}", *before)


def _waiting_of(source: State, target: State) -> tuple[WaitingOn | None, WaitingOn | None]:
    """A ``waiting_on`` for each end: the one the move needs, else ``human``."""
    move = MOVES_BY_PAIR.get((source, target))
    start = end = None
    if source is State.waiting:
        start = move.from_waiting[0] if move and move.from_waiting else WaitingOn.human
    if target is State.waiting:
        end = move.to_waiting[0] if move else WaitingOn.human
    return start, end


PROTOCOL = [moved(s, _waiting_of(s, t)[0], t, _waiting_of(s, t)[1])
            for s, t in itertools.product(State, State)]
assert sum(c.expected is None for c in PROTOCOL) == len(LEGAL) == 22
PROTOCOL += [moved(*q) for q in (
    (State.waiting, WaitingOn.human, State.routed, None),
    (State.waiting, WaitingOn.agent, State.routed, None),
    (State.waiting, WaitingOn.human, State.rejected, None),
    (State.waiting, WaitingOn.agent, State.rejected, None),
    (State.waiting, WaitingOn.owner_approval, State.working, None),
    (State.working, None, State.waiting, WaitingOn.owner_approval),
    (State.requested, None, State.waiting, WaitingOn.human),
    (State.requested, None, State.waiting, WaitingOn.agent),
    (State.waiting, WaitingOn.agent, State.working, None),
    (State.working, None, State.waiting, WaitingOn.agent),
    (State.waiting, WaitingOn.owner_approval, State.cancelled, None),
    (State.waiting, WaitingOn.agent, State.cancelled, None),
)]

# -- kept rows: inserted twice, replaced, upserted ---------------------------------------

KEPT = {  # table: (its rows the attack copies, its key, what refuses them)
    "tasks": ("number = {completed}", "number", "forbidden_right:rows_are_kept"),
    "packets": ("task = {completed}", "task", "forbidden_right:rows_are_kept"),
    "checkpoints": ("task = {completed}", "task", "forbidden_right:rows_are_kept"),
    "results": ("task = {completed}", "task", "forbidden_right:rows_are_kept"),
    "confirmations": ("task = {completed}", "task, version, reviewer",
                      "forbidden_right:rows_are_kept"),
    "updates": ("task = {cancelled}", "seq", "forbidden_right:rows_are_kept"),
    "journal": ("task = {completed}", "seq", "forbidden_right:rows_are_kept"),
    "meta": ("key = 'owner'", "key", "forbidden_right:rows_are_kept"),
    "deps": ("task = {dependant}", "task, on_task", "invalid_input:dependency_fixed"),
    "controls": ("id = {live}", "id", "forbidden_right:rows_are_kept"),
    "tokens": ("agent = 'ana/tester'", "id", "forbidden_right:rows_are_kept"),
    "enrolments": ("agent = 'ana/tester'", "agent", "forbidden_right:enrolment_not_journaled"),
}


def again(table: str, how: str) -> Sql:
    """An insert of ``table``'s existing rows over themselves: ``again`` (a plain INSERT),
    ``replace`` (SQLite's ``INSERT OR REPLACE``, PostgreSQL's ``ON CONFLICT DO UPDATE``),
    ``REPLACE`` (SQLite's), ``ignore`` (``INSERT OR IGNORE``, ``ON CONFLICT DO
    NOTHING``)."""
    where, key, _ = KEPT[table]
    names = ", ".join(f'"{c}"' for c in columns(table))
    rows = f" INTO {table}({names}) SELECT {names} FROM {table} WHERE {where}"
    target = next((c for c in columns(table) if c not in key.split(", ")), key.split(", ")[0])
    return {
        "again": "INSERT" + rows,
        "replace": {"sqlite": "INSERT OR REPLACE" + rows,
                    "postgres": f"INSERT{rows} ON CONFLICT ({key}) DO UPDATE SET"
                                f' "{target}" = excluded."{target}"'},
        "REPLACE": "REPLACE" + rows,
        "ignore": {"sqlite": "INSERT OR IGNORE" + rows,
                   "postgres": f"INSERT{rows} ON CONFLICT DO NOTHING"},
    }[how]


ROWS_KEPT = [
    case("the issue's reproducer: a completed task replaced by a requested one", {
        "sqlite": "INSERT OR REPLACE INTO tasks(number, id, state, project, requester,"
                  " assignee, created_at, updated_at) SELECT number, id, 'requested',"
                  " project, requester, 'ana/thief', created_at, updated_at FROM tasks"
                  " WHERE number = {completed}",
        "postgres": "INSERT INTO tasks(number, id, state, project, requester, assignee,"
                    " created_at, updated_at) SELECT number, id, 'requested', project,"
                    " requester, 'ana/thief', created_at, updated_at FROM tasks"
                    " WHERE number = {completed} ON CONFLICT (number) DO UPDATE SET"
                    " state = 'completed', assignee = excluded.assignee"},
         "forbidden_right:rows_are_kept"),
    *(case(f"{table} row {how}", again(table, how), KEPT[table][2],
           engines=SQLITE if how == "REPLACE" else ENGINES)
      for table in KEPT for how in ("again", "replace", "REPLACE", "ignore")),
    case("the owner replaced", {
        "sqlite": "INSERT OR REPLACE INTO meta(key, value) VALUES ('owner', 'mallory')",
        "postgres": "INSERT INTO meta(key, value) VALUES ('owner', 'mallory')"
                    " ON CONFLICT (key) DO UPDATE SET value = excluded.value"},
         "forbidden_right:rows_are_kept"),
    case("the owner renamed", "UPDATE meta SET value = 'mallory' WHERE key = 'owner'",
         "forbidden_right:owner_fixed"),
    case("the owner deleted", "DELETE FROM meta WHERE key = 'owner'",
         "forbidden_right:owner_fixed"),
    case("the owner's key renamed", "UPDATE meta SET key = 'former-owner' WHERE key = 'owner'",
         "forbidden_right:owner_fixed"),
    case("the store's identity changed", "UPDATE meta SET value = 'x' WHERE key = 'store_id'",
         "forbidden_right:identity_fixed"),
    case("the store's identity renamed", "UPDATE meta SET key = 'x' WHERE key = 'store_id'",
         "forbidden_right:identity_fixed"),
    case("a packet rewritten", "UPDATE packets SET body = '{{}}' WHERE task = {routed}",
         "forbidden_right:packet_fixed"),
    case("a packet deleted", "DELETE FROM packets WHERE task = {routed}",
         "forbidden_right:packet_fixed"),
]
# what only PostgreSQL has: TRUNCATE, which row triggers do not see
TRUNCATED = {
    "meta": "owner_fixed", "moves": "protocol_fixed", "tasks": "tasks_are_kept",
    "packets": "packet_fixed", "checkpoints": "checkpoints_are_kept",
    "results": "results_are_kept", "confirmations": "append_only", "updates": "append_only",
    "journal": "append_only", "deps": "append_only", "policy": "append_only",
    "required_plugins": "append_only", "controls": "controls_kept", "budgets": "append_only",
    "tokens": "tokens_kept", "enrolments": "append_only",
}
ROWS_KEPT += [case(f"{table} truncated", f"TRUNCATE {table} CASCADE", f"forbidden_right:{why}",
                   engines=POSTGRES) for table, why in TRUNCATED.items()]

# -- results, verdicts, side tables ------------------------------------------------------

CONFIRM = ("INSERT INTO confirmations(task, version, reviewer, instance, verdict, at, counted,"
           " why) VALUES ({{{task}}}, {version}, '{reviewer}', '{instance}', 'accept', '"
           + AT + "', {counted}, {why})")


def confirm(reviewer: str, instance: str, *, task: str = "approval", version: int = 1,
            counted: int = 1, why: str | None = None) -> str:
    return CONFIRM.format(task=task, version=version, reviewer=reviewer, instance=instance,
                          counted=counted, why=literal(why))


NOT_INDEPENDENT = "invalid_state:reviewer_not_independent"
TEAM = "INSERT INTO policy(key, value, at, by) VALUES ('mode', 'team', '" + AT + "', 'ana')"
RESULTS = [
    case("a completion no one decided",
         "UPDATE tasks SET state = 'completed' WHERE number = {approval}",
         "forbidden_right:not_decided"),
    case("a completion by the worker",
         "UPDATE tasks SET state = 'completed', actor = 'ana/coder' WHERE number = {approval}",
         "forbidden_right:not_decided"),
    case("a completion naming the owner stands, and the journal says so",
         "UPDATE tasks SET state = 'completed', actor = 'ana', reason = 'raw'"
         " WHERE number = {approval}", None,
         then=[(newest("approval", "actor || ' ' || to_state"), "ana completed")]),
    *(case(f"result's {name} changed", f"UPDATE results SET {change} WHERE task = {{approval}}",
           "forbidden_right:result_fixed")
      for name, change in (
          ("worker", "worker = 'ana/reviewer'"), ("instance", "instance = 'desktop'"),
          ("session", "session = 's9'"), ("threshold", "threshold = 0"),
          ("outcome", "outcome = 'failed'"), ("task", "task = task + 100"),
          ("worker with a new version", "worker = 'ana/reviewer', version = version + 1"),
          ("merge, on an open task", "merge_commit = 'abc1234'"))),
    case("a result by someone not the holder",
         "INSERT INTO results(task, body, worker, instance)"
         " VALUES ({claimed}, '{{}}', 'ana/reviewer', 'desktop')",
         "forbidden_right:result_by_holder_only"),
    case("a result by a guest", "INSERT INTO results(task, body, worker, instance)"
         " VALUES ({claimed}, '{{}}', 'guest/scout', 'x')",
         "forbidden_right:result_by_holder_only"),
    case("a second result by a guest (two rules: SQLite's first)",
         "INSERT INTO results(task, body, worker, instance)"
         " VALUES ({approval}, '{{}}', 'guest/scout', 'x')",
         "forbidden_right:result_by_holder_only"),
    case("a result on a closed task", "INSERT INTO results(task, body, worker, instance)"
         " VALUES ({r_rejected}, '{{}}', 'ana/coder', 'laptop')", "invalid_state:task_closed"),
    case("a completed result rewritten",
         "UPDATE results SET body = '{{\"summary\": \"rewritten\"}}' WHERE task = {completed}",
         "invalid_state:task_closed"),
    case("a completed result's worker changed",
         "UPDATE results SET worker = 'ana/other' WHERE task = {completed}",
         "invalid_state:task_closed"),
    case("a result body changed at its version",
         "UPDATE results SET body = '{{\"summary\": \"swapped\"}}' WHERE task = {approval}",
         "invalid_state:result_version"),
    # verdicts: counted only when independent, on the current version, in approval
    *(case(f"a counted verdict by {reviewer} on {instance!r}, version {version}",
           confirm(reviewer, instance, version=version), NOT_INDEPENDENT)
      for reviewer, instance, version in (
          ("ana/coder", "desktop", 1), ("ana/coder", "laptop", 1), ("ana/other", "laptop", 1),
          ("ana/other", "LAPTOP", 1),
          ("ana/other", "desktop", 7), ("ana/reviewer", "laptop.", 1),
          ("ana/reviewer", " laptop ", 1), ("bob/reviewer", "bobs-box", 1))),
    case("the worker's own verdict, uncounted, stands",
         confirm("ana/coder", "laptop", counted=0, why="the worker's own"), None,
         then=[("SELECT count(*) FROM confirmations WHERE task = {approval}", 1)]),
    case("a stranger's verdict, uncounted, stands",
         confirm("bob/reviewer", "bobs-box", counted=0, why="a stranger"), None),
    *(case(f"a second counted verdict from the reviewer's instance as {instance!r}",
           confirm("ana/other", instance), NOT_INDEPENDENT, confirm("ana/reviewer", "desktop"))
      for instance in ("desktop", "DESKTOP", "desktop.", "Desktop..")),
    case("a counted verdict from another instance stands",
         confirm("ana/second", "tablet"), None, confirm("ana/reviewer", "desktop"),
         then=[("SELECT count(*) FROM confirmations WHERE task = {approval} AND counted = 1",
                2)]),
    case("team: the worker's owner counted", confirm("ana/reviewer", "desktop"),
         NOT_INDEPENDENT, TEAM),
    case("team: another owner counted twice", confirm("bob/second", "bobs-other-box"),
         NOT_INDEPENDENT, TEAM, confirm("bob/reviewer", "bobs-box")),
    case("team: a third owner counted stands", confirm("carol/reviewer", "carols-box"), None,
         TEAM, confirm("bob/reviewer", "bobs-box")),
    case("an uncounted verdict without why", confirm("ana/reviewer", "desktop", counted=0),
         "invalid_input:uncounted_needs_why"),
    case("a counted verdict with a why", confirm("ana/reviewer", "desktop", why="because"),
         "invalid_input:uncounted_needs_why"),
    case("a counted verdict with a why, on a routed task (two rules: SQLite's first)",
         confirm("ana/reviewer", "desktop", task="routed", why="x"),
         "invalid_input:uncounted_needs_why"),
    case("a verdict on a completed task", confirm("ana/x", "phone", task="completed"),
         "invalid_state:not_submitted"),
    case("a verdict on a routed task", confirm("ana/x", "phone", task="routed"),
         "invalid_state:not_submitted"),
    case("verdicts deleted", "DELETE FROM confirmations", "forbidden_right:append_only"),
    case("a verdict uncounted afterwards", "UPDATE confirmations SET counted = 0",
         "forbidden_right:append_only"),
    # updates and checkpoints
    case("updates deleted", "DELETE FROM updates", "forbidden_right:append_only"),
    case("usage rewritten", "UPDATE updates SET tokens = 999999", "forbidden_right:append_only"),
    case("an update on a closed task", "INSERT INTO updates(task, at, actor, summary, tokens)"
         " VALUES ({cancelled}, '" + NOW + "', 'ana/coder', 'late', 999999)",
         "invalid_state:task_closed"),
    case("a closed task's checkpoint rewritten",
         "UPDATE checkpoints SET body = '{{}}' WHERE task = {cancelled}",
         "invalid_state:task_closed"),
    case("a checkpoint on a closed task",
         "INSERT INTO checkpoints(task, body) VALUES ({r_completed}, '{{}}')",
         "invalid_state:task_closed"),
    case("checkpoints deleted", "DELETE FROM checkpoints",
         "forbidden_right:checkpoints_are_kept"),
    case("checkpoints moved to other tasks", "UPDATE checkpoints SET task = task + 100",
         "forbidden_right:rows_are_kept"),
    case("a closed task's checkpoint moved (two rules: SQLite's first)",
         "UPDATE checkpoints SET task = {routed} WHERE task = {completed}",
         "forbidden_right:rows_are_kept"),
]

# -- the queue: dependencies and attempts -------------------------------------------------

LEASE = ("UPDATE tasks SET state = 'accepted', lease_token = lease_token + 1,"
         " lease_id = 'Lraw' || (lease_token + 1), lease_holder = '{holder}',"
         " lease_instance = '{instance}', lease_expires = '2026-12-02T09:10:00.000Z',"
         " updated_at = '" + NOW + "', actor = 'raw', reason = 'raw sql'{scope}"
         " WHERE number = {{{task}}}")
"""A lease taken by raw SQL (routed -> accepted), bypassing the library's checks."""


def lease(task: str = "routed", holder: str = "ana/coder", instance: str = "laptop", *,
          scope: str | None = None) -> str:
    """The raw lease; ``scope``: the enrolment it names (``lease_scope``, as SQL)."""
    return LEASE.format(task=task, holder=holder, instance=instance,
                        scope="" if scope is None else f", lease_scope = {scope}")


def holder_of(task: str) -> tuple[str, object]:
    return (f"SELECT lease_holder FROM tasks WHERE number = {{{task}}}", "ana/coder")


ATTEMPTS = "UPDATE tasks SET attempts = {n} WHERE number = {{routed}}"
SIGNED_OFF = "UPDATE tasks SET state = 'completed', actor = 'ana' WHERE number = {dep_on}"
QUEUE = [
    case("a raw claim stands", lease(), None, then=[holder_of("routed")]),
    case("a claim of a blocked task", lease("dependant"), "invalid_state:blocked"),
    case("a claim of a blocked task whose count was lied to", lease("dependant"),
         "invalid_state:blocked", "UPDATE tasks SET waits = 0 WHERE number = {dependant}"),
    case("a claim with every attempt used", lease(), "invalid_state:attempts_exhausted",
         ATTEMPTS.format(n=3)),
    case("a claim with attempts over the limit", lease(), "invalid_state:attempts_exhausted",
         ATTEMPTS.format(n=7)),
    case("a claim with one attempt left stands", lease(), None, ATTEMPTS.format(n=2),
         then=[holder_of("routed")]),
    case("a claim after the limit was raised stands", lease(), None, ATTEMPTS.format(n=3),
         "UPDATE tasks SET attempt_limit = 4, fields_version = fields_version + 1"
         " WHERE number = {routed}", then=[holder_of("routed")]),
    case("attempts lowered", ATTEMPTS.format(n=1), "forbidden_right:attempts_only_grow",
         ATTEMPTS.format(n=2)),
    case("a priority no one knows", "UPDATE tasks SET priority = 'asap', fields_version ="
         " fields_version + 1 WHERE number = {routed}", "invalid_input:invalid_priority"),
    case("a priority without a new fields version",
         "UPDATE tasks SET priority = 'urgent' WHERE number = {routed}",
         "invalid_state:stale_base"),
    case("labels without a new fields version",
         "UPDATE tasks SET labels = '[\"x\"]' WHERE number = {routed}",
         "invalid_state:stale_base"),
    case("a fields version skipped", "UPDATE tasks SET fields_version = 5 WHERE number ="
         " {routed}", "invalid_state:stale_base"),
    case("a failed attempt is counted",
         "UPDATE tasks SET state = 'routed', reason = 'failed',"
         " detail = '{{\"outcome\": \"failed\"}}' WHERE number = {r_verifying}", None,
         then=[("SELECT attempts FROM tasks WHERE number = {r_verifying}", 1)]),
    case("a dependency's completion unblocks its dependant", SIGNED_OFF, None,
         then=[(state_of("dep_on"), "completed"),
               ("SELECT waits FROM tasks WHERE number = {dependant}", 0)]),
    case("a dependency completes after its dependant was cancelled", SIGNED_OFF, None,
         "UPDATE tasks SET state = 'cancelled', actor = 'ana' WHERE number = {dependant}",
         then=[(state_of("dep_on"), "completed"), (state_of("dependant"), "cancelled"),
               ("SELECT waits FROM tasks WHERE number = {dependant}", 1)]),
    case("a dependency added to a routed task (two rules: SQLite's first)",
         "INSERT INTO deps(task, on_task) VALUES ({dependant}, {dep_on})",
         "invalid_input:dependency_fixed"),
    case("a dependency added after the task's birth",
         "INSERT INTO deps(task, on_task) VALUES ({r_routed}, {routed})",
         "invalid_input:dependency_fixed"),
    case("a dependency on a later task",
         "INSERT INTO deps(task, on_task) VALUES ({r_requested}, {l_working})",
         "invalid_input:dependency_fixed"),
    case("a dependency of a requested task on an earlier one stands",
         "INSERT INTO deps(task, on_task) VALUES ({r_requested}, {routed})", None,
         then=[("SELECT count(*) FROM deps", 2)]),
    case("a dependency retargeted", "UPDATE deps SET on_task = {routed}",
         "forbidden_right:append_only"),
    case("dependencies deleted", "DELETE FROM deps", "forbidden_right:append_only"),
]

# -- the owner's controls: no lease to whom one binds, kept once written -----------------

CONTROL = ("INSERT INTO controls(kind, agent, instance, task, at, by)"
           " VALUES ({kind}, {agent}, {instance}, {task}, '" + NOW + "', 'ana')")


def control(kind: str, agent: str | None = None, instance: str | None = None,
            task: str | None = None) -> str:
    return CONTROL.format(kind=f"'{kind}'", agent=f"'{agent}'" if agent else "NULL",
                          instance=f"'{instance}'" if instance else "NULL",
                          task=f"{{{task}}}" if task else "NULL")


LIFT_NEWEST = ("UPDATE controls SET lifted_at = '" + AT + "', lifted_by = 'ana'"
               " WHERE id = (SELECT max(id) FROM controls)")
BINDS = {  # (the control, the lease's holder and instance, the refusal)
    "a held agent": (control("hold", agent="ana/coder"), "ana/coder", "laptop", "held"),
    "a held instance": (control("hold", instance="laptop"), "ana/coder", "Laptop.", "held"),
    "a stopped agent": (control("stop", agent="ana/coder"), "ana/coder", "desktop", "vetoed"),
    "a stopped instance": (control("stop", instance="laptop"), "ana/coder", "LAPTOP",
                           "vetoed"),
    "everyone stopped": (control("stop"), "ana/coder", "laptop", "vetoed"),
    "a vetoed agent": (control("veto", agent="ana/coder", task="routed"), "ana/coder",
                       "laptop", "vetoed"),
}
RESUME = ("UPDATE tasks SET state = 'working', waiting_on = NULL, lease_token = lease_token + 1,"
          " lease_id = 'Lraw2', lease_holder = 'ana/coder', lease_instance = 'laptop',"
          " lease_expires = '2026-12-02T09:10:00.000Z', actor = 'raw', reason = 'raw sql'"
          " WHERE number = {paused}")
CONTROLS = [
    *(case(f"a lease to {name}", lease("routed", holder, instance), f"forbidden_right:{why}",
           made) for name, (made, holder, instance, why) in BINDS.items()),
    *(case(f"a lease to {name}, once lifted, stands", lease("routed", holder, instance), None,
           made, LIFT_NEWEST, then=[holder_of("routed")])
      for name, (made, holder, instance, _) in BINDS.items()),
    case("a lease resumed by a held agent", RESUME, "forbidden_right:held",
         control("hold", agent="ana/coder")),
    case("a lease resumed stands", RESUME, None, then=[holder_of("paused")]),
    case("a veto binds only its task", lease(), None,
         control("veto", agent="ana/coder", task="dependant"), then=[holder_of("routed")]),
    case("a veto binds only its agent (the scenario's, of another)", lease(), None,
         then=[holder_of("routed")]),
    case("a hold binds only its agent", lease(), None, control("hold", agent="ana/tester"),
         then=[holder_of("routed")]),
    case("a stop binds only its instance", lease(), None, control("stop", instance="desktop"),
         then=[holder_of("routed")]),
    *(case(f"a control's instance spelt {spelling!r}", control("hold", instance=spelling),
           "invalid_input:invalid_control")
      for spelling in ("Laptop", "laptop.", " laptop", "LAPTOP.")),
    *(case(f"a control: {name}", CONTROL.format(kind=f"'{kind}'", agent=agent,
                                                  instance=instance, task=task),
           "invalid_input:invalid_control")
      for name, (kind, agent, instance, task) in {
          "hold of both": ("hold", "'ana/coder'", "'laptop'", "NULL"),
          "hold of neither": ("hold", "NULL", "NULL", "NULL"),
          "hold on a task": ("hold", "'ana/coder'", "NULL", "{routed}"),
          "veto without a task": ("veto", "'ana/coder'", "NULL", "NULL"),
          "veto without an agent": ("veto", "NULL", "NULL", "{routed}"),
          "veto of an instance": ("veto", "'ana/coder'", "'laptop'", "{routed}"),
          "stop on a task": ("stop", "'ana/coder'", "NULL", "{routed}"),
          "stop of both": ("stop", "'ana/coder'", "'laptop'", "NULL"),
          "unknown kind": ("pause", "'ana/coder'", "NULL", "NULL"),
      }.items()),
    case("a control born lifted", "INSERT INTO controls(kind, agent, at, by, lifted_at)"
         " VALUES ('hold', 'ana/coder', '" + NOW + "', 'ana', '" + NOW + "')",
         "invalid_input:invalid_control"),
    *(case(f"a control {name} stands", made, None,
           then=[("SELECT count(*) FROM controls", 3)])
      for name, made in (("of an agent's hold", control("hold", agent="ana/coder")),
                         ("of an instance's hold", control("hold", instance="laptop")),
                         ("of a veto", control("veto", agent="ana/coder", task="routed")),
                         ("of everyone's stop", control("stop")))),
    case("controls deleted", "DELETE FROM controls", "forbidden_right:controls_kept"),
    case("a control deleted", "DELETE FROM controls WHERE id = {live}",
         "forbidden_right:controls_kept"),
    *(case(f"a control: {name}", sql, "forbidden_right:controls_kept")
      for name, sql in {
          "lifted again": "UPDATE controls SET lifted_at = '2026-12-03T00:00:00.000Z',"
                          " lifted_by = 'ana' WHERE id = {lifted}",
          "unlifted": "UPDATE controls SET lifted_at = NULL, lifted_by = NULL WHERE id ="
                      " {lifted}",
          "a lifted one retargeted": "UPDATE controls SET agent = 'ana/other' WHERE id ="
                                     " {lifted}",
          "a live one retargeted": "UPDATE controls SET agent = 'ana/other' WHERE id = {live}",
          "its reason rewritten": "UPDATE controls SET reason = 'other' WHERE id = {live}",
          "its kind changed": "UPDATE controls SET kind = 'stop' WHERE id = {live}",
          "backdated": "UPDATE controls SET at = '2020-01-01T00:00:00.000Z' WHERE id = {live}",
          "lifted without a lifter": "UPDATE controls SET lifted_at ="
                                     " '2026-12-03T00:00:00.000Z' WHERE id = {live}",
          "lifted and changed at once": "UPDATE controls SET lifted_at ="
                                        " '2026-12-03T00:00:00.000Z', lifted_by = 'ana',"
                                        " agent = NULL WHERE id = {live}",
          "renumbered": "UPDATE controls SET id = 99 WHERE id = {live}",
      }.items()),
    case("a live control lifted by the owner stands",
         "UPDATE controls SET lifted_at = '2026-12-03T00:00:00.000Z', lifted_by = 'ana'"
         " WHERE id = {live}", None,
         then=[("SELECT lifted_by FROM controls WHERE id = {live}", "ana")]),
]

# -- the owner's policy, budgets, plugins and tokens ---------------------------------------

POLICY = "INSERT INTO policy(key, value, at, by) VALUES ('{key}', '{value}', '" + AT + "', 'ana')"
BUDGET = ("INSERT INTO budgets(agent, tasks, tokens, usd_micros, at, by)"
          " VALUES ('ana/coder', {tasks}, {tokens}, {usd}, '" + AT + "', 'ana')")
PLUGIN = ("INSERT INTO required_plugins(name, kind, digest, settings, at, by)"
          " VALUES ('p', '{kind}', 'x', '{settings}', '" + AT + "', 'ana')")
TOKEN = ("INSERT INTO tokens(id, agent, instance, rights, hash, created_at, by)"
         " VALUES ('{id}', {agent}, {instance}, '{rights}', '{hash}', '" + AT + "', 'ana')")
HASH = "0" * 64


def token(id: str, agent: str | None = "ana/coder", instance: str | None = "laptop",
          rights: str = "tasks.read", hash: str = HASH) -> str:
    return TOKEN.format(id=id, agent=f"'{agent}'" if agent else "NULL",
                        instance=f"'{instance}'" if instance else "NULL", rights=rights,
                        hash=hash)


REVOKE = "UPDATE tokens SET revoked_at = '2026-12-02T09:01:00.000Z' WHERE id = 'f'"
OWNERS = [
    *(case(f"policy {key} = {value!r}", POLICY.format(key=key, value=value),
           "invalid_input:invalid_policy")
      for key, value in (("mode", "solo"), ("mode", "Personal"), ("proposals", "maybe"),
                         ("threshold", "-1"), ("threshold", "1001"), ("threshold", "x"),
                         ("threshold", ""), ("threshold", "1.5"), ("threshold:demo", "-1"),
                         ("threshold:", "2"), ("timezone", ""), ("colour", "blue"))),
    *(case(f"policy {key} = {value!r} stands", POLICY.format(key=key, value=value), None,
           then=[(f"SELECT value FROM policy WHERE key = '{key}'", value)])
      for key, value in (("mode", "team"), ("proposals", "owner"), ("threshold", "0"),
                         ("threshold", "1000"), ("threshold:demo", "3"),
                         ("timezone", "Europe/Berlin"))),
    case("a policy value rewritten", "UPDATE policy SET value = 'personal'",
         "forbidden_right:append_only", TEAM),
    *(case(f"a budget of {name}", BUDGET.format(**values), "invalid_input:invalid_budget")
      for name, values in (("negative tasks", {"tasks": -1, "tokens": "NULL", "usd": "NULL"}),
                           ("negative tokens", {"tasks": "NULL", "tokens": -5, "usd": "NULL"}),
                           ("negative dollars", {"tasks": "NULL", "tokens": "NULL",
                                                 "usd": -1}))),
    case("a budget rewritten", "UPDATE budgets SET tasks = 1000",  # (the coder's: 50)
         "forbidden_right:append_only"),
    case("a required plugin of no kind", PLUGIN.format(kind="magic", settings="{{}}"),
         "invalid_input:invalid_requirement"),
    case("a required plugin's settings not JSON", PLUGIN.format(kind="given", settings="{{"),
         "invalid_input:invalid_requirement"),
    case("a required plugin rewritten", "UPDATE required_plugins SET digest = 'y'",
         "forbidden_right:append_only", PLUGIN.format(kind="given", settings="{{}}")),
    *(case(f"a token {name}", token(*row[:1], **row[1]), "invalid_input:invalid_token")
      for name, row in (
          ("with its secret in the clear", ("a", {"hash": "secret-in-clear"})),
          ("of an instance not as compared", ("b", {"instance": "Laptop"})),
          ("of an agent with the owner's right", ("c", {"rights": "owner"})),
          ("of no one with an agent's right", ("d", {"agent": None, "instance": None})),
          ("with a right no one has", ("e", {"rights": "tasks.read,tasks.fly"})),
          ("with a hash one digit short", ("g", {"hash": "0" * 63})),
          ("with a hash one digit long", ("h", {"hash": "0" * 65})),
          ("with an empty hash", ("i", {"hash": ""})),
          ("with a hash in capitals", ("j", {"hash": "A" * 64})),
      )),
    case("a token born revoked", "INSERT INTO tokens(id, agent, instance, rights, hash,"
         " created_at, revoked_at, by) VALUES ('k', 'ana/coder', 'laptop', 'tasks.read', '"
         + HASH + "', '" + AT + "', '" + AT + "', 'ana')", "invalid_input:invalid_token"),
    case("an agent's token stands", token("f", rights="tasks.read,tasks.work"), None,
         then=[("SELECT rights FROM tokens WHERE id = 'f'", "tasks.read,tasks.work")]),
    case("an owner's token stands", token("o", agent=None, instance=None, rights="owner"),
         None),
    case("tokens deleted", "DELETE FROM tokens", "forbidden_right:tokens_kept"),
    case("a token unrevoked", "UPDATE tokens SET revoked_at = NULL WHERE id = 'f'",
         "forbidden_right:tokens_kept", token("f"), REVOKE),
    case("a token revoked twice", REVOKE, "forbidden_right:tokens_kept", token("f"), REVOKE),
    case("a token's hash swapped", "UPDATE tokens SET hash = '" + "1" * 64 + "' WHERE id = 'f'",
         "forbidden_right:tokens_kept", token("f")),
    case("a token issued twice", token("f"), "forbidden_right:rows_are_kept", token("f")),
    case("a token revoked stands", REVOKE, None, token("f"),
         then=[("SELECT count(*) FROM tokens WHERE revoked_at IS NOT NULL", 1)]),
]

# -- who decides, and what decides (issue 30, parts 2 and 3) -----------------------------
# Raw SQL that names the owner, or writes the journal row first, gets through (the last
# test here): that is what the keyed journal chain and ``doctor`` are for.


def journal_row(task: str, state: str, actor: str, reason: str, detail: str) -> dict[str, str]:
    """A raw journal row of an event (no move) on ``task``: the store takes it, as it takes
    any row that tells the truth about its task's state. (``detail`` is JSON with its
    braces doubled.)"""
    return event(f"{{{task}}}", f"'{AT}', '{actor}', '{state}', '{state}', '{reason}',"
                 f" '{detail}'", "at, actor, from_state, to_state, reason, detail")



SWAPPED = '{{"summary": "swapped", "evidence": [], "provenance": "agent_generated"}}'


def swap(task: str, by: int = 1) -> str:
    """The attack that swaps ``task``'s result and raises its version by ``by``."""
    return (f"UPDATE results SET body = '{SWAPPED}', version = version + {by}"
            f" WHERE task = {{{task}}}")


def usage(tokens: object, usd: object) -> str:
    return ("INSERT INTO updates(task, at, actor, summary, tokens, usd_micros) VALUES"
            f" ({{claimed}}, '{AT}', 'ana/coder', 'spent', {tokens}, {usd})")


def lift(who: str) -> str:
    return f"UPDATE controls SET lifted_at = '{AT}', lifted_by = '{who}' WHERE id = {{live}}"


DECISIONS = [
    # the owner's moves are the owner's
    case("agent cancels a routed task",
         "UPDATE tasks SET state = 'cancelled', actor = 'ana/coder' WHERE number = {routed}",
         "forbidden_right:not_owner"),
    case("agent cancels its claimed task",
         "UPDATE tasks SET state = 'cancelled', actor = 'ana/coder', lease_id = NULL,"
         " lease_holder = NULL, lease_instance = NULL, lease_session = NULL,"
         " lease_expires = NULL WHERE number = {claimed}", "forbidden_right:not_owner"),
    case("cancel with no actor",
         "UPDATE tasks SET state = 'cancelled', actor = NULL WHERE number = {routed}",
         "forbidden_right:not_owner"),
    case("guest approves its held task",
         "UPDATE tasks SET state = 'routed', waiting_on = NULL, actor = 'guest/scout'"
         " WHERE number = {held}", "forbidden_right:not_owner"),
    case("gate approves a held task",
         "UPDATE tasks SET state = 'routed', waiting_on = NULL, actor = 'gate'"
         " WHERE number = {held}", "forbidden_right:not_owner"),
    case("guest denies a held task",
         "UPDATE tasks SET state = 'rejected', waiting_on = NULL, actor = 'guest/scout'"
         " WHERE number = {held}", "forbidden_right:not_owner"),
    case("worker declines its own result",
         "UPDATE tasks SET state = 'routed', actor = 'ana/coder' WHERE number = {approval}",
         "forbidden_right:not_decided"),
    case("reviewer with no verdict declines",
         "UPDATE tasks SET state = 'routed', actor = 'ana/reviewer' WHERE number = {approval}",
         "forbidden_right:not_decided"),
    case("reviewer declines after a counted accept",
         "UPDATE tasks SET state = 'routed', actor = 'ana/reviewer' WHERE number = {approval}",
         "forbidden_right:not_decided", confirm("ana/reviewer", "desktop")),
    case("reviewer declines with an uncounted reject",
         "UPDATE tasks SET state = 'routed', actor = 'guest/scout' WHERE number = {approval}",
         "forbidden_right:not_decided",
         "INSERT INTO confirmations(task, version, reviewer, instance, verdict, reason, at,"
         " counted, why) VALUES ({approval}, 1, 'guest/scout', 'elsewhere', 'reject', 'no',"
         " '" + AT + "', 0, 'another owner''s agent')"),
    case("a verifier's counted rejection declines",
         "UPDATE tasks SET state = 'routed', actor = 'ana/reviewer' WHERE number = {approval}",
         None, "INSERT INTO confirmations(task, version, reviewer, instance, verdict, reason,"
         " at, counted) VALUES ({approval}, 1, 'ana/reviewer', 'desktop', 'reject', 'wrong', '"
         + AT + "', 1)", then=[(state_of("approval"), "routed")]),
    # a result changes only by its holder or a journaled amend
    case("result swapped in approval", swap("approval"), "forbidden_right:amend_not_journaled"),
    case("result version raised alone",
         "UPDATE results SET version = version + 1 WHERE task = {approval}",
         "forbidden_right:amend_not_journaled"),
    case("result version lowered",
         "UPDATE results SET version = version - 1 WHERE task = {approval}",
         "invalid_state:result_version"),
    case("result swapped by two versions", swap("approval", 2), "invalid_state:result_version",
         journal_row("approval", "approval", "ana/coder", "amended", '{{"version": 3}}')),
    case("result swapped after a stranger's amend row", swap("approval"),
         "forbidden_right:amend_not_journaled",
         journal_row("approval", "approval", "ana/reviewer", "amended", '{{"version": 2}}')),
    case("result swapped after an amend row of another version", swap("approval"),
         "forbidden_right:amend_not_journaled",
         journal_row("approval", "approval", "ana/coder", "amended", '{{"version": 5}}')),
    case("result swapped after the amend row is no longer the newest", swap("approval"),
         "forbidden_right:amend_not_journaled",
         journal_row("approval", "approval", "ana/coder", "amended", '{{"version": 2}}'),
         journal_row("approval", "approval", "ana/reviewer", "confirmed", "{{}}")),
    case("result of a cancelled task swapped", swap("cancelled"), "invalid_state:task_closed"),
    # a merge is recorded once, journaled, by the worker or the owner
    case("merge recorded with no journal row",
         "UPDATE results SET merge_commit = 'abc1234', merged_by = 'ana'"
         " WHERE task = {completed}", "forbidden_right:merge_not_journaled"),
    case("merge recorded by the reviewer",
         "UPDATE results SET merge_commit = 'abc1234', merged_by = 'ana/reviewer'"
         " WHERE task = {completed}", "forbidden_right:not_submitter",
         journal_row("completed", "completed", "ana/reviewer", "merge_recorded",
                     '{{"merge_commit": "abc1234"}}')),
    case("merge recorded by no one",
         "UPDATE results SET merge_commit = 'abc1234' WHERE task = {completed}",
         "forbidden_right:not_submitter"),
    case("merge recorded with another commit's row",
         "UPDATE results SET merge_commit = 'abc1234', merged_by = 'ana'"
         " WHERE task = {completed}", "forbidden_right:merge_not_journaled",
         journal_row("completed", "completed", "ana", "merge_recorded",
                     '{{"merge_commit": "fff0000"}}')),
    case("merge recorded on a cancelled task",
         "UPDATE results SET merge_commit = 'abc1234', merged_by = 'ana'"
         " WHERE task = {cancelled}", "invalid_state:not_amendable",
         journal_row("cancelled", "cancelled", "ana", "merge_recorded",
                     '{{"merge_commit": "abc1234"}}')),
    case("merger named on an open task",
         "UPDATE results SET merged_by = 'ana' WHERE task = {approval}",
         "invalid_state:not_amendable"),
    case("a second merge, journaled", "UPDATE results SET merge_commit = '1234567',"
         " merged_by = 'ana' WHERE task = {completed}", "invalid_state:task_closed",
         journal_row("completed", "completed", "ana", "merge_recorded",
                     '{{"merge_commit": "abcdef1"}}'),
         "UPDATE results SET merge_commit = 'abcdef1', merged_by = 'ana'"
         " WHERE task = {completed}",
         journal_row("completed", "completed", "ana", "merge_recorded",
                     '{{"merge_commit": "1234567"}}')),
    # usage is whole, non-negative and bounded
    case("negative tokens", usage(-5, "NULL"), "invalid_input:invalid_usage"),
    case("negative usd_micros", usage("NULL", -1), "invalid_input:invalid_usage"),
    case("tokens over the bound", usage(MAX_USAGE["tokens"] + 1, "NULL"),
         "invalid_input:invalid_usage"),
    case("usd_micros of 2^62", usage("NULL", 2**62), "invalid_input:invalid_usage"),
    case("usage at its bounds stands", usage(MAX_USAGE["tokens"], 0), None,
         then=[("SELECT count(*) FROM updates", 2)]),
    *(case(f"usage of {value}", usage(value, "NULL"), "invalid_input:invalid_usage",
           engines=SQLITE)  # (PostgreSQL's bigint columns refuse them by type)
      for value in ("1.5", "'twelve'", "x'00'")),
    # the owner's tables are written by the owner
    case("control by an agent",
         "INSERT INTO controls(kind, agent, at, by) VALUES ('stop', 'ana/reviewer', '" + AT
         + "', 'ana/coder')", "forbidden_right:not_owner"),
    case("control lifted by an agent", lift("ana/tester"), "forbidden_right:not_owner"),
    case("policy by an agent",
         "INSERT INTO policy(key, value, at, by) VALUES ('mode', 'team', '" + AT
         + "', 'ana/coder')", "forbidden_right:not_owner"),
    case("budget by an agent",
         "INSERT INTO budgets(agent, tasks, at, by) VALUES ('ana/tester', 1000, '" + AT
         + "', 'ana/tester')", "forbidden_right:not_owner"),
    case("required plugin by an agent",
         "INSERT INTO required_plugins(name, kind, digest, settings, at, by) VALUES ('x',"
         " 'given', 'x', '{{}}', '" + AT + "', 'ana/coder')", "forbidden_right:not_owner"),
    case("token by an agent",
         "INSERT INTO tokens(id, agent, instance, rights, hash, created_at, by) VALUES"
         " ('feedface', NULL, NULL, 'owner', '" + HASH + "', '" + AT + "', 'ana/coder')",
         "forbidden_right:not_owner"),
]

# -- who may work where: roles, enrolments, and a guest's request withdrawn (migration 12) --


def braced(text: str) -> str:
    """``text`` as a case's statement holds it (its braces doubled)."""
    return text.replace("{", "{{").replace("}", "}}")


def enrolment(agent: str = "ana/coder", projects: str = "[]", roles: str = "[]",
              rights: str = "tasks.propose,tasks.work", active: int = 1, *, by: str = "ana",
              journaled: dict[str, object] | None = None) -> tuple[str, str]:
    """An enrolment as the owner writes it: its journal row, then the row naming that
    row's seq (``projects`` and ``roles`` JSON text, compact, as the library writes them;
    ``journaled``: what the journal row says instead, where it differs)."""
    detail = {"agent": agent, "projects": json.loads(projects), "roles": json.loads(roles),
              "rights": rights, "active": active} | (journaled or {})
    said = braced(literal(json.dumps(detail, separators=(",", ":"))))
    return ("INSERT INTO journal(task, at, actor, reason, detail) VALUES (NULL, '" + AT
            + f"', '{by}', 'enrolment', {said})",
            "INSERT INTO enrolments(agent, projects, roles, rights, active, seq, at, by)"
            f" VALUES ('{agent}', {braced(literal(projects))}, {braced(literal(roles))},"
            f" '{rights}', {active}, (SELECT max(seq) FROM journal), '" + AT + f"', '{by}')")


SCOPE = "(SELECT seq FROM enrolments WHERE agent = 'ana/coder')"
"""The seq of the coder's enrolment, which a lease taken under it names."""
ROLE_TASK = ("INSERT INTO tasks(number, id, state, project, requester, assignee, created_at,"
             " updated_at, role) VALUES ((SELECT max(number) + 1 FROM tasks), 't-new',"
             " 'requested', 'demo', 'ana/planner', 'ana/coder', '" + NOW + "', '" + NOW
             + "', {role})")
START_WORK = "UPDATE tasks SET state = 'working', actor = 'ana/coder' WHERE number = {{{task}}}"
"""The holder's first move (accepted -> working), named as the holder's."""
HOLDER_MOVES = {  # (the holder's move, statements before it)
    "starts work": (START_WORK.format(task="claimed"), ()),
    "submits": ("UPDATE tasks SET state = 'verifying', actor = 'ana/coder', lease_id = NULL"
                " WHERE number = {l_working}", (SUBMITTED.format(task="l_working"),)),
    "pauses": ("UPDATE tasks SET state = 'waiting', waiting_on = 'human', actor ="
               " 'ana/coder', lease_id = NULL WHERE number = {l_working}", ()),
    "submits as one row, sent back": (  # (migration 19)
        "UPDATE tasks SET state = 'routed', actor = 'ana/coder', lease_id = NULL,"
        " detail = '{{\"via\":[\"verifying\"]}}' WHERE number = {l_working}",
        (SUBMITTED.format(task="l_working"),)),
}
GIVE_BACK = ("UPDATE tasks SET state = 'routed', actor = 'ana/coder', lease_id = NULL,"
             " lease_holder = NULL, lease_instance = NULL, lease_expires = NULL"
             " WHERE number = {l_working}")
WITHDRAWN = ("UPDATE tasks SET state = 'cancelled', waiting_on = NULL, actor = '{actor}'"
             " WHERE number = {{{task}}}")


def withdrawn(actor: str, task: str = "held") -> str:
    """A cancel of ``task`` (the held one: a guest's request, by guest/scout) by ``actor``."""
    return WITHDRAWN.format(actor=actor, task=task)


NOT_JOURNALED = "forbidden_right:enrolment_not_journaled"
SCOPES = [
    # a task's role: seed 004's slug, kept from its birth
    *(case(f"a task born with the role {role!r}", ROLE_TASK.format(role=literal(role)),
           "invalid_input:invalid_role")
      for role in ("Writer", "1st", "-x", "a" * 65, "re viewer", "", "writer_x")),
    *(case(f"a task born with the role {role!r} stands", ROLE_TASK.format(role=literal(role)),
           None, then=[("SELECT role FROM tasks WHERE id = 't-new'", role)])
      for role in ("writer", "a" * 64, "code-review-2")),
    *(case(f"a task's role {name}", f"UPDATE tasks SET role = {value} WHERE number ="
           f" {{{task}}}", "invalid_input:immutable_field")
      for name, task, value in (("changed", "role", "'reviewer'"), ("dropped", "role", "NULL"),
                                ("given later", "routed", "'writer'"),
                                ("given while claimed", "claimed", "'writer'"))),
    # an enrolment: the owner's, whole, right after its journal row; replaced, never edited
    case("an enrolment without its journal row", enrolment()[1], NOT_JOURNALED),
    case("an enrolment by an agent, journaled by it", enrolment(by="ana/coder")[1],
         "forbidden_right:not_owner", enrolment(by="ana/coder")[0]),
    case("an enrolment by an agent, journaled by the owner",
         enrolment()[1].replace("'ana')", "'ana/coder')"), NOT_JOURNALED, enrolment()[0]),
    *(case(f"an enrolment whose journal row says other {what}", enrolment()[1], NOT_JOURNALED,
           enrolment(journaled=said)[0])
      for what, said in (("projects", {"projects": ["demo"]}), ("roles", {"roles": ["x"]}),
                         ("rights", {"rights": "tasks.work"}), ("activity", {"active": 0}),
                         ("agent", {"agent": "ana/other"}))),
    case("an enrolment after its journal row is no longer the newest", enrolment()[1],
         NOT_JOURNALED, enrolment()[0], "INSERT INTO journal(task, at, actor, reason)"
         " VALUES (NULL, '" + AT + "', 'ana', 'note')"),
    case("an enrolment naming an older journal row", enrolment()[1].replace(
        "(SELECT max(seq) FROM journal)", "(SELECT max(seq) - 1 FROM journal)"),
         NOT_JOURNALED, enrolment()[0]),
    *(case(f"an enrolment with {name}", enrolment(*row[:1], **row[1])[1],
           "invalid_input:invalid_enrolment", enrolment(*row[:1], **row[1])[0])
      for name, row in (
          ("projects not a JSON array", ("ana/coder", {"projects": '{"a":1}'})),
          ("projects an object of slugs", ("ana/coder", {"projects": '{"a":"demo"}'})),
          ("a project that is no slug", ("ana/coder", {"projects": '["Demo"]'})),
          ("a project 40 long", ("ana/coder", {"projects": f'["{"a" * 40}"]'})),
          ("a project that is a number", ("ana/coder", {"projects": "[1]"})),
          ("roles not a JSON array", ("ana/coder", {"roles": '{"a":1}'})),
          ("roles an object of slugs", ("ana/coder", {"roles": '{"a":"writer"}'})),
          ("a role that is no slug", ("ana/coder", {"roles": '["1st"]'})),
          ("a right outside tasks.propose and tasks.work", ("ana/coder",
                                                            {"rights": "tasks.read"})),
          ("a right beside them no one has", ("ana/coder", {"rights": "tasks.work,owner"})),
          ("an empty right", ("ana/coder", {"rights": "tasks.work,"})),
          ("no rights", ("ana/coder", {"rights": ""})),
          ("active 2", ("ana/coder", {"active": 2})),
          ("active -1", ("ana/coder", {"active": -1})),
      )),
    case("an enrolment written by the owner after its journal row stands", enrolment(
        projects='["demo","shop"]', roles='["writer"]', rights="tasks.work")[1], None,
         enrolment(projects='["demo","shop"]', roles='["writer"]', rights="tasks.work")[0],
         then=[("SELECT projects || ' ' || roles || ' ' || rights || ' ' || active FROM"
                " enrolments WHERE agent = 'ana/coder'", '["demo","shop"] ["writer"]'
                " tasks.work 1"),
               ("SELECT count(*) FROM enrolments WHERE agent = 'ana/coder'"
                " AND seq = (SELECT max(seq) FROM journal)", 1)]),
    *(case(f"an enrolment {name}", sql, "forbidden_right:append_only")
      for name, sql in (
          ("widened", "UPDATE enrolments SET projects = '[]' WHERE agent = 'ana/tester'"),
          ("ended in place", "UPDATE enrolments SET active = 0 WHERE agent = 'ana/tester'"),
          ("renumbered", "UPDATE enrolments SET seq = seq + 1 WHERE agent = 'ana/tester'"),
          ("given to another", "UPDATE enrolments SET agent = 'ana/coder'"),
      )),
    case("an enrolment deleted with no newer journal row",
         "DELETE FROM enrolments WHERE agent = 'ana/tester'", NOT_JOURNALED),
    case("every enrolment deleted", "DELETE FROM enrolments", NOT_JOURNALED),
    case("an enrolment deleted right after its own journal row",
         "DELETE FROM enrolments WHERE agent = 'ana/coder'", NOT_JOURNALED, *enrolment()),
    case("an enrolment deleted after another agent's newer journal row",
         "DELETE FROM enrolments WHERE agent = 'ana/tester'", NOT_JOURNALED,
         enrolment()[0]),
    case("an enrolment deleted after its newer journal row is no longer the newest",
         "DELETE FROM enrolments WHERE agent = 'ana/tester'", NOT_JOURNALED,
         enrolment("ana/tester")[0], "INSERT INTO journal(task, at, actor, reason)"
         " VALUES (NULL, '" + AT + "', 'ana', 'note')"),
    case("an enrolment replaced after its newer journal row stands",
         enrolment("ana/tester", active=0)[1], None, enrolment("ana/tester", active=0)[0],
         "DELETE FROM enrolments WHERE agent = 'ana/tester'",
         then=[("SELECT active FROM enrolments WHERE agent = 'ana/tester'", 0)]),
    # a lease within its holder's enrolment, naming it
    case("a lease by an agent whose enrolment ended", lease(scope=SCOPE),
         "invalid_state:optin_inactive", *enrolment(active=0)),
    case("a lease naming no enrolment, its holder enrolled", lease(),
         "invalid_state:optin_changed", *enrolment()),
    case("a lease naming an older enrolment", lease(scope=f"{SCOPE} - 1"),
         "invalid_state:optin_changed", *enrolment()),
    case("a lease naming an enrolment its holder does not have", lease(scope="1"),
         "invalid_state:optin_changed"),
    case("a lease naming another agent's enrolment",
         lease(scope="(SELECT seq FROM enrolments WHERE agent = 'ana/tester')"),
         "invalid_state:optin_changed"),
    case("a lease outside the enrolment's projects", lease(scope=SCOPE),
         "forbidden_right:optin_scope", *enrolment(projects='["shop"]')),
    case("a lease by an agent enrolled without tasks.work", lease(scope=SCOPE),
         "forbidden_right:optin_scope", *enrolment(rights="tasks.propose")),
    case("a lease of a task with a role, its holder enrolled in none", lease("role",
         scope=SCOPE), "forbidden_right:not_permitted", *enrolment()),
    case("a lease of a task with a role, its holder enrolled in another",
         lease("role", scope=SCOPE), "forbidden_right:not_permitted",
         *enrolment(roles='["reviewer"]')),
    case("a lease of a task with a role, its holder not enrolled", lease("role"),
         "forbidden_right:not_permitted"),
    case("a resume naming no enrolment, its holder enrolled", RESUME,
         "invalid_state:optin_changed", *enrolment()),
    *(case(f"a lease within the enrolment stands: {name}", lease(task, scope=SCOPE), None,
           *enrolment(**given), then=[holder_of(task), (
               f"SELECT count(*) FROM tasks WHERE number = {{{task}}} AND lease_scope = {SCOPE}",
               1)])
      for name, task, given in (
          ("every project", "routed", {}),
          ("its projects", "routed", {"projects": '["demo","shop"]', "rights": "tasks.work"}),
          ("its role", "role", {"projects": '["demo"]', "roles": '["reviewer","writer"]'}),
      )),
    case("a resume naming the enrolment stands", RESUME.replace(
        " WHERE number", f", lease_scope = {SCOPE} WHERE number"), None, *enrolment(),
         then=[holder_of("paused")]),
    case("lease_scope set under a live lease", "UPDATE tasks SET lease_scope = 1"
         " WHERE number = {claimed}", "invalid_input:immutable_field"),
    case("lease_scope set to the holder's enrolment now under a live lease",
         f"UPDATE tasks SET lease_scope = {SCOPE} WHERE number = {{claimed}}",
         "invalid_input:immutable_field", *enrolment()),
    case("lease_scope cleared under a live lease",
         "UPDATE tasks SET lease_scope = NULL WHERE number = {routed}",
         "invalid_input:immutable_field", *enrolment(), lease(scope=SCOPE)),
    # the holder's moves: under the enrolment its claim was taken under
    *(case(f"the holder {name} after its enrolment changed", sql,
           "invalid_state:optin_changed", *before, *enrolment())
      for name, (sql, before) in HOLDER_MOVES.items()),
    *(case(f"the holder {name} after its enrolment ended", sql,
           "invalid_state:optin_inactive", *before, *enrolment(active=0))
      for name, (sql, before) in HOLDER_MOVES.items()),
    case("the holder gives its claim back after its enrolment ended stands", GIVE_BACK,
         None, *enrolment(active=0), then=[(state_of("l_working"), "routed")]),
    case("the holder works under the enrolment it claimed under stands",
         START_WORK.format(task="routed"), None, *enrolment(), lease(scope=SCOPE),
         then=[(state_of("routed"), "working")]),
    # a guest's own request: withdrawn by an agent of the guest's owner, in team mode
    case("a guest's agent withdraws its owner's request in personal mode",
         withdrawn("guest/planner"), "forbidden_right:not_owner"),
    case("the guest's requester withdraws its request in personal mode",
         withdrawn("guest/scout"), "forbidden_right:not_owner"),
    *(case(f"team: {name}", withdrawn(actor, task), "forbidden_right:not_owner", TEAM)
      for name, actor, task in (
          ("another owner's agent withdraws a guest's request", "bob/planner", "held"),
          ("the store owner's agent withdraws a guest's request", "ana/planner", "held"),
          ("the guest's owner by name, no agent, withdraws its request", "guest", "held"),
          ("a name with no owner part withdraws a guest's request", "/planner", "held"),
          ("a guest's agent cancels the owner's own task", "guest/planner", "routed"),
          ("the owner's agent cancels the owner's own task", "ana/planner", "routed"),
      )),
    case("team: a name with no owner part withdraws a request named so",
         "UPDATE tasks SET state = 'cancelled', actor = 'outsider' WHERE id = 't-new'",
         "forbidden_right:not_owner", TEAM, ROLE_TASK.format(role="NULL").replace(
             "'ana/planner'", "'planner'")),
    case("team: a guest approves its held task",
         "UPDATE tasks SET state = 'routed', waiting_on = NULL, actor = 'guest/scout'"
         " WHERE number = {held}", "forbidden_right:not_owner", TEAM),
    case("team: a guest denies its held task",
         "UPDATE tasks SET state = 'rejected', waiting_on = NULL, actor = 'guest/planner'"
         " WHERE number = {held}", "forbidden_right:not_owner", TEAM),
    *(case(f"team: {name} stands", withdrawn(actor), None, TEAM,
           then=[(state_of("held"), "cancelled"), (newest("held", "actor"), actor)])
      for name, actor in (("a guest's agent withdraws its owner's request", "guest/planner"),
                          ("the guest's requester withdraws its request", "guest/scout"))),
]

# -- a result's draft and its evidence's receipts (migration 12) ---------------------------

HELD_RESULT = ("INSERT INTO results(task, body, worker, instance, outcome, draft, receipts)"
               " VALUES ({{claimed}}, '{{{{}}}}', 'ana/coder', 'laptop', '{outcome}', {draft},"
               " {receipts})")
"""A result the holder of the claimed task returns (its first version)."""
PATCH = '{"kind":"patch","content":"diff"}'


def held_result(draft: str | None = None, receipts: str | None = None,
                outcome: str = "completed") -> str:
    return HELD_RESULT.format(outcome=outcome, draft=braced(literal(draft)),
                              receipts=braced(literal(receipts)))


def resubmitted(change: str) -> str:
    """The holder's next version of the claimed task's result, with ``change``."""
    return (f"UPDATE results SET {braced(change)}, version = version + 1"
            " WHERE task = {claimed}")


DRAFTS = [
    *(case(f"a draft {name}", held_result(draft), "invalid_input:invalid_draft")
      for name, draft in (
          ("that is no JSON", "{patch"), ("that is a list", "[]"),
          ("that is text", '"a patch"'), ("of no kind", '{"content":"diff"}'),
          ("of an unknown kind", '{"kind":"essay","content":"x"}'),
          ("without content", '{"kind":"patch"}'),
          ("whose content is no text", '{"kind":"patch","content":{"a":1}}'))),
    case("a draft with a failed outcome", held_result(PATCH, outcome="failed"),
         "invalid_input:invalid_draft"),
    *(case(f"a {kind} draft stands", held_result(f'{{"kind":"{kind}","content":"x"}}'),
           None, then=[("SELECT count(*) FROM results WHERE task = {claimed}"
                        " AND draft IS NOT NULL", 1)])
      for kind in ("decision", "document", "patch")),
    case("a draft's outcome turned failed by the holder", resubmitted("outcome = 'failed'"),
         "invalid_input:invalid_draft", held_result(PATCH)),
    case("a draft reshaped by the holder", resubmitted("draft = '[]'"),
         "invalid_input:invalid_draft", held_result(PATCH)),
    case("a draft added to a result in approval", "UPDATE results SET draft = '"
         + braced(PATCH) + "' WHERE task = {approval}", "forbidden_right:draft_fixed"),
    case("a draft changed at its version", "UPDATE results SET draft = NULL"
         " WHERE task = {claimed}", "forbidden_right:draft_fixed", held_result(PATCH)),
    case("a draft changed by the holder's next version stands",
         resubmitted('draft = \'{"kind":"document","content":"y"}\''), None,
         held_result(PATCH), then=[("SELECT version FROM results WHERE task = {claimed}", 2)]),
    *(case(f"receipts {name}", held_result(receipts=receipts), "invalid_input:invalid_receipt")
      for name, receipts in (("that are no JSON", "[{"), ("that are an object", "{}"),
                             ("holding a number", "[null, 1]"), ("holding text", '["ok"]'))),
    case("receipts of nulls and objects stand", held_result(receipts='[null,{"ok":true}]'),
         None, then=[("SELECT receipts FROM results WHERE task = {claimed}",
                      '[null,{"ok":true}]')]),
    case("receipts changed at their version", "UPDATE results SET receipts = '[]'"
         " WHERE task = {claimed}", "forbidden_right:receipts_fixed", held_result()),
    case("receipts of a result in approval rewritten", "UPDATE results SET receipts = '[]'"
         " WHERE task = {approval}", "forbidden_right:receipts_fixed"),
    case("receipts reshaped with the holder's next version",
         resubmitted("receipts = '[1]'"), "invalid_input:invalid_receipt", held_result()),
    case("receipts with the holder's next version stand", resubmitted("receipts = '[{}]'"),
         None, held_result(), then=[("SELECT receipts FROM results WHERE task = {claimed}",
                                     "[{}]")]),
]

# -- a submission as one journal row (migration 19) --------------------------------------

ENDED = ("lease_id = NULL, lease_holder = NULL, lease_instance = NULL, lease_session = NULL,"
         " lease_expires = NULL")
THROUGH_WORKING = '{{"via":["working","verifying"]}}'


def submitted_as_one(state: str, via: str = THROUGH_WORKING, task: str = "claimed") -> str:
    """The holder's claimed task (``accepted``) moved as one submission's row to ``state``,
    its detail naming ``via``."""
    return (f"UPDATE tasks SET state = '{state}', {ENDED}, detail = '{via}'"
            f" WHERE number = {{{task}}}")


def threshold(value: int) -> str:
    return (f"INSERT INTO results(task, body, worker, instance, threshold) VALUES ({{claimed}},"
            f" '{{{{}}}}', 'ana/coder', 'laptop', {value})")


SUBMISSIONS = [
    case("a release posing as a submission, with no result", submitted_as_one("routed"),
         "invalid_state:no_such_move"),
    case("a submission with its result stands as one row", submitted_as_one("approval"), None,
         threshold(1), then=[(newest("claimed", "from_state || ' ' || to_state"),
                              "accepted approval")]),
    case("a submission through states a holder in accepted does not pass",
         submitted_as_one("approval", '{{"via":["verifying"]}}'),
         "invalid_state:no_such_move", threshold(1)),
    case("a submission through waiting", submitted_as_one("approval",
                                                          '{{"via":["waiting","verifying"]}}'),
         "invalid_state:no_such_move", threshold(1)),
    case("a submission whose via is text", submitted_as_one(
        "approval", '{{"via":"[\\"working\\",\\"verifying\\"]"}}'),
         "invalid_state:no_such_move", threshold(1)),
    case("a submission to a state no judgement leads to", submitted_as_one("cancelled")
         .replace("SET state", "SET actor = 'ana', state"), "invalid_state:no_such_move",
         threshold(1)),
    case("a submission completed that its threshold does not let through",
         submitted_as_one("completed"), "forbidden_right:not_decided", threshold(1)),
    case("a submission completed at a threshold of 0 stands", submitted_as_one("completed"),
         None, threshold(0), then=[(state_of("claimed"), "completed")]),
    case("a submission sent back counts an attempt", submitted_as_one("routed"), None,
         threshold(1), then=[("SELECT attempts FROM tasks WHERE number = {claimed}", 1)]),
    case("a release that keeps a via planted in the task's detail is read as a submission",
         "UPDATE tasks SET state = 'routed', lease_id = NULL WHERE number = {r_working}",
         "invalid_state:no_such_move", "UPDATE tasks SET detail = '{{\"via\":[\"verifying\"]}}'"
         " WHERE number = {r_working}"),
    case("a completion from approval is no submission, whatever the task's detail names",
         "UPDATE tasks SET state = 'completed', actor = 'ana', reason = 'raw'"
         " WHERE number = {approval}", None,
         "UPDATE tasks SET detail = '{{\"via\":[\"working\",\"verifying\"]}}'"
         " WHERE number = {approval}", then=[(state_of("approval"), "completed")]),
    case("journal row forged: a release naming a submission's via",
         event("{routed}", "'" + NOW + "', 'raw', 'accepted', 'routed',"
               " '{{\"via\":[\"verifying\"]}}'", "at, actor, from_state, to_state, detail"),
         "forbidden_right:journal_forged"),
]



def answered(task: str, actor: str) -> dict[str, str]:
    """A raw answer to ``task``'s question, from ``actor`` (SQL)."""
    return event("{" + task + "}", f"'{NOW}', {actor}, 'waiting', 'waiting', 'answered',"
                 " '{{\"text\":\"16\"}}'", "at, actor, from_state, to_state, reason, detail")


# -- who answers which question (migration 20) ------------------------------------------

OWNER_SQL = "(SELECT value FROM meta WHERE key = 'owner')"
ANSWERS = [
    case("an answer to a task held for the owner, which asks nothing",
         answered("r_owner_approval", OWNER_SQL), "invalid_state:not_asking"),
    case("an agent's answer to a question to a person",
         answered("r_human", "'ana/planner'"), "forbidden_right:not_permitted"),
    case("the asker's answer to its own question", answered("r_agent", "'ana/coder'"),
         "forbidden_right:self_answer"),
    case("an answer to a task that is not waiting is no journal row of its",
         answered("r_routed", OWNER_SQL), "forbidden_right:journal_forged"),
    case("the owner's answer to a question to a person stands",
         answered("r_human", OWNER_SQL), None,
         then=[(newest("r_human", "reason"), "answered")]),
    case("another agent's answer to an agent's question stands",
         answered("r_agent", "'ana/planner'"), None,
         then=[(newest("r_agent", "actor"), "ana/planner")]),
]

def by_tester(task: str, reason: str) -> dict[str, str]:
    """A raw journal row of the enrolled ``ana/tester``'s about ``task`` (left in its
    state), with ``reason`` (SQL)."""
    return event("{" + task + "}", f"'{NOW}', 'ana/tester', (SELECT state FROM tasks"
                 f" WHERE number = {{{task}}}), (SELECT state FROM tasks WHERE number ="
                 f" {{{task}}}), '{reason}'", "at, actor, from_state, to_state, reason")


def reenrolled(**given: object) -> tuple[str, str, str]:
    """The tester's enrolment replaced as the owner replaces it (its journal row, the old
    row out, the new one in): demo and writer, both rights, unless ``given``."""
    row: dict[str, object] = {"projects": '["demo"]', "roles": '["writer"]'} | given
    journaled, written = enrolment("ana/tester", **row)  # type: ignore[arg-type]
    return journaled, "DELETE FROM enrolments WHERE agent = 'ana/tester'", written


# -- an enrolled agent's writes within its enrolment (migration 21) -----------------------

ENROLLED = [
    case("an enrolled agent's answer after its enrolment ended",
         answered("r_agent", "'ana/tester'"), "invalid_state:optin_inactive",
         *reenrolled(active=0)),
    case("an enrolled agent's answer without tasks.work",
         answered("r_agent", "'ana/tester'"), "forbidden_right:optin_scope",
         *reenrolled(rights="tasks.propose")),
    case("an enrolled agent's answer on a task outside its projects",
         answered("r_agent", "'ana/tester'"), "forbidden_right:optin_scope",
         *reenrolled(projects='["shop"]')),
    case("an enrolled agent's answer within its enrolment stands",
         answered("r_agent", "'ana/tester'"), None,
         then=[(newest("r_agent", "actor"), "ana/tester")]),
    case("an enrolled agent's change of fields without tasks.propose",
         by_tester("r_routed", "fields"), "forbidden_right:optin_scope",
         *reenrolled(rights="tasks.work")),
    case("an enrolled agent's change of fields with tasks.propose alone stands",
         by_tester("r_routed", "fields"), None, *reenrolled(rights="tasks.propose"),
         then=[(newest("r_routed", "reason"), "fields")]),
    case("an enrolled agent's note without tasks.work",
         by_tester("r_approval", "confirmed"), "forbidden_right:optin_scope",
         *reenrolled(rights="tasks.propose")),
    case("an enrolled agent's note on a task outside its projects, every project before",
         by_tester("r_approval", "confirmed"), "forbidden_right:optin_scope",
         *reenrolled(projects='["shop","docs"]')),
    case("an enrolled agent's note in every project stands",
         by_tester("r_approval", "confirmed"), None, *reenrolled(projects="[]"),
         then=[(newest("r_approval", "actor"), "ana/tester")]),
]

# -- a day's claim count and the watches (migration 22) ------------------------------------

COUNTED = ("SELECT claims - (SELECT count(*) FROM journal WHERE actor = 'ana/coder'"
           " AND from_state = 'routed' AND to_state = 'accepted') FROM claim_counts"
           " WHERE agent = 'ana/coder'")
"""The coder's count of the day's claims beyond the journal's (0 as the scenario left it)."""
WATCH_ROW = ("INSERT INTO watches(id, caller, token, verb, number, asked, answer, created_at,"
             " updated_at, expires_at, poll_ms, cancelled_at) VALUES ('hl-task-"
             + "x" * 32 + "', 'ana/coder', NULL, 'handoff', {routed}, '{{}}', {answer}, '"
             + AT + "', '" + AT + "', '2026-12-03T10:00:00.000Z', 2000, NULL)")
KEPT_TABLES = [
    case("a day's claims counted down", "UPDATE claim_counts SET claims = 0",
         "forbidden_right:count_forged", engines=SQLITE),
    case("a day's claims counted up by two", "UPDATE claim_counts SET claims = claims + 2",
         "forbidden_right:count_forged", engines=SQLITE),
    case("a day's count handed to another agent",
         "UPDATE claim_counts SET agent = 'ana/tester'", "forbidden_right:count_forged",
         engines=SQLITE),
    case("a day's count dropped and started again at nothing",
         "INSERT INTO claim_counts(agent, day, claims) VALUES ('ana/coder',"
         " '2026-12-02T00:00:00.000Z', 0)", "forbidden_right:count_forged",
         "DELETE FROM claim_counts", engines=SQLITE),
    case("a day's count dropped stands (the next claim counts the journal)",
         "DELETE FROM claim_counts", None, engines=SQLITE,
         then=[("SELECT count(*) FROM claim_counts", 0)]),
    case("a day's claims counted up by one stands",
         "UPDATE claim_counts SET claims = claims + 1", None, engines=SQLITE,
         then=[(COUNTED, 1)]),
    case("a watch handed to another caller", "UPDATE watches SET caller = 'ana/thief'",
         "forbidden_right:watch_kept"),
    case("a watch handed to another token", "UPDATE watches SET token = 'f0f0f0f0f0f0'",
         "forbidden_right:watch_kept"),
    case("a watch extended",
         "UPDATE watches SET expires_at = '2099-01-01T00:00:00.000Z'",
         "forbidden_right:watch_kept"),
    case("a watch moved to another task", "UPDATE watches SET number = {completed}",
         "forbidden_right:watch_kept"),
    case("a watch made answered", WATCH_ROW.replace("{answer}", "'{{}}'"),
         "forbidden_right:watch_kept"),
    case("a watch's kept answer rewritten", "UPDATE watches SET answer = '[1]'",
         "forbidden_right:watch_kept", "UPDATE watches SET answer = '[0]'"),
    case("a watch's first answer stands (its seal shows it)",
         "UPDATE watches SET answer = '[0]'", None,
         then=[("SELECT answer FROM watches", "[0]")]),
    case("a watch made unanswered stands (its seal shows it)",
         WATCH_ROW.replace("{answer}", "NULL"), None,
         then=[("SELECT count(*) FROM watches", 2)]),
]

CASES: list[Case] = [
    *JOURNAL, *BIRTH, *CLOSED, *WAITING, *RESULTS_EXIST, *LEASES, *COLUMNS, *MOVES_TABLE,
    *PROTOCOL, *ROWS_KEPT, *RESULTS, *QUEUE, *CONTROLS, *OWNERS, *DECISIONS, *SCOPES, *DRAFTS,
    *SUBMISSIONS, *ANSWERS, *ENROLLED, *KEPT_TABLES,
]


@pytest.mark.parametrize(("engine", "c"), params(CASES))
def test_raw_sql(stores: Stores, engine: str, c: Case) -> None:
    """One raw write: refused with its ``code:reason`` and every row as it was, or
    standing with what ``then`` says."""
    run(stores, engine, c)


def count(engine: str) -> int:
    """How many cases run on ``engine``."""
    return sum(engine in c.engines for c in CASES)


def test_each_engine_runs_every_case_but_the_dialects_own() -> None:
    """The suite is one: a case runs on one engine only when the other has no such
    statement (``REPLACE``, ``INSERT OR IGNORE``'s twin, ``TRUNCATE``, a schema of one's
    own on the ``search_path``, a value of the wrong type)."""
    only = {e: [c.id for c in CASES if c.engines == (e,)] for e in ENGINES}
    assert len(only["sqlite"]) == len(KEPT) + 3 + 6  # (+ a day's claim count)
    assert len(only["postgres"]) == len(TRUNCATED) + 1
    assert count("sqlite") - len(only["sqlite"]) == count("postgres") - len(only["postgres"])


@pytest.mark.parametrize("engine", ENGINES)
def test_a_walked_task_is_journaled_at_every_step(stores: Stores, engine: str) -> None:
    raw, n = stores(engine)
    steps = [State.requested, State.routed, State.accepted, State.working, State.verifying,
             State.completed]
    assert raw.rows(f"SELECT from_state, to_state FROM journal WHERE task = {n['r_completed']}"
                    " ORDER BY seq") == [
        (a.value if a else None, b.value) for a, b in zip([None, *steps[:-1]], steps,
                                                           strict=True)]


@pytest.mark.parametrize("engine", ENGINES)
def test_what_the_owner_names_gets_through(stores: Stores, engine: str) -> None:
    """Raw SQL that names the owner, or writes the amend's or the merge's journal row
    first, passes the store: the database cannot tell who typed it. The journal then says
    so, and the keyed chain and ``doctor`` are what catch it."""
    raw, n = stores(engine)
    Run(raw, n)(case(
        "what the owner names", lift("ana"), None,
        "UPDATE tasks SET state = 'routed', waiting_on = NULL, actor = 'ana'"
        " WHERE number = {held}",
        journal_row("approval", "approval", "ana/coder", "amended",
                    '{{"version": 2, "dismissed": 1}}'),
        swap("approval"),
        journal_row("completed", "completed", "ana/coder", "merge_recorded",
                    '{{"merge_commit": "abc1234"}}'),
        "UPDATE results SET merge_commit = 'abc1234', merged_by = 'ana/coder'"
        " WHERE task = {completed}",
        then=[("SELECT version FROM results WHERE task = {approval}", 2),
              (state_of("held"), "routed"),
              ("SELECT merged_by FROM results WHERE task = {completed}", "ana/coder"),
              ("SELECT lifted_by FROM controls WHERE id = {live}", "ana")]))


# -- the library, beside the store's rules -------------------------------------------------


@pytest.mark.parametrize("engine", ENGINES)
def test_every_decision_the_library_makes_passes_the_store(tmp_path: Path,
                                                           engine: str) -> None:
    """Approve, deny, cancel (from each open state), sign-off, decline, a verifier's
    rejection, two amends, a merge by the worker and one by the owner, expiry, controls
    and their lifts, usage at its bound: the rules let every one through."""
    if engine == "postgres" and not pg.available():
        pytest.skip("no PostgreSQL server")
    schema = pg.new_schema() if engine == "postgres" else ""
    target = pg.store_url(schema) if engine == "postgres" else tmp_path / "s.db"
    clock = ManualClock(START)
    try:
        with Hive.open(target, owner="ana", clock=clock) as hive:
            hive.approve(OWNER, held_task(hive))
            hive.deny(OWNER, held_task(hive), reason="no")
            hive.cancel(OWNER, held_task(hive))

            def submitted() -> int:
                number = own_task(hive)
                lease = hive.claim(CODER, number)
                hive.submit(CODER, number, lease_id=lease.lease_id,
                            token=lease.fencing_token, summary="done", evidence=EVIDENCE,
                            tokens=MAX_USAGE["tokens"], usd_micros=0)
                return number

            signed, declined, rejected, merged = [submitted() for _ in range(4)]
            hive.amend(CODER, signed, summary="better")
            hive.amend(CODER, signed, evidence=[{"kind": "note", "summary": "again"}])
            hive.sign_off(OWNER, signed)
            hive.amend(OWNER, signed, merge_commit="abc1234")
            hive.decline(OWNER, declined, reason="not yet")
            hive.verify(REVIEWER, rejected, verdict="reject", reason="wrong")
            assert hive.get(rejected).task.state is State.routed
            hive.verify(REVIEWER, merged, verdict="accept")
            hive.amend(CODER, merged, merge_commit="def5678")
            for state in ("routed", "accepted", "working"):
                number = own_task(hive)
                if state != "routed":
                    lease = hive.claim(CODER, number)
                if state == "working":
                    hive.update(CODER, number, lease_id=lease.lease_id,
                                token=lease.fencing_token, summary="half", tokens=0,
                                usd_micros=MAX_USAGE["usd_micros"])
                hive.cancel(OWNER, number)
            expiring = own_task(hive)
            hive.claim(CODER, expiring)
            clock.advance(minutes=11)
            hive.expire(OWNER)
            stop = hive.stop(OWNER, agent=CODER.name)
            hive.lift(OWNER, stop.id)
            veto = hive.veto(OWNER, expiring, agent=CODER.name)
            hive.lift(OWNER, veto.id)
            hive.set_budget(OWNER, CODER.name, tokens=MAX_USAGE["tokens"])
            hive.set_policy(OWNER, "mode", "personal")
            hive.add_token(OWNER, TESTER.name, instance="tablet")
            task = hive.get(signed).task
            assert task.state is State.completed
            assert task.result is not None and task.result.summary == "better"
            assert [e.reason for e in hive.history(signed) if e.reason == "amended"] == [
                "amended", "amended"]
    finally:
        if engine == "postgres":
            pg.drop(schema)


def test_the_library_still_does_everything(tmp_path: Path) -> None:
    """Resubmission after a failure, amendment, renewal and the merge record all pass the
    rules."""
    clock = ManualClock(START)
    with Hive.open(tmp_path / "s.db", owner="ana", clock=clock) as hive:
        number = own_task(hive)
        lease = hive.claim(CODER, number)
        fence = {"lease_id": lease.lease_id, "token": lease.fencing_token}
        clock.advance(minutes=8)
        hive.renew(CODER, number, minutes=15, **fence)
        hive.submit(CODER, number, summary="no", evidence=EVIDENCE, outcome="failed", **fence)
        again = hive.claim(Caller.agent("ana/coder", "desktop"), number)
        hive.submit(Caller.agent("ana/coder", "desktop"), number, lease_id=again.lease_id,
                    token=again.fencing_token, summary="yes", evidence=EVIDENCE)
        hive.amend(Caller.agent("ana/coder", "desktop"), number, summary="yes, really")
        hive.verify(Caller.agent("ana/reviewer", "laptop"), number, verdict="accept")
        hive.amend(OWNER, number, merge_commit="3f2a9c1")
        view = hive.get(number)
        assert view.task.state is State.completed and view.merge is not None


def test_the_guard_refuses_first_with_its_own_reason(tmp_path: Path) -> None:
    """The database is the second line: the verbs refuse an agent's owner move before
    any write, with the precise error (``not_permitted``), and an amend or a merge by the
    wrong agent with theirs."""
    with Hive.open(tmp_path / "s.db", owner="ana", clock=ManualClock(START)) as hive:
        held = held_task(hive)
        for call in (lambda: hive.approve(GUEST, held), lambda: hive.deny(GUEST, held),
                     lambda: hive.cancel(CODER, held)):
            with pytest.raises(ForbiddenRight) as err:
                call()
            assert err.value.reason == "not_permitted"
        number = own_task(hive)
        lease = hive.claim(CODER, number)
        hive.submit(CODER, number, lease_id=lease.lease_id, token=lease.fencing_token,
                    summary="done", evidence=EVIDENCE)
        for call in (lambda: hive.sign_off(CODER, number),
                     lambda: hive.decline(REVIEWER, number, reason="no")):
            with pytest.raises(ForbiddenRight) as err:
                call()
            assert err.value.reason == "not_permitted"
        with pytest.raises(ForbiddenRight) as err:
            hive.amend(REVIEWER, number, summary="mine now")
        assert err.value.reason == "not_submitter"
        with pytest.raises(InvalidState) as state:
            hive.amend(CODER, number, merge_commit="abc1234")
        assert state.value.reason == "not_amendable"
        with pytest.raises(InvalidInput) as bad:
            hive.update(CODER, number, lease_id=lease.lease_id, token=lease.fencing_token,
                        summary="x", tokens=-1)
        assert bad.value.reason == "invalid_usage"


@pytest.mark.parametrize("engine", ENGINES)
def test_the_library_reports_a_raw_refusal_as_its_own_error(tmp_path: Path,
                                                           engine: str) -> None:
    """A refusal by the store itself reaches the caller as the same hivelite error on
    either engine: a claim by someone the owner stopped behind the library's back (so
    its guard, which read no stop, lets the claim reach the store)."""
    if engine == "postgres" and not pg.available():
        pytest.skip("no PostgreSQL server")
    schema = pg.new_schema() if engine == "postgres" else ""
    target = pg.store_url(schema) if engine == "postgres" else str(tmp_path / "s.db")
    try:
        with Hive.open(target, owner="ana", clock=ManualClock(START)) as hive:
            number = own_task(hive)
            raw = Raw(engine, schema or target)
            raw.execute("INSERT INTO controls(kind, agent, at, by)"
                        " VALUES ('stop', 'ana/coder', '2026-12-02T09:00:00.000Z', 'ana')")
            raw.close()
            with pytest.raises(ForbiddenRight) as err:
                hive.claim(CODER, number)
            assert err.value.reason in ("vetoed", "stopped")
    finally:
        if engine == "postgres":
            pg.drop(schema)
