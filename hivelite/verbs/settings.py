"""Settings: ``hivelite.toml`` beside a store, and the TOML files plugins are pointed at.

One place reads TOML, so every plugin's settings fail the same clear way: the
message names the file and what is wrong with it, and the store does not open.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..core.errors import InvalidInput


def settings_path(store_path: str | os.PathLike[str] | None) -> Path | None:
    """``$HIVELITE_CONFIG``, else ``hivelite.toml`` beside the store file; None for a
    store that is no file (on PostgreSQL) when ``$HIVELITE_CONFIG`` is not set."""
    configured = os.environ.get("HIVELITE_CONFIG")
    if configured:
        return Path(configured)
    return None if store_path is None else Path(store_path).parent / "hivelite.toml"


def read_toml(path: Path, what: str) -> dict[str, Any]:
    """A TOML file's tables; any problem is ``422 invalid_config`` naming ``what`` and the file."""
    def fail(problem: str) -> InvalidInput:
        return InvalidInput("invalid_config", f"{what} {path} {problem}", field=str(path))

    if not path.exists():
        raise fail("cannot be read: it does not exist")
    if path.is_dir():
        raise fail("cannot be read: it is a folder")
    import tomllib

    try:
        with path.open("rb") as handle:
            return tomllib.load(handle)
    except tomllib.TOMLDecodeError as exc:
        raise fail(f"is not valid TOML: {exc}") from None
    except UnicodeDecodeError as exc:
        raise fail(f"is not UTF-8 text: {exc}") from None
    except OSError as exc:
        raise fail(f"cannot be read: {exc.strerror or exc}") from None


def load_settings(store_path: Path | None) -> dict[str, Any]:
    """The settings file's tables (plugins read theirs with ``hive.settings(name)``);
    none when there is no file, unless ``$HIVELITE_CONFIG`` names one. A store that is no
    file (on PostgreSQL) has only ``$HIVELITE_CONFIG``'s."""
    path = settings_path(store_path)
    if path is None or (not os.environ.get("HIVELITE_CONFIG") and not path.exists()):
        return {}
    return read_toml(path, "settings file")


@dataclass(frozen=True)
class PluginSettings:
    """A plugin's settings table and where it came from (for its error messages)."""

    table: dict[str, Any]
    source: str
    from_env: bool


def plugin_settings(hive: Any, section: str, env_var: str) -> PluginSettings:
    """``$env_var``'s file when set (its keys at the top level), else the ``[section]``
    table of the settings file: the one rule every first-party plugin follows."""
    named = os.environ.get(env_var)
    if named:
        path = Path(named).absolute()
        table = read_toml(path, f"${env_var} file")
        declare = getattr(hive, "runs_with", None)
        if declare is not None:  # a store that requires the plugin binds what it read
            declare(section, table)
        return PluginSettings(table, f"${env_var} file {path}", True)
    file = settings_path(hive.path)
    source = (f"[{section}] in settings file {file.absolute()}" if file is not None
              else f"[{section}] (no settings file: the store is no file; $HIVELITE_CONFIG"
              " names one)")
    return PluginSettings(hive.settings(section), source, False)
