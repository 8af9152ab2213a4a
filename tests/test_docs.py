"""The documentation that is generated or promised: docs/cli.md, the README's commands, CI.

DESIGN §2: the README has two set-up commands (run the demo, run the tests);
``.ci/run`` runs exactly the README's test command; ``docs/cli.md`` is generated
from the click commands and must not drift.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

from hivelite.docs.cli import cli_page
from hivelite.faces.cli.main import cli

from .conftest import HANG_S
from .test_cli_e2e import hivelite_command

ROOT = Path(__file__).resolve().parents[1]
CLI_MD = ROOT / "docs" / "cli.md"
REGENERATE = "docs/cli.md is out of date: run `python -m hivelite.docs.cli > docs/cli.md`"
TIMEOUT = HANG_S


def fresh(argv: list[str], **env: str) -> str:
    """stdout of a new process: click caches each command's help option on first use, so
    help rendered earlier in this process could change what ``cli_page()`` prints."""
    clean = {k: v for k, v in os.environ.items() if not k.startswith("HIVELITE_")}
    proc = subprocess.run(argv, capture_output=True, text=True, timeout=TIMEOUT, cwd=ROOT,
                          env={**clean, "HIVELITE_LOAD_PLUGINS": "", **env}, check=True)
    return proc.stdout


def section(name: str) -> str:
    """The fenced help text under ``## <name>`` in docs/cli.md."""
    text = CLI_MD.read_text(encoding="utf-8")
    match = re.search(rf"^## {re.escape(name)}\n\n```\n(.*?)\n```$", text, re.M | re.S)
    assert match, f"no section '## {name}' in docs/cli.md"
    return match.group(1)


def readme_commands() -> tuple[str, str]:
    """The README's two set-up commands: the line after ``# 1.`` and after ``# 2.``."""
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    for block in re.findall(r"^```sh\n(.*?)^```", text, re.M | re.S):
        lines = block.splitlines()
        marks = [i for i, line in enumerate(lines) if line.startswith(("# 1.", "# 2."))]
        if len(marks) == 2:
            return lines[marks[0] + 1].strip(), lines[marks[1] + 1].strip()
    raise AssertionError("README.md has no ```sh block with the commands '# 1.' and '# 2.'")


def test_cli_page_is_generated_from_the_commands() -> None:
    generated = fresh([sys.executable, "-m", "hivelite.docs.cli"])
    assert CLI_MD.read_text(encoding="utf-8") == generated, REGENERATE
    assert cli_page().startswith(generated.split("\n## hivelite\n")[0])


def test_cli_md_shows_what_help_prints() -> None:
    """The generated page is what a user sees from ``--help`` (at 100 columns), the
    group's ``-h, --help`` included."""
    for name, args in (("hivelite", ["--help"]), ("hivelite list", ["list", "--help"])):
        shown = fresh([*hivelite_command(), *args], COLUMNS="100").rstrip("\n")
        assert section(name) == shown, f"`{name} --help` differs from docs/cli.md"


def test_every_command_has_a_section_in_cli_md() -> None:
    text = CLI_MD.read_text(encoding="utf-8")
    missing = [name for name in cli.commands if f"\n## hivelite {name}\n" not in text]
    assert missing == [], f"{missing} not in docs/cli.md; {REGENERATE}"


def test_ci_runs_the_readme_test_command_verbatim() -> None:
    _, tests = readme_commands()
    assert "pytest" in tests
    ci = (ROOT / ".ci" / "run").read_text(encoding="utf-8")
    assert tests in ci.splitlines(), f".ci/run does not run the README's command: {tests}"


def test_readme_first_command_runs_the_demo() -> None:
    demo, _ = readme_commands()
    assert demo.endswith("hivelite demo"), demo


def test_api_page_is_generated_from_the_hive() -> None:
    from hivelite.docs.api import api_page

    committed = (Path(__file__).parent.parent / "docs" / "api.md").read_text()
    assert committed == api_page(), (
        "docs/api.md drifted from Hive: run `python -m hivelite.docs.api > docs/api.md`")


def test_every_public_verb_is_in_api_md() -> None:
    import inspect

    from hivelite import Hive

    page = (Path(__file__).parent.parent / "docs" / "api.md").read_text()
    verbs = [n for n, _ in inspect.getmembers(Hive, inspect.isfunction)
             if not n.startswith("_") and n not in ("open", "close", "settings")]
    assert verbs and all(f"### `{verb}`" in page for verb in verbs)


def test_verbs_page_is_generated_from_the_verb_table() -> None:
    from hivelite.docs.verbs import verbs_page

    assert (ROOT / "docs" / "verbs.md").read_text(encoding="utf-8") == verbs_page(), (
        "docs/verbs.md drifted: python -m hivelite.docs.verbs > docs/verbs.md")
