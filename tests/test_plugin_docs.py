"""docs/plugins.md cannot drift: every hook is documented, and the tutorial works as pasted.

The tutorial (the ``## Tutorial`` section) is run as written: a fenced block whose
info string is ``python title=PATH`` is saved to PATH, each ``sh`` block's
commands run in order with the real ``hivelite`` script in a fresh folder, and a
``text`` block right after an ``sh`` block is the output its last command must
print. Ids, times, ages and the store's absolute path differ from run to run and
are compared as placeholders; runs of spaces count as one. What ``hivelite plugins``
prints of the plugins installed in the Python running the test (the first-party
plugins, say: each ``not_enabled`` on the tutorial's store) is left out, since a
reader who follows the page has other plugins installed, or none.
"""

from __future__ import annotations

import ast
import importlib.metadata
import os
import re
import shlex
import subprocess
import tomllib
from pathlib import Path

import pytest

from hivelite import Hive
from hivelite.verbs import hookspecs
from hivelite.verbs.plugins import get_plugin_manager

from .conftest import HANG_S
from .docblocks import blocks, normal
from .test_discovery import clean_env, hivelite_script, write_distribution

ROOT = Path(__file__).resolve().parents[1]
DOC = ROOT / "docs" / "plugins.md"

HOOKS = sorted(name for name, value in vars(hookspecs).items()
               if name.startswith("hivelite_") and callable(value))


def doc_text() -> str:
    return DOC.read_text(encoding="utf-8")


def section(heading: str) -> str:
    """The text under the ``## `` heading that starts with ``heading``, up to the next one."""
    match = re.search(rf"^## {re.escape(heading)}.*?$(.*?)(?=^## |\Z)", doc_text(), re.M | re.S)
    assert match, f"docs/plugins.md has no '## {heading}' section"
    return match.group(1)


def commands(script: str) -> list[list[str]]:
    """The commands of an ``sh`` block: continuation lines joined, comments dropped."""
    joined = re.sub(r"\\\n", " ", script)
    return [shlex.split(line, comments=True) for line in joined.splitlines()
            if line.strip() and not line.lstrip().startswith("#")]


def run_hivelite(argv: list[str], cwd: Path, **env: str | None) -> str:
    """stdout of one documented ``hivelite`` command, which must succeed quietly."""
    proc = subprocess.run([str(hivelite_script()), *argv[1:]], cwd=cwd,
                          env=clean_env(**env), capture_output=True, text=True,
                          timeout=HANG_S)
    shown = shlex.join(argv)
    assert proc.returncode == 0, f"`{shown}` exited {proc.returncode}: {proc.stderr}"
    assert proc.stderr == "", f"`{shown}` wrote to stderr: {proc.stderr}"
    return proc.stdout


def installed_here() -> set[str]:
    """The plugins installed in the Python running the test."""
    return {e.name for e in importlib.metadata.entry_points(group="hivelite")}


def without_installed(argv: list[str], output: str) -> str:
    """``output`` but, when ``argv`` is ``hivelite ... plugins``, the rows of the plugins
    installed here (none of them enabled on the page's store, each ``not_enabled``)."""
    if argv[-1] != "plugins":
        return output
    here = installed_here()
    kept = []
    for line in output.splitlines(keepends=True):
        name = line.split(" ", 1)[0]
        if name in here:
            assert " not_enabled (" in line, line  # installed, so listed; enabled on no store
            continue
        kept.append(line)
    return "".join(kept)


def play(text: str, cwd: Path, skip: tuple[str, ...] = (), **env: str | None) -> int:
    """Run a section's blocks in order; returns how many outputs were compared."""
    last: tuple[str, str] | None = None  # the last command run and its output
    compared = 0
    for block in blocks(text):
        if "title" in block.attrs:
            path = cwd / block.attrs["title"]
            path.parent.mkdir(parents=True, exist_ok=True)  # "move the file to FOLDER/..."
            path.write_text(block.body)
        elif block.lang == "sh":
            last = None
            for argv in commands(block.body):
                if argv[0] in skip:
                    continue
                if argv[0] == "mkdir":
                    for name in argv[1:]:
                        (cwd / name).mkdir()
                    last = None
                    continue
                assert argv[0] == "hivelite", f"the docs test cannot run `{shlex.join(argv)}`"
                last = (shlex.join(argv), without_installed(argv, run_hivelite(argv, cwd,
                                                                               **env)))
        elif block.lang == "text":
            assert last is not None, f"a text block follows no hivelite command:\n{block.body}"
            shown, output = last
            assert normal(output) == normal(block.body), (
                f"`{shown}` printed\n{output}\nbut docs/plugins.md shows\n{block.body}")
            compared += 1
            last = None
        else:
            raise AssertionError(f"the docs test cannot run a {block.lang!r} block:\n{block.body}")
    return compared


# -- every hook is documented -----------------------------------------------------------------


def test_hookspecs_are_found() -> None:
    assert "hivelite_permission_gate" in HOOKS
    assert len(HOOKS) >= 6


@pytest.mark.parametrize("hook", HOOKS)
def test_every_hook_is_in_the_docs(hook: str) -> None:
    text = doc_text()
    heading = re.search(rf"^#+ `?{hook}`?\s*$", text, re.M)
    assert heading or f"`{hook}`" in text, (
        f"{hook} (hivelite/verbs/hookspecs.py) is not documented in docs/plugins.md")


def test_every_documented_hook_exists() -> None:
    documented = set(re.findall(r"^### `(hivelite_\w+)`", doc_text(), re.M))
    assert documented, "docs/plugins.md has no '### `hivelite_...`' hook sections"
    assert documented <= set(HOOKS), f"documented but not in hookspecs: {documented - set(HOOKS)}"


def test_code_blocks_are_valid() -> None:
    for block in blocks(doc_text()):
        if block.lang == "python":
            ast.parse(block.body)
        elif block.lang == "toml":
            tomllib.loads(block.body)


def test_hook_examples_load_as_plugins(tmp_path: Path) -> None:
    """Each example with module-level hooks is a plugin that passes the start-up checks."""
    examples = [b.body for b in blocks(doc_text())
                if b.lang == "python" and "\n@hivelite.hookimpl" in "\n" + b.body]
    assert len(examples) >= len(HOOKS)
    for number, body in enumerate(examples):
        (tmp_path / f"example_{number}.py").write_text(body)
    rows = get_plugin_manager(tmp_path).describe()  # loads no installed plugin
    loaded = {row["name"]: row["hooks"] for row in rows if row["source"].startswith("file ")}
    assert len(loaded) == len(examples)
    assert all(loaded.values()), f"an example implements no hook: {loaded}"
    assert set(HOOKS) <= {hook for hooks in loaded.values() for hook in hooks}


# -- the tutorial works when pasted ---------------------------------------------------------


def test_tutorial_works_as_written(tmp_path: Path) -> None:
    text = section("Tutorial")
    files = [b.attrs["title"] for b in blocks(text) if b.lang == "python" and "title" in b.attrs]
    assert files, "the tutorial has no ```python title=... block"
    compared = play(text, tmp_path, HIVELITE_DB=str(tmp_path / "hivelite.db"))
    assert compared >= 5, "the tutorial should show what its commands print"

    # What the tutorial promises: the policy decided a handoff, and the journal says so.
    plugin = Path(files[0]).stem
    with Hive.open(tmp_path / "hivelite.db", owner="ana") as hive:
        gate_rows = [r for r in hive.journal() if r.actor == "gate"]
    decided = [r for r in gate_rows if r.detail and r.detail["decided_by"] == plugin]
    assert decided, f"no handoff in the tutorial was decided by {plugin}"
    assert any(r.detail and r.detail["decided_by"] != plugin for r in gate_rows), (
        "the tutorial should also show a handoff the policy left alone")


def test_packaged_tutorial_plugin_loads_from_its_entry_point(tmp_path: Path) -> None:
    """The pyproject in the docs declares the entry point that ``hivelite plugins`` shows:
    installed, it is listed and acts nowhere; once the store's owner enables it there,
    it loads and decides, as the page says.

    ``pip install`` is too slow for the suite: the test puts what it would install
    (the module and its .dist-info, entry points taken from the documented
    pyproject) on PYTHONPATH instead. The reader has the tutorial's store, so the test
    makes one.
    """
    text = section("Packaging a plugin")
    pyproject = next(b for b in blocks(text)
                     if b.lang == "toml" and b.attrs.get("title", "").endswith("pyproject.toml"))
    project = tomllib.loads(pyproject.body)
    entry_points = project["project"]["entry-points"]["hivelite"]
    assert entry_points, "the documented pyproject declares no `hivelite` entry point"
    modules = project["tool"]["setuptools"]["py-modules"]
    tutorial_plugin = next(b for b in blocks(section("Tutorial"))
                           if b.lang == "python" and "title" in b.attrs)
    site = tmp_path / "site"
    for value in entry_points.values():
        assert value in modules, f"entry point module {value} is not in py-modules"
    write_distribution(site, project["project"]["name"], modules[0], entry_points,
                       tutorial_plugin.body)
    assert any(argv[:2] == ["pip", "install"] for b in blocks(text) if b.lang == "sh"
               for argv in commands(b.body))
    path = os.pathsep.join([str(site), *filter(None, [os.environ.get("PYTHONPATH")])])
    run_hivelite(["hivelite", "init", "--owner", "ana"], tmp_path, PYTHONPATH=path)
    compared = play(text, tmp_path, skip=("pip",), PYTHONPATH=path)
    assert compared == 2

    # enabled, it decides a handoff in every process that opens the store
    [name] = entry_points
    handed = run_hivelite(["hivelite", "--json", "handoff", "--agent", "ana/planner",
                           "--instance", "desktop", "--assignee", "ana/coder", "--project",
                           "shop", "--task", "Add an orders table", "--type", "code",
                           "--accept", "it applies", "--file", "migrations/0007_orders.sql"],
                          tmp_path, PYTHONPATH=path)
    assert '"waiting_on": "owner_approval"' in handed
    with Hive.open(tmp_path / "hivelite.db", owner="ana") as hive:
        [gate] = [r for r in hive.journal() if r.actor == "gate"]
        assert hive.policy().enabled_plugins == [name]
    assert gate.detail is not None and gate.detail["decided_by"] == name
