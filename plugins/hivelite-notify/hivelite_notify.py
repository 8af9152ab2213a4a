"""hivelite-notify: tell the outside world about every committed move.

Each move a store commits becomes one JSON event, appended as a line to a JSON
Lines file and/or piped to a command's stdin. It runs in
``hivelite_on_transition``, i.e. after the commit: if a target fails, the error
is raised so hivelite records it (``hive.notify_failures``, a ``warning:`` on the
CLI's stderr), but the move itself stays committed.

Each event names the move (its number, name, states, actor, journal time and seq)
and the task: its id, number, project and agents, and ``task_object``, the whole
task object of seed 000 as the store has it after the commit.

Settings: the ``[notify]`` table of the settings file (``file``, ``command``,
``timeout``), overridden by ``$HIVELITE_NOTIFY_FILE`` and
``$HIVELITE_NOTIFY_COMMAND``. Nothing set: the plugin does nothing.

Installing the plugin enables it on no store: it acts on a store once that store's
owner runs ``hivelite policy enable notify`` there (``hive.enable_plugin``), and stops
after ``hivelite policy disable notify``. (Given to ``Hive.open(plugins=[...])`` or
found in a plugins folder, it acts without that.)
"""

from __future__ import annotations

import json
import math
import os
import shlex
import signal
import subprocess
import weakref
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from hivelite import State, Task, hookimpl, settings_path
from hivelite.core.protocol import Move

SECTION = "notify"
ENV_FILE = "HIVELITE_NOTIFY_FILE"
ENV_COMMAND = "HIVELITE_NOTIFY_COMMAND"
DEFAULT_TIMEOUT = 10.0
KNOWN_KEYS = ("command", "file", "timeout")
STDERR_TAIL = 500
"""How many characters of a failing command's stderr go into the error."""
FILE_MODE = 0o600
"""Events name tasks and agents: the file is as private as the store."""


class NotifySettingsError(ValueError):
    """The ``[notify]`` settings or the environment variables are malformed."""


class NotifyError(RuntimeError):
    """A target failed; hivelite logs it after the commit and keeps it in notify_failures."""


@dataclass(frozen=True)
class Targets:
    """Where one store's events go, read once when the store opens."""

    file: Path | None = None
    command: tuple[str, ...] | None = None
    timeout: float = DEFAULT_TIMEOUT

    @property
    def empty(self) -> bool:
        return self.file is None and self.command is None


# Per store, dropped with the Hive object (no leak, no id() reuse between stores).
_TARGETS: weakref.WeakKeyDictionary[Any, Targets] = weakref.WeakKeyDictionary()


# -- settings -----------------------------------------------------------------


def read_targets(hive: Any) -> Targets:
    """The store's targets from ``[notify]`` and the environment (env wins), checked."""
    where = f"{settings_path(hive.path) or '$HIVELITE_CONFIG'}: [{SECTION}]"
    table = hive.settings(SECTION)
    unknown = sorted(set(table) - set(KNOWN_KEYS))
    if unknown:
        raise NotifySettingsError(
            f"{where}: unknown key(s) {', '.join(map(repr, unknown))}"
            f" (known: {', '.join(KNOWN_KEYS)})")

    file_text: str | None = None
    if "file" in table:
        file_text = table["file"]
        if not isinstance(file_text, str) or not file_text.strip():
            raise NotifySettingsError(f"{where}: file must be a non-empty path string,"
                                      f" not {file_text!r}")
    env_file = os.environ.get(ENV_FILE)
    if env_file is not None:
        if not env_file.strip():
            raise NotifySettingsError(f"${ENV_FILE} is set but empty; unset it or give a path")
        file_text, where_file = env_file, f"${ENV_FILE}"
    else:
        where_file = where

    command: tuple[str, ...] | None = None
    if "command" in table:
        command = _command_from_table(table["command"], where)
    env_command = os.environ.get(ENV_COMMAND)
    if env_command is not None:
        try:
            words = shlex.split(env_command)
        except ValueError as exc:
            raise NotifySettingsError(f"${ENV_COMMAND}: cannot split {env_command!r}: {exc}"
                                      ) from None
        if not words:
            raise NotifySettingsError(f"${ENV_COMMAND} is set but empty; unset it or give a"
                                      " command")
        command = tuple(words)

    timeout = DEFAULT_TIMEOUT
    if "timeout" in table:
        value = table["timeout"]
        if (isinstance(value, bool) or not isinstance(value, int | float)
                or not math.isfinite(value) or value <= 0):
            raise NotifySettingsError(f"{where}: timeout must be a positive number of seconds,"
                                      f" not {value!r}")
        timeout = float(value)

    beside = Path(hive.path) if hive.path is not None else Path.cwd() / "store"
    path = _event_file(file_text, beside, where_file) if file_text else None
    return Targets(file=path, command=command, timeout=timeout)


def _command_from_table(value: Any, where: str) -> tuple[str, ...]:
    """``command`` is a list of strings (no shell): the program, then its arguments."""
    if not isinstance(value, list) or not all(isinstance(w, str) for w in value):
        raise NotifySettingsError(f"{where}: command must be a list of strings like"
                                  f' ["notify-send", "hivelite"], not {value!r}')
    if not value or not value[0].strip():
        raise NotifySettingsError(f"{where}: command is empty; name a program to run")
    return tuple(value)


def _event_file(text: str, store: Path, where: str) -> Path:
    """The events file as an absolute path; a relative one is beside the store."""
    path = Path(text).expanduser()
    if not path.is_absolute():
        path = store.parent / path
    path = path.absolute()
    if path.is_dir():
        raise NotifySettingsError(f"{where}: file {str(path)!r} is a directory")
    if not path.parent.is_dir():
        raise NotifySettingsError(f"{where}: file {str(path)!r}: its folder does not exist")
    return path


def _targets(hive: Any) -> Targets:
    try:
        return _TARGETS[hive]
    except KeyError:  # a hive built without Hive.open: read now
        targets = _TARGETS[hive] = read_targets(hive)
        return targets


# -- the event ----------------------------------------------------------------


def event_for(task: Task, move: Move, actor: str, hive: Any,
              number: int | None = None) -> dict[str, Any]:
    """One move as a plain JSON object (the task is as it stands after the commit).

    ``task`` is the task's id (as in the journal); ``task_object`` is the whole task
    object of seed 000 (``Task.to_json_dict()``: every key, ``null`` ones too).
    """
    return {
        "at": task.updated_at,
        "task": task.id,
        "number": number if number is not None else hive.get(task.id).number,
        "move": move.number,
        "name": move.name,
        "from": move.source.value,
        "to": move.target.value,
        "waiting_on": _waiting_on(task, move),
        "actor": actor,
        "project": task.project,
        "requester": task.requester,
        "assignee": task.assignee,
        "store": (str(Path(hive.path).absolute()) if hive.path is not None  # relative: no
                  else hive.store.location),                                # store named
        "task_object": task.to_json_dict(),
    }


def _waiting_on(task: Task, move: Move) -> str | None:
    """What a move into ``waiting`` waits on; None for every other move."""
    if move.target is not State.waiting:
        return None
    if task.state is State.waiting and task.waiting_on is not None:
        return task.waiting_on.value
    # The task moved on before we looked (another process): name it if the move allows one.
    return move.to_waiting[0].value if len(move.to_waiting) == 1 else None


# -- the targets --------------------------------------------------------------


def append_line(path: Path, line: str) -> None:
    """Append one line with a single ``write`` on an ``O_APPEND`` file.

    One write per line is what lets several processes append to the same file
    without interleaving their lines.
    """
    data = (line + "\n").encode("utf-8")
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, FILE_MODE)
    try:
        written = os.write(fd, data)
        if written != len(data):  # a full disk or a quota: say so, never a silent half line
            raise OSError(f"short write ({written} of {len(data)} bytes)")
    finally:
        os.close(fd)


def run_command(command: tuple[str, ...], payload: str, timeout: float) -> None:
    """Run ``command`` (no shell) with ``payload`` on stdin; fail on a non-zero exit or timeout.

    Its stdout is discarded (the CLI's own stdout must stay one JSON document);
    its stderr's tail goes into the error. It runs in its own process group so
    a timeout kills whatever it started too.
    """
    shown = shlex.join(command)
    posix = os.name == "posix"
    try:
        proc = subprocess.Popen(command, stdin=subprocess.PIPE, stdout=subprocess.DEVNULL,
                                stderr=subprocess.PIPE, start_new_session=posix)
    except OSError as exc:
        raise NotifyError(f"command {shown!r} could not start: {exc}") from None
    try:
        _, err = proc.communicate(payload.encode("utf-8"), timeout=timeout)
    except subprocess.TimeoutExpired as exc:
        _kill(proc, posix)
        try:
            _, err = proc.communicate(timeout=1)
        except subprocess.TimeoutExpired:  # something escaped the group and holds stderr
            err = exc.stderr or b""
            proc.wait()
        raise NotifyError(f"command {shown!r} timed out after {timeout:g} s and was killed"
                          f"{_tail(err)}") from None
    except BaseException:
        _kill(proc, posix)
        proc.wait()
        raise
    if proc.returncode < 0:
        raise NotifyError(f"command {shown!r} was killed by signal {-proc.returncode}"
                          f"{_tail(err)}")
    if proc.returncode != 0:
        raise NotifyError(f"command {shown!r} exited with status {proc.returncode}{_tail(err)}")


def _kill(proc: subprocess.Popen[bytes], posix: bool) -> None:
    try:
        if posix:
            os.killpg(proc.pid, signal.SIGKILL)
        else:
            proc.kill()
    except (ProcessLookupError, PermissionError):
        pass


def _tail(err: bytes | None) -> str:
    text = (err or b"").decode("utf-8", errors="replace").strip()
    if not text:
        return ""
    if len(text) > STDERR_TAIL:
        text = "..." + text[-STDERR_TAIL:]
    return f"; stderr: {text}"


# -- hooks --------------------------------------------------------------------


@hookimpl
def hivelite_startup(hive: Any) -> None:
    """Check the settings when the store opens, so a typo refuses to start."""
    _TARGETS[hive] = read_targets(hive)


@hookimpl
def hivelite_on_transition(task: Task, move: Move, actor: str, hive: Any,
                           entry: Any) -> None:
    """Send one event to each target; raise if any failed (the move stays committed)."""
    targets = _targets(hive)
    if targets.empty:
        return
    event = event_for(task, move, actor, hive, entry.number if entry is not None else None)
    if entry is not None:  # the move's own journal row: its time and sequence number
        event["at"], event["seq"] = entry.at, entry.seq
    line = json.dumps(event, ensure_ascii=False)
    problems: list[str] = []
    if targets.file is not None:
        try:
            append_line(targets.file, line)
        except OSError as exc:
            problems.append(f"cannot append to {str(targets.file)!r}: {exc}")
    if targets.command is not None:
        try:
            run_command(targets.command, line, targets.timeout)
        except NotifyError as exc:
            problems.append(str(exc))
    if problems:
        raise NotifyError("; ".join(problems))
