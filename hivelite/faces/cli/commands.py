"""The ``hivelite`` verbs but the reads (``reads``): a thin click layer over
:class:`hivelite.Hive`, each command added to the group of ``main``, which imports this
module when one of them is called (or the help lists them all).
"""

from __future__ import annotations

import json
import os
import re
import sys
from collections import Counter
from collections.abc import Callable, Iterable, Iterator, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

from ...core import diagrams
from ...core.clock import clock_from_env, format_ts
from ...core.errors import HiveliteError, InvalidInput, StoreError, UnexpectedError
from ...core.jsontext import loads_bounded, text_lines
from ...core.progress import counted, lines_in
from ...core.protocol import MAX_WAIT
from ...verbs.table import VERBS
from ..render import lease_text
from ..terminal import printable
from .context import (
    Context,
    acting,
    caller_options,
    global_options,
    login_owner,
    pass_context,
    plain,
)
from .main import cli
from .owner import COMMANDS
from .progress import progress
from .receipts import COMMANDS as RECEIPT_COMMANDS
from .serve import mcp_stdio, serve
from .verbs import (
    BESPOKE,
    COMMAND_OF,
    ENVIRONMENT,
    EXPORT,
    MORE,
    VerbCommand,
    exports,
)
from .witness import witness

if TYPE_CHECKING:
    from ...hive import Hive
    from ...store.sqlite import SqliteStore


@cli.command()
@click.option("--owner", envvar="HIVELITE_OWNER", help="The person who owns the store, e.g."
              " ana ($HIVELITE_OWNER); required for a new store.")
@click.option("--parents", is_flag=True, help="Make the store's folder (and its parents) if"
              " missing.")
@pass_context
def init(ctx: Context, owner: str | None, parents: bool) -> None:
    """Create a store (mode 0600) for its owner; an existing one is left as it is.

    \b
    Example:
      hivelite init --owner ana
    """
    with ctx.open_store(create=True, owner=owner, parents=parents) as hive:
        data = {"db": ctx.where(), "owner": hive.owner,
                "schema_version": hive.store.schema_version}
        ctx.emit(data, lambda: f"store {data['db']} ready (owner {hive.owner})")


@cli.command()
@click.option("--requester", help="owner/agent handing the work over, e.g. ana/planner"
              " (default: --agent; required when acting as the owner).")
@click.option("--assignee", help="owner/agent who will do it, e.g. ana/coder (required,"
              " unless --from-jsonl).")
@click.option("--project", help="Project name, e.g. shop (required, unless --from-jsonl).")
@click.option("--task", "text", help="What to do, 5-500 characters (required, unless"
              " --packet or --from-jsonl).")
@click.option("--type", "deliverable_type", default="other", show_default=True,
              help="Deliverable type: code, doc, answer, screenshots, reviewed_pr, design, "
              "data, other.")
@click.option("--accept", "acceptance", multiple=True, help="An acceptance criterion (repeat;"
              " at least one is required, unless --packet or --from-jsonl).")
@click.option("--context", "context_text", default="", help="Background for the assignee.")
@click.option("--file", "files", multiple=True, help="A file the work concerns (repeat).")
@click.option("--depends-on", multiple=True, help="A task (its number or id) that must"
              " complete first (repeat).")
@click.option("--packet", "packet_file", type=click.File("rb"),
              help="The whole packet as JSON from a file, or - for stdin.")
@click.option("--id", "task_id", help="Use this task id instead of a generated one.")
@click.option("--priority", default="normal", show_default=True,
              type=click.Choice(["low", "normal", "high", "urgent"]))
@click.option("--label", "labels", multiple=True, help="A label (repeat).")
@click.option("--role", help="The role its assignee must be enrolled in to claim it, e.g."
              " reviewer (hivelite enrol).")
@click.option("--from-jsonl", "jsonl", type=click.File("rb"),
              help="Many tasks, one JSON object a line (requester, assignee, project,"
              " packet, ...), from a file or - for stdin: all in one transaction, or none.")
@caller_options(agent_verb=False)
@pass_context
def handoff(ctx: Context, requester: str | None, assignee: str | None, project: str | None,
            text: str | None, deliverable_type: str, acceptance: Sequence[str],
            context_text: str, files: Sequence[str], depends_on: Sequence[str],
            packet_file: Any, task_id: str | None, priority: str, labels: Sequence[str],
            role: str | None, jsonl: Any, agent: str | None, instance: str | None,
            session: str | None) -> None:
    """Hand work to an agent; the owner's gate routes, holds or refuses it.

    Acts as the agent named by --agent and --instance (or their $HIVELITE_ variables), which
    hands off as itself (--requester defaults to it); else as the store's owner (you must
    own the store file), who hands off for any --requester.

    \b
    Example:
      hivelite handoff --requester ana/planner --assignee ana/coder \\
        --project site --task "Fix the login bug" --type code --accept "tests pass"
      hivelite handoff --from-jsonl tasks.jsonl
    """
    if jsonl is not None:
        _handoff_many(ctx, jsonl, requester, agent, instance, session, given=[
            name for name, value in (
                ("--assignee", assignee), ("--project", project), ("--task", text),
                ("--packet", packet_file), ("--id", task_id), ("--label", labels),
                ("--accept", acceptance), ("--file", files), ("--depends-on", depends_on),
                ("--context", context_text), ("--type", deliverable_type != "other"),
                ("--priority", priority != "normal"), ("--role", role)) if value])
        return
    for name, value in (("--assignee", assignee), ("--project", project)):
        if value is None:
            raise click.UsageError(f"Missing option '{name}'.")
    if packet_file is not None:
        given = [name for name, value in (("--task", text), ("--context", context_text or None),
                                          ("--accept", acceptance), ("--file", files),
                                          ("--depends-on", depends_on)) if value]
        if given or deliverable_type != "other":
            given += ["--type"] if deliverable_type != "other" else []
            raise click.UsageError(f"--packet holds the whole packet; drop {', '.join(given)}"
                                   " (or drop --packet)")
        try:
            packet: Any = load_json(packet_file, "--packet")
        except json.JSONDecodeError as exc:
            raise click.UsageError(f"--packet is not valid JSON: {exc}") from None
    else:
        if text is None:
            raise click.UsageError("give --task TEXT (or the whole packet with --packet FILE)")
        packet = {"task": text, "deliverable_type": deliverable_type,
                  "acceptance_criteria": list(acceptance), "context": context_text,
                  "files": list(files), "depends_on": list(depends_on)}
    if requester is None and agent is None:
        raise click.UsageError("give --requester owner/agent (or act as an agent with --agent)")
    caller = ctx.caller(agent, instance, session)
    with ctx.open() as hive:
        fields: dict[str, Any] = {"requester": requester or agent, "assignee": assignee,
                                  "project": project, "packet": packet, "priority": priority,
                                  "labels": list(labels)}
        if task_id is not None:
            fields["id"] = task_id
        if role is not None:
            fields["role"] = role
        from ...core.wording import spelled  # a refusal names the option the caller typed

        with spelled("python" if packet_file is not None else "cli"):  # or the packet's key
            receipt = hive.handoff(acting(hive, caller), **fields, request_id=ctx.request_id)
        ctx.show(hive, receipt)


def _handoff_many(ctx: Context, jsonl: Any, requester: str | None, agent: str | None,
                  instance: str | None, session: str | None, *, given: list[str]) -> None:
    """``handoff --from-jsonl``: every line a task, handed off in one transaction."""
    if given:
        raise click.UsageError(f"--from-jsonl holds every task; drop {', '.join(given)}")
    if ctx.url is not None:
        raise click.UsageError("--from-jsonl works on a store file, not over --url")
    default = requester or agent

    def tasks(lines: Iterable[str]) -> Iterator[dict[str, Any]]:
        for number, line in enumerate(lines, 1):
            if not line.strip():
                continue
            try:
                task = loads_bounded(line, f"line {number}")
            except json.JSONDecodeError as exc:
                raise InvalidInput("invalid_json", f"line {number} is not JSON: {exc.msg}",
                                   field=f"line {number}", line=number) from None
            if not isinstance(task, dict):
                raise InvalidInput("invalid_task", f"line {number} is not a JSON object",
                                   field=f"line {number}", line=number)
            if default is not None:
                task.setdefault("requester", default)
            yield task

    caller = ctx.caller(agent, instance, session)
    with ctx.open_store() as hive:
        with progress("handoff", "lines", as_json=ctx.as_json) as bar:
            receipts = hive.handoff_many(acting(hive, caller), tasks(counted(
                text_lines(jsonl), bar, lines_in(jsonl) if bar else None)))
        states = Counter(r.state.value for r in receipts)
        ctx.emit(receipts, lambda: f"handed off {len(receipts)} tasks"
                 f" (#{receipts[0].number} to #{receipts[-1].number}): "
                 + ", ".join(f"{n} {state}" for state, n in sorted(states.items())))


@cli.command()
@pass_context
def info(ctx: Context) -> None:
    """Which store this is and how it stands.

    Its vault id (what hivelite serve names it by), owner, schema, tasks by state,
    controls, required plugins, live tokens, the journal's head (note it elsewhere:
    doctor --head checks it) and where the owner's chain key is.

    \b
    Example:
      hivelite info
    """
    with ctx.open_store() as hive:
        found = hive.info()
        ctx.emit(found, lambda: "\n".join(printable(line) for line in [
            f"store      {found.location}", f"vault id   {found.vault_id}",
            f"owner      {found.owner}", f"schema     {found.schema_version}",
            "tasks      " + (", ".join(f"{n} {state}" for state, n in
                                       sorted(found.tasks.items())) or "none"),
            f"mode       {found.mode}", f"controls   {found.live_controls} live",
            "requires   " + (", ".join(found.required_plugins) or "no plugin"),
            "enabled    " + (", ".join(found.enabled_plugins) or "no installed plugin"),
            *([f"installed  {', '.join(found.installed_not_enabled)}: not enabled here, so"
               " they do not act (hivelite policy enable NAME)"]
              if found.installed_not_enabled else []),
            f"tokens     {found.live_tokens} live", f"head       {found.head or '(empty)'}",
            f"chain key  {KEY_WORDS[found.key_state].format(path=found.chain_key)}",
            *([f"imported   unsigned, at {found.imported_unsigned}: no signature vouched"
               " for the history it came with"] if found.imported_unsigned else [])]))


KEY_WORDS = {
    "sealed": "{path}",
    "new_here": "none yet: this machine's keys folder has never keyed this store, so it is"
                " new here, and its first write here makes its key",
    "missing": "not on this machine: the store names the owner's key, so writes are refused"
               " here (reads work); hivelite doctor says where it was looked for",
    "other": "not this store's: the key here is not the one the store names, so writes are"
             " refused here (reads work)",
    "dropped": "dropped: this machine keyed the store and it no longer names its key, so"
               " writes are refused; run hivelite doctor",
}
"""``info``'s words for how the store stands with the owner's key (``StoreInfo.key_state``)."""


# -- agents at work -----------------------------------------------------------------------

def lease_options(command: Callable[..., Any]) -> Callable[..., Any]:
    """--lease and --token: the claim a holder writes under; the holder names itself."""
    command = caller_options(agent_verb=True)(command)
    command = click.option("--token", type=int, required=True, envvar=ENVIRONMENT["token"],
                           help="The claim's fencing token ($HIVELITE_FENCING_TOKEN)."
                           )(command)
    return click.option("--lease", "lease_id", required=True, envvar=ENVIRONMENT["lease_id"],
                        help="The claim's lease id ($HIVELITE_LEASE).")(command)


MINUTES = click.option("--minutes", default=10, show_default=True, type=int,
                       help="Lease length, 5 to 15 minutes.")


@cli.command(name="next")
@MINUTES
@EXPORT
@click.option("--project", help="Only a task of this project.")
@click.option("--label", help="Only a task with this label.")
@click.option("--skip", type=int, multiple=True, help="Pass over this task (repeat): one"
              " already failed on in this run, say.")
@click.option("--wait", type=float, default=0, metavar="SECONDS", help="Nothing ready: wait"
              f" up to SECONDS (at most {MAX_WAIT}) for a task, and claim it the moment it"
              " is ready.")
@caller_options(agent_verb=True)
@pass_context
def next_(ctx: Context, minutes: int, export: bool, project: str | None, label: str | None,
          skip: Sequence[int], wait: float, agent: str | None, instance: str | None,
          session: str | None) -> None:
    """Claim your most pressing ready task in one step.

    The queue gives the agent's ready tasks (routed, dependencies completed, attempts left)
    most pressing priority first, then oldest; any number of workers may ask at once. Prints
    the lease and the task. Nothing ready: exit 5 (not_found/queue_empty); with --wait, once
    nothing became ready in that time. With --export, the lease as shell assignments that
    the holder verbs then read:

    \b
    Example:
      hivelite next --agent ana/coder --instance laptop
      eval "$(hivelite next --export --wait 60)" && hivelite checkpoint "$HIVELITE_TASK" \\
        --progress go
    """
    from .. import render

    caller = ctx.agent(agent, instance, session)
    with ctx.open() as hive:
        lease = hive.claim_next(acting(hive, caller), minutes=minutes, project=project,
                                label=label, skip=skip, wait=wait, request_id=ctx.request_id)
        if export and not ctx.as_json:
            click.echo(exports(lease))
            return
        ctx.emit(lease, lambda: lease_text(lease, hive.clock())
                 + "\n\n" + render.task_block(lease.task, hive.clock()))


@cli.command()
@click.argument("ref")
@click.option("--lease", "lease_id", help="The claim's lease id (the holder releasing).")
@click.option("--token", type=int, help="The claim's fencing token.")
@caller_options(agent_verb=False)
@click.option("--reason", help="Why.")
@pass_context
def release(ctx: Context, ref: str, lease_id: str | None, token: int | None,
            agent: str | None, instance: str | None, session: str | None,
            reason: str | None) -> None:
    """Give a claimed task back (the holder with --lease and --token, or the owner).

    Acts as the agent named by --agent and --instance (or their $HIVELITE_ variables), the
    holder; else as the store's owner (you must own the store file).

    \b
    Example:
      hivelite release 3 --lease L1 --token 2 --agent ana/coder --instance laptop \\
        --reason "blocked on review"
    """
    if (lease_id is None) != (token is None):
        raise click.UsageError("give both --lease and --token (or neither, as the owner)")
    if lease_id is not None and agent is None:
        raise click.UsageError("the holder names itself: --agent owner/agent and --instance"
                               " (or $HIVELITE_AGENT and $HIVELITE_INSTANCE)")
    caller = ctx.caller(agent, instance, session)
    with ctx.open() as hive:
        ctx.show(hive, hive.release(acting(hive, caller), ref, lease_id=lease_id, token=token,
                                    reason=reason, request_id=ctx.request_id))


USAGE = [
    click.option("--tokens", type=click.IntRange(min=0), help="Model tokens used (integer)."),
    click.option("--usd-micros", type=click.IntRange(min=0),
                 help="Cost in millionths of a US dollar (integer)."),
]


def usage_options(command: Callable[..., Any]) -> Callable[..., Any]:
    for option in reversed(USAGE):
        command = option(command)
    return command


def text_of(handle: Any, option: str) -> str:
    """The UTF-8 text an option's file holds, or ``422 invalid_input invalid_utf8``."""
    raw = handle.read()
    try:
        text: str = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise InvalidInput("invalid_utf8", f"{option} is not UTF-8 text (byte"
                           f" {exc.start + 1} is {raw[exc.start]:#04x})",
                           field=option) from None
    return text


def load_json(handle: Any, option: str) -> Any:
    """The JSON document an option's file holds, nested at most ``MAX_JSON_DEPTH`` deep
    (``422 invalid_input too_deep`` naming the option otherwise); invalid JSON raises
    ``json.JSONDecodeError`` for the caller to report."""
    return loads_bounded(text_of(handle, option), option)


_EVIDENCE = re.compile(
    r"^(?P<kind>[a-z_]+):(?P<summary>.+?)(?::(?P<url>[A-Za-z][A-Za-z0-9+.-]*:\S+))?$", re.S)


def parse_evidence(items: Sequence[str], evidence_file: Any) -> list[dict[str, Any]]:
    """``KIND:SUMMARY[:URL]`` options, then any JSON evidence from a file."""
    out: list[dict[str, Any]] = []
    for item in items:
        match = _EVIDENCE.match(item)
        if match is None:
            raise click.BadParameter(f"{item!r} is not KIND:SUMMARY[:URL]",
                                     param_hint="--evidence")
        entry = {"kind": match["kind"], "summary": match["summary"]}
        if match["url"]:
            entry["url"] = match["url"]
        out.append(entry)
    if evidence_file is not None:
        try:
            loaded = load_json(evidence_file, "--evidence-file")
        except json.JSONDecodeError as exc:
            raise click.BadParameter(f"not valid JSON: {exc}",
                                     param_hint="--evidence-file") from None
        out.extend(loaded if isinstance(loaded, list) else [loaded])
    return out


def evidence_options(command: Callable[..., Any]) -> Callable[..., Any]:
    command = click.option("--evidence-file", type=click.File("rb"),
                           help="Evidence as JSON (an object or a list), or - for stdin.")(command)
    return click.option("--evidence", "evidence_items", multiple=True,
                        help="KIND:SUMMARY[:URL] (repeat); kinds: test_output, screenshot, "
                        "link, pull_request, commit, note.")(command)


@cli.command()
@click.argument("ref")
@lease_options
@click.option("--summary", required=True, help="What was done (at most 4000 characters).")
@evidence_options
@click.option("--outcome", default="completed", show_default=True,
              type=click.Choice(["completed", "failed"]))
@click.option("--provenance", default="agent_generated", show_default=True,
              type=click.Choice(["agent_generated", "from_approved_context", "owner_approved",
                                 "owner_instruction"]))
@usage_options
@click.option("--draft-file", type=click.File("rb"), help="The result's knowledge change (a"
              " patch, a document, a decision) from a file, or - for stdin.")
@click.option("--draft-kind", default="patch", show_default=True,
              type=click.Choice(["patch", "document", "decision"]),
              help="What the --draft-file holds.")
@click.option("--draft-title", help="A line naming the draft.")
@pass_context
def submit(ctx: Context, ref: str, lease_id: str, token: int, agent: str | None,
           instance: str | None, session: str | None, summary: str,
           evidence_items: Sequence[str], evidence_file: Any, outcome: str, provenance: str,
           tokens: int | None, usd_micros: int | None, draft_file: Any, draft_kind: str,
           draft_title: str | None) -> None:
    """Return a result with evidence; the claim ends.

    Acts as the agent named by --agent and --instance (or their $HIVELITE_ variables).

    \b
    Example:
      hivelite submit 3 --lease L1 --token 2 --summary "Validation added" \\
        --evidence "test_output:14 passed" \\
        --evidence "pull_request:the PR:https://example.com/pr/7" \\
        --draft-file fix.patch
    """
    evidence = parse_evidence(evidence_items, evidence_file)
    draft = None
    if draft_file is not None:
        draft = {"kind": draft_kind, "content": text_of(draft_file, "--draft-file")}
        if draft_title is not None:
            draft["title"] = draft_title
    elif draft_title is not None or draft_kind != "patch":
        raise click.UsageError("--draft-kind and --draft-title go with --draft-file")
    caller = ctx.agent(agent, instance, session)
    with ctx.open() as hive:
        ctx.show(hive, hive.submit(
            acting(hive, caller), ref, lease_id=lease_id, token=token, summary=summary,
            evidence=list(evidence), outcome=outcome,  # type: ignore[arg-type]
            provenance=provenance, tokens=tokens, usd_micros=usd_micros, draft=draft,
            request_id=ctx.request_id))


@cli.command()
@click.argument("ref")
@caller_options(agent_verb=True)
@click.option("--accept", is_flag=True, help="Confirm the result.")
@click.option("--reject", is_flag=True, help="Reject it (needs --reason).")
@click.option("--reason", help="Why (required with --reject).")
@pass_context
def verify(ctx: Context, ref: str, agent: str | None, instance: str | None,
           session: str | None, accept: bool, reject: bool, reason: str | None) -> None:
    """An independent agent's verdict on a result.

    Acts as the agent named by --agent and --instance (or their $HIVELITE_ variables).

    \b
    Example:
      hivelite verify 3 --accept --agent ana/planner --instance desktop
    """
    if accept == reject:
        raise click.UsageError("give exactly one of --accept and --reject")
    verdict = "accept" if accept else "reject"
    caller = ctx.agent(agent, instance, session)
    with ctx.open() as hive:
        ctx.show(hive, hive.verify(acting(hive, caller), ref, verdict=verdict,  # type: ignore[arg-type]
                                   reason=reason, request_id=ctx.request_id))


@cli.command()
@click.argument("ref")
@caller_options(agent_verb=False)
@click.option("--summary", help="A new summary.")
@evidence_options
@click.option("--merge-commit", help="Record the merge of a completed task (7-64 hex).")
@pass_context
def amend(ctx: Context, ref: str, agent: str | None, instance: str | None,
          session: str | None, summary: str | None, evidence_items: Sequence[str],
          evidence_file: Any, merge_commit: str | None) -> None:
    """Correct a result awaiting a decision, or record a completed one's merge.

    Acts as the agent named by --agent and --instance (or their $HIVELITE_ variables), the
    submitter; else as the store's owner (you must own the store file), who may record a
    merge.

    \b
    Example:
      hivelite amend 3 --agent ana/coder --instance laptop --merge-commit 3f2a9c1
    """
    evidence = parse_evidence(evidence_items, evidence_file)
    caller = ctx.caller(agent, instance, session)
    with ctx.open() as hive:
        ctx.show(hive, hive.amend(acting(hive, caller), ref, summary=summary,
                                  evidence=list(evidence) or None, merge_commit=merge_commit,
                                  request_id=ctx.request_id))


@cli.command()
@caller_options(agent_verb=False)
@pass_context
def expire(ctx: Context, agent: str | None, instance: str | None, session: str | None) -> None:
    """Return every task whose claim ran out to routed.

    Anyone may: the agent named by --agent and --instance (or their $HIVELITE_ variables),
    else the store's owner (you must own the store file).

    \b
    Example:
      hivelite expire
    """
    caller = ctx.caller(agent, instance, session)
    with ctx.open_store() as hive:
        reopened = hive.expire(acting(hive, caller), request_id=ctx.request_id)
        ctx.emit(reopened, lambda: "\n".join(
            f"task {r.number}: {r.holder}'s claim expired at {r.expired_at};"
            f" {r.from_state.value} -> routed" for r in reopened) or "no expired claims")


@cli.command()
@click.argument("shell", type=click.Choice(["bash", "zsh", "fish"]))
def completion(shell: str) -> None:
    """Print the shell completion script for SHELL (verbs, options, choices).

    \b
    Example:
      eval "$(hivelite completion bash)"      # in ~/.bashrc
      eval "$(hivelite completion zsh)"       # in ~/.zshrc
      hivelite completion fish > ~/.config/fish/completions/hivelite.fish
    """
    from click.shell_completion import get_completion_class

    kind = get_completion_class(shell)
    assert kind is not None  # click has all three
    click.echo(kind(cli, {}, "hivelite", "_HIVELITE_COMPLETE").source())


@cli.command()
@click.option("--format", "fmt", default="table", show_default=True,
              type=click.Choice(["table", "mermaid", "dot", "json"]))
@pass_context
def states(ctx: Context, fmt: str) -> None:
    """The protocol: states and the 22 allowed moves.

    \b
    Example:
      hivelite states --format mermaid
    """
    if ctx.as_json or fmt == "json":
        click.echo(json.dumps(diagrams.as_json(), indent=2))
    else:
        click.echo({"table": diagrams.markdown_table, "mermaid": diagrams.mermaid,
                    "dot": diagrams.dot}[fmt]())


@cli.command()
def schema() -> None:
    """Print the seed task object's JSON Schema.

    \b
    Example:
      hivelite schema > task.schema.json
    """
    from importlib import resources

    text = resources.files("hivelite").joinpath("data/task.schema.json").read_text()
    click.echo(text.rstrip())


@cli.command()
@click.option("--owner", envvar="HIVELITE_OWNER", help="The owner of a store the demo makes"
              " ($HIVELITE_OWNER; default: your login name, said as it is made).")
@pass_context
def demo(ctx: Context, owner: str | None) -> None:
    """Play the whole flow on the store (created if missing), step by step.

    \b
    Example:
      hivelite demo
    """
    from ..demo import run_demo

    if owner is None and not os.path.exists(ctx.db):
        owner = login_owner()
        if not ctx.as_json:
            click.echo(f"making {ctx.db} for owner {owner} (your login name; choose another"
                       " with --owner)")
    with ctx.open_store(create=True, owner=owner) as hive:
        steps = run_demo(hive, echo=None if ctx.as_json else click.echo)
        if ctx.as_json:
            click.echo(json.dumps(plain(steps), indent=2))


# the owner's controls, budgets, policy, signers; receipts; the service
for command in (*COMMANDS, *RECEIPT_COMMANDS, serve, mcp_stdio, witness):
    cli.add_command(command)
for verb in VERBS:  # every other verb of the table: its command, from its row alone
    if verb.name not in BESPOKE and verb.name not in COMMAND_OF:
        cli.add_command(VerbCommand(verb.name, MORE.get(verb.name, "")))


def _tables(hive: Hive) -> Any:
    """The store's kept tables, raw, for export (each engine's own access)."""
    return hive.store.tables()


def _sqlite(hive: Hive) -> SqliteStore:
    from ...store.sqlite import SqliteStore

    if not isinstance(hive.store, SqliteStore):  # pragma: no cover - one backend today
        raise UnexpectedError("unexpected", "this verb works on a store file")
    return hive.store


@cli.command()
@click.option("--quick", is_flag=True, help="SQLite's quick_check instead of the full"
              " integrity_check.")
@click.option("--head", metavar="SEQ:HASH", help="A head an earlier doctor printed: check"
              " that the journal still holds it.")
@click.option("--older-copy", is_flag=True, help="The file is a backup: heads witnessed"
              " after it was taken are not missing rows.")
@click.option("--restored", is_flag=True, help="You put an older copy in the store's place"
              " on purpose: record it, and hold the store to the heads witnessed from now.")
@click.option("--no-key", is_flag=True, help="The store names the owner's key, which is not"
              " on this machine: check the chain for consistency only (without the key a"
              " forged row cannot be told from the owner's, so doctor fails instead).")
@pass_context
def doctor(ctx: Context, quick: bool, head: str | None, older_copy: bool,
           restored: bool, no_key: bool) -> None:
    """Check the store: pages, schema, the journal's hash chain, invariants.

    Opens the file read-only (nothing is migrated, swept or written) and prints each
    check; exits 0 only when every one holds, else 6 naming what failed. On PostgreSQL
    the rules are checked in the server's catalogs and the rows as on a file. The chain is
    checked with the owner's key (beside the other keys, $HIVELITE_KEYS or
    ~/.config/hivelite/keys), and against every head witnessed outside the file (each
    backup, export, server start and sound doctor witnesses one); --head checks one more,
    noted elsewhere. A store that names the owner's key fails here without it, unless
    --no-key asks for consistency only.

    \b
    Example:
      hivelite doctor
      hivelite doctor --head 1042:5d0c2a8e4f9b71c3a6e2d8f0b4c7a913
      hivelite --db ~/backups/hive.db doctor --older-copy
    """
    now = format_ts(clock_from_env()())
    with progress("doctor", "checks", as_json=ctx.as_json, timed=False) as shown:
        if ctx.on_server:  # the rules in the catalogs, the rows as on a file
            from ...store.pg_doctor import diagnose_url

            found = diagnose_url(ctx.db, head=head, older_copy=older_copy, progress=shown,
                                 at=now, restored=restored, no_key=no_key)
        else:
            from ...store.doctor import diagnose_file

            found = diagnose_file(Path(ctx.db), quick=quick, head=head,
                                  older_copy=older_copy, progress=shown, at=now,
                                  restored=restored, no_key=no_key)
    ok = all(f.ok for f in found)
    report = {"ok": ok, "checks": [{"check": f.check, "ok": f.ok, "detail": f.detail,
                                    **(f.data or {})} for f in found]}
    ctx.emit(report, lambda: "\n".join(
        f"{'ok  ' if f.ok else 'FAIL'}  {f.check:<20} {printable(f.detail)}"
        for f in found))
    if not ok:
        failed = ", ".join(f.check for f in found if not f.ok)
        click.echo(f"error: invalid_input/store_unsound: failed: {failed}", err=True)
        sys.exit(InvalidInput.exit_code)


@cli.command()
@click.argument("dest", type=click.Path(dir_okay=False))
@pass_context
def backup(ctx: Context, dest: str) -> None:
    """Copy the store to DEST (a new file, 0600): one consistent snapshot, even while
    others write.

    \b
    Example:
      hivelite backup ~/backups/hive-2026-12-02.db
    """
    from ...store.transfer import backup as take_backup

    ctx.file_only("backup", "use the server's own backups (pg_dump), or hivelite export")
    with ctx.open_store() as hive, progress("backup", "pages", as_json=ctx.as_json) as bar:
        take_backup(_sqlite(hive).conn, Path(dest), bar)
    data = {"backup": os.path.abspath(dest), "of": os.path.abspath(ctx.db)}
    ctx.emit(data, lambda: f"backup of {data['of']} written to {data['backup']}")


@cli.command()
@click.option("--out", type=click.Path(dir_okay=False),
              help="Write to this new file (0600) instead of stdout.")
@pass_context
def export(ctx: Context, out: str | None) -> None:
    """Write the whole store as versioned JSON Lines (every row of every kept table).

    \b
    Example:
      hivelite export --out work.jsonl
    """
    from ...store.transfer import NO_SPACE, copy_full, export_lines
    from ...store.transfer import export as write_export

    with ctx.open_store() as hive, progress("export", "rows", as_json=ctx.as_json,
                                            output_too=out is None) as bar:
        if hive.store.tampered is not None:
            raise StoreError("schema_tampered", f"{ctx.where()} does not have the schema its"
                             f" migrations built ({hive.store.tampered}): an export would not"
                             " hold what hivelite keeps. Run: hivelite doctor (hivelite"
                             " backup copies the file as it is)")
        tables = _tables(hive)
        if out is None:
            try:
                for line in export_lines(tables, bar):
                    click.echo(line)
            except OSError as exc:  # standard output is a file on a full disk
                if exc.errno not in NO_SPACE:
                    raise
                _quiet_stdout()
                raise copy_full("standard output", exc.strerror, removed=False) from None
            return
        try:
            fd = os.open(out, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o600)
        except FileExistsError:
            raise InvalidInput("export_exists", f"{out} exists; export to a new file",
                               field="out") from None
        except OSError as exc:
            if exc.errno in NO_SPACE:
                raise copy_full(out, exc.strerror) from None
            raise
        try:
            with os.fdopen(fd, "w", encoding="utf-8") as handle:
                rows = write_export(tables, handle, bar)
        except BaseException as exc:  # nothing of a failed export is left
            Path(out).unlink(missing_ok=True)
            if isinstance(exc, OSError) and exc.errno in NO_SPACE:
                raise copy_full(out, exc.strerror) from None
            raise
    data = {"export": os.path.abspath(out), "rows": rows}
    ctx.emit(data, lambda: f"{rows} rows written to {data['export']}")


@cli.command(name="import")
@click.argument("source", type=click.File("rb"))
@click.option("--keep-failed", is_flag=True, help="Keep a store whose rows fail doctor, to"
              " look at (the import still exits 6); without it nothing is left behind.")
@click.option("--unsigned", is_flag=True, help="Take an export whose checkpoint no key this"
              " machine knows signed; the store says so for good (info, doctor).")
@pass_context
def import_(ctx: Context, source: Any, keep_failed: bool, unsigned: bool) -> None:
    """Read an export into a new, empty store (--db names it), keys and all.

    The rows are checked as doctor checks a store before they are committed: an export
    that fails (a forged move, an edited row, a broken chain) exits 6 and leaves no new
    store behind. The export must carry a checkpoint of its journal signed by a key this
    machine knows (its own, or one in trusted.vkeys beside the keys): one that does not
    exits 6 too, unless --unsigned.

    \b
    Example:
      hivelite --db copy.db import work.jsonl
    """
    from ...store.engines import open_url
    from ...store.sqlite import SqliteStore
    from ...store.transfer import import_lines

    store: Any = open_url(ctx.db) if ctx.on_server else SqliteStore(Path(ctx.db))
    try:
        with progress("import", "lines", as_json=ctx.as_json) as bar:
            lines = counted(text_lines(source), bar, lines_in(source) if bar else None)
            rows = import_lines(store.tables(), lines, keep_failed=keep_failed,
                                unsigned=unsigned)
    except BaseException as error:
        kept = isinstance(error, HiveliteError) and error.extra.get("kept")
        if store.created and not kept:  # the store this import made goes with it
            store.discard()
        raise
    finally:
        store.close()
    data = {"db": ctx.where(), "rows": rows, "doctor": True}
    ctx.emit(data, lambda: f"{rows} rows imported into {data['db']}; doctor: ok")


def _quiet_stdout() -> None:
    """Standard output cannot take more (a full disk): what is still buffered, and what
    ``--json`` would print there, goes nowhere, so the error reaches stderr alone instead
    of a second failure at exit."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        os.close(devnull)
    except (OSError, ValueError):  # stdout is no file descriptor (a test's capture)
        pass



for command in cli.loaded():  # the group's options after the verb, too
    if not isinstance(command, VerbCommand):  # (a verb of the table takes them once built)
        global_options(command)
