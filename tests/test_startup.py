"""A fast CLI (issue 18): ``hivelite --version``, ``--help`` and the verbs that need no
store import neither pydantic nor SQLite nor the library's models; ``import hivelite``
imports nothing until a name is used. What is checked is which modules a real process
loaded, not how long it took (bench/startup.py prints the times)."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

import hivelite

HEAVY = ("pydantic", "apsw", "jsonschema", "pluggy", "hivelite.core.models", "hivelite.hive",
         "hivelite.store", "hivelite.core.caller", "importlib.metadata")


def loaded(code: str) -> list[str]:
    """The modules a fresh interpreter has after running ``code``."""
    ran = subprocess.run(
        [sys.executable, "-c", code + "\nimport sys, json\n"
         "print(json.dumps(sorted(sys.modules)), file=sys.__stderr__)"],
        capture_output=True, text=True, timeout=60, check=True)
    found: list[str] = json.loads(ran.stderr.strip().splitlines()[-1])
    return found


def heavy_in(modules: list[str]) -> list[str]:
    return [m for m in modules if any(m == h or m.startswith(h + ".") for h in HEAVY)]


@pytest.mark.parametrize("args", [["--version"], ["--help"], ["states"], ["completion", "bash"],
                                  ["list", "--help"], ["serve", "--help"],
                                  ["policy", "--help"]], ids=" ".join)
def test_the_cli_s_light_calls_load_nothing_heavy(args: list[str]) -> None:
    code = ("from hivelite.faces.cli.main import main\n"
            f"try:\n    main({args!r})\nexcept SystemExit:\n    pass")
    assert heavy_in(loaded(code)) == []


def test_a_verb_on_a_store_loads_what_it_needs(tmp_path: object) -> None:
    """The check above can fail: a verb that opens a store does load the models."""
    code = ("from hivelite.faces.cli.main import main\n"
            f"try:\n    main(['--db', {str(tmp_path) + '/s.db'!r}, 'init', '--owner', 'ana'])\n"
            "except SystemExit:\n    pass")
    assert "hivelite.core.models" in heavy_in(loaded(code))


def test_importing_hivelite_loads_no_name_until_it_is_used() -> None:
    assert heavy_in(loaded("import hivelite")) == []
    assert "hivelite.hive" in loaded("from hivelite import Hive")


def test_every_public_name_resolves_from_where_it_is_said_to_live() -> None:
    exports = hivelite._EXPORTS
    assert sorted(exports) == sorted(hivelite.__all__)
    for name, module in exports.items():
        assert getattr(hivelite, name) is getattr(sys.modules[module], name), name
    with pytest.raises(AttributeError, match="no attribute 'Nothing'"):
        hivelite.Nothing  # noqa: B018
    assert {"Hive", "Caller", "__version__"} <= set(dir(hivelite))
