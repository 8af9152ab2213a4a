"""hivelite-evidence: the evidence a result must carry before anyone is asked to review it.

A result that lacks it goes straight back to ``routed`` with the problem named
(the core journals the problems in the verifying -> routed move), so a reviewer
never spends time on a code result that shows no test run or commit.

Installing the plugin enables it on no store: it acts on a store once that store's
owner runs ``hivelite policy enable evidence`` there (``hive.enable_plugin``), and
stops after ``hivelite policy disable evidence``. (Given to ``Hive.open(plugins=[...])``
or found in a plugins folder, it acts without that.) Where it acts, with no settings
it applies the defaults below. The ``[evidence]`` table of the settings file, or a
TOML file named by ``$HIVELITE_EVIDENCE`` (the same keys at top level), replaces them
per deliverable type and replaces the url rule. Its keys:

- ``require``: a table of deliverable type = [evidence kinds]; a result of that type
  must carry at least one of them (defaults: code needs test_output or commit,
  screenshots need a screenshot);
- ``url_required``: the evidence kinds whose items must carry a url (default: link,
  pull_request);
- ``verified``: the deliverable types whose results must carry at least one piece of
  evidence that hivelite verified from its receipt (default: none).

Settings are read and checked once, when a store opens; anything malformed refuses to
open the store.
"""

from __future__ import annotations

import weakref
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, get_args

import hivelite
from hivelite import plugin_settings
from hivelite.core.models import DeliverableType, EvidenceKind, EvidenceView

NAME = "evidence"
ENV_VAR = "HIVELITE_EVIDENCE"
DELIVERABLE_TYPES: tuple[str, ...] = get_args(DeliverableType)
KINDS: tuple[str, ...] = get_args(EvidenceKind)
KEYS = ("require", "url_required", "verified")

DEFAULT_REQUIRE: Mapping[str, tuple[str, ...]] = {
    "code": ("test_output", "commit"),
    "screenshots": ("screenshot",),
}
DEFAULT_URL_REQUIRED: tuple[str, ...] = ("link", "pull_request")
DEFAULT_VERIFIED: tuple[str, ...] = ()
"""No deliverable type needs verified evidence unless the settings say so."""
SUMMARY_SHOWN = 60
"""How much of an item's summary a problem quotes (the journal's reason is short)."""


class EvidenceSettingsError(ValueError):
    """The plugin's settings are malformed; the store must not open with a guessed rule."""


@dataclass(frozen=True)
class Rules:
    """What a result must carry: kinds per deliverable type (one of them), kinds needing a
    url, and the deliverable types needing at least one piece of verified evidence."""

    require: Mapping[str, tuple[str, ...]]
    url_required: tuple[str, ...]
    source: str
    verified: tuple[str, ...] = DEFAULT_VERIFIED


# Per store, keyed by the Hive object itself so a closed, dropped store takes its rules along.
_RULES: weakref.WeakKeyDictionary[Any, Rules] = weakref.WeakKeyDictionary()


# -- settings ------------------------------------------------------------------------------


def _names(values: tuple[str, ...]) -> str:
    return ", ".join(values)


def _listed(value: object, where: str, allowed: tuple[str, ...], what: str,
            short: str) -> tuple[str, ...]:
    """A TOML array of ``what`` (evidence kinds, deliverable types), each one of
    ``allowed`` (the seed's enum), in order, without repeats."""
    if not isinstance(value, list):
        raise EvidenceSettingsError(
            f"{where} must be an array of {what}s, not {type(value).__name__} {value!r}")
    found: list[str] = []
    for item in value:
        if not isinstance(item, str):
            raise EvidenceSettingsError(
                f"{where} holds {item!r} ({type(item).__name__}); each entry is"
                f" {'an' if what[0] in 'aeiou' else 'a'} {what}: {_names(allowed)}")
        if item not in allowed:
            raise EvidenceSettingsError(
                f"{where}: unknown {what} {item!r}; known {short}: {_names(allowed)}")
        if item not in found:
            found.append(item)
    return tuple(found)


def _kind_list(value: object, where: str) -> tuple[str, ...]:
    """A TOML array of evidence kinds, checked against the seed's enum."""
    return _listed(value, where, KINDS, "evidence kind", "kinds")


def _type_list(value: object, where: str) -> tuple[str, ...]:
    """A TOML array of deliverable types, checked against the seed's enum."""
    return _listed(value, where, DELIVERABLE_TYPES, "deliverable type", "types")


def parse_rules(table: Mapping[str, Any], source: str, *, top_level: bool = False) -> Rules:
    """The defaults with ``table`` applied; raises naming ``source`` and the problem."""
    prefix = "" if top_level else f"{NAME}."
    for key in table:
        if key not in KEYS:
            hint = ""
            if top_level and key == NAME:
                hint = f" (in this file the [{NAME}] keys go at top level)"
            raise EvidenceSettingsError(
                f"{source}: unknown key {key!r}{hint}; known keys: {_names(KEYS)}")
    require = dict(DEFAULT_REQUIRE)
    if "require" in table:
        given = table["require"]
        if not isinstance(given, dict):
            raise EvidenceSettingsError(
                f"{source}: {prefix}require must be a table of deliverable type = [kinds],"
                f" not {type(given).__name__} {given!r}")
        for dtype, kinds in given.items():
            if dtype not in DELIVERABLE_TYPES:
                raise EvidenceSettingsError(
                    f"{source}: [{prefix}require] names unknown deliverable type {dtype!r};"
                    f" known types: {_names(DELIVERABLE_TYPES)}")
            require[dtype] = _kind_list(kinds, f"{source}: [{prefix}require] {dtype}")
    url_required = DEFAULT_URL_REQUIRED
    if "url_required" in table:
        url_required = _kind_list(table["url_required"], f"{source}: {prefix}url_required")
    verified = DEFAULT_VERIFIED
    if "verified" in table:
        verified = _type_list(table["verified"], f"{source}: {prefix}verified")
    return Rules(require={k: v for k, v in require.items() if v},
                 url_required=url_required, source=source, verified=verified)


def load_rules(hive: Any) -> Rules:
    """``$HIVELITE_EVIDENCE`` when set (it replaces the settings file's table), else
    ``[evidence]`` of the settings file, else the defaults."""
    settings = plugin_settings(hive, NAME, ENV_VAR)
    return parse_rules(settings.table, settings.source, top_level=settings.from_env)


def rules_for(hive: Any) -> Rules:
    """This store's rules (read at start-up; read now if start-up was bypassed)."""
    rules = _RULES.get(hive)
    if rules is None:
        rules = _RULES[hive] = load_rules(hive)
    return rules


# -- hooks ---------------------------------------------------------------------------------


@hivelite.hookimpl
def hivelite_startup(hive: Any) -> None:
    """Read and check the settings once: a malformed rule refuses to open the store."""
    _RULES[hive] = load_rules(hive)


def _quote(text: str) -> str:
    short = text if len(text) <= SUMMARY_SHOWN else text[: SUMMARY_SHOWN - 1] + "…"
    return repr(short)


def _unverified(dtype: str, evidence: list[EvidenceView]) -> str | None:
    """The problem with a result of a type that needs verified evidence, or None when at
    least one piece is verified; names why the first receipt that failed did not verify."""
    if any(item.verified for item in evidence):
        return None
    count = len(evidence)
    problem = (f"a {dtype} result needs verified evidence (a receipt hivelite checked);"
               + (" its one piece is not verified" if count == 1
                  else f" none of its {count} pieces is verified"))
    for number, item in enumerate(evidence, start=1):
        if item.receipt is not None and item.receipt.why:
            problem += f"; the receipt on evidence {number} did not verify: {item.receipt.why}"
            break
    return problem


@hivelite.hookimpl
def hivelite_check_evidence(task: hivelite.Task, result: hivelite.Result, hive: Any,
                            evidence: list[EvidenceView]) -> list[str]:
    """Each missing piece of evidence as one short sentence; empty when the result passes.

    ``evidence`` is the result's evidence as hivelite checked it (``verified`` from a
    receipt); a type listed in ``verified`` needs at least one verified piece."""
    rules = rules_for(hive)
    problems: list[str] = []
    dtype = task.packet.deliverable_type
    wanted = rules.require.get(dtype, ())
    have = list(dict.fromkeys(item.kind for item in result.evidence))
    if wanted and not any(kind in wanted for kind in have):
        problems.append(f"a {dtype} result needs {' or '.join(wanted)} evidence;"
                        f" it has only {', '.join(have)}")
    for number, item in enumerate(result.evidence, start=1):
        if item.kind in rules.url_required and not item.url:
            problems.append(f"evidence {number} ({item.kind} {_quote(item.summary)}) has no url;"
                            f" {item.kind} evidence must carry one")
    if dtype in rules.verified:
        unverified = _unverified(dtype, evidence)
        if unverified is not None:
            problems.append(unverified)
    return problems
