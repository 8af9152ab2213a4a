"""The ``hivelite`` entry points installed on this Python's path, kept between calls.

Finding entry points reads the metadata of every installed distribution (some
milliseconds with a few dozen installed, more with hundreds), and the CLI is one
process per call. So the list found is kept in a file in the user's cache folder,
under a key made of what installing or removing a distribution changes: each path
entry, and each ``.dist-info``/``.egg-info`` entry in it with the times its folder
and its ``entry_points.txt`` were last changed. Any change there makes a new key,
and the metadata is read afresh. A cache file anybody else could have written is
ignored, like a plugins folder that is not private.
"""

from __future__ import annotations

import hashlib
import json
import os
import stat
import sys
from contextlib import suppress
from dataclasses import dataclass
from pathlib import Path

GROUP = "hivelite"
CACHE_NAME = "entry-points.json"
_INFO = (".dist-info", ".egg-info")


@dataclass(frozen=True)
class EntryPoint:
    """One installed plugin as the manager loads and names it."""

    name: str
    value: str
    """``module:attribute``, as the distribution declares it."""
    dist: str
    version: str

    def load(self) -> object:
        from importlib.metadata import EntryPoint as Declared

        return Declared(self.name, self.value, GROUP).load()


def cache_folder() -> Path:
    """``$HIVELITE_CACHE_DIR``, else ``$XDG_CACHE_HOME/hivelite``, else ``~/.cache/hivelite``."""
    named = os.environ.get("HIVELITE_CACHE_DIR")
    if named:
        return Path(named)
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "hivelite"


def path_key(path: list[str] | None = None) -> str:
    """What the entry points found on ``path`` (``sys.path``) depend on, as one hash."""
    digest = hashlib.sha256()
    for entry in sys.path if path is None else path:
        digest.update(f"\0{entry}\0".encode("utf-8", "surrogateescape"))
        try:
            with os.scandir(entry or ".") as found:
                infos = sorted(e.name for e in found if e.name.endswith(_INFO))
        except OSError:  # a zip file, or gone: its own time stands for its content
            infos = []
            with suppress(OSError):
                digest.update(str(os.stat(entry).st_mtime_ns).encode())
        for name in infos:
            folder = os.path.join(entry or ".", name)
            times = []
            for part in (folder, os.path.join(folder, "entry_points.txt")):
                try:
                    times.append(os.stat(part).st_mtime_ns)
                except OSError:
                    times.append(0)
            digest.update(f"{name}\0{times[0]}\0{times[1]}\0".encode("utf-8", "surrogateescape"))
    return digest.hexdigest()


def entry_points() -> list[EntryPoint]:
    """The installed ``hivelite`` entry points: from the cache when its key still holds,
    else read from the distributions' metadata (and kept for the next call)."""
    key = path_key()
    cache = cache_folder() / CACHE_NAME
    kept = _read(cache, key)
    if kept is not None:
        return kept
    import importlib.metadata  # only when the cache does not hold: a cold import costs

    found = [EntryPoint(ep.name, ep.value, ep.dist.name if ep.dist is not None else "?",
                        ep.dist.version if ep.dist is not None else "?")
             for ep in importlib.metadata.entry_points(group=GROUP)]
    _write(cache, key, found)
    return found


def _read(cache: Path, key: str) -> list[EntryPoint] | None:
    try:
        with cache.open("rb") as handle:
            info = os.fstat(handle.fileno())
            if info.st_uid != os.getuid() or info.st_mode & (stat.S_IWGRP | stat.S_IWOTH):
                return None  # somebody else could have named the code to load
            data = json.loads(handle.read())
        if data.get("key") != key:
            return None
        return [EntryPoint(*(str(v) for v in row)) for row in data["entry_points"]]
    except (OSError, ValueError, TypeError, KeyError, AttributeError):
        return None


def _write(cache: Path, key: str, found: list[EntryPoint]) -> None:
    """Keep the list, atomically; a cache that cannot be written is no error."""
    import tempfile

    text = json.dumps({"key": key, "entry_points": [
        [e.name, e.value, e.dist, e.version] for e in found]})
    with suppress(OSError):
        cache.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
        handle, temporary = tempfile.mkstemp(dir=cache.parent, prefix=".entry-points-")
        try:
            with os.fdopen(handle, "w") as out:
                out.write(text)
            os.replace(temporary, cache)
        finally:
            with suppress(OSError):
                os.unlink(temporary)

