"""The owner's verbs on the command line: hold, veto, stop, lift, controls, budget, enrol,
policy, plugins.

Each acts as the store's owner (the user owning the store file). Their ``--agent`` and
``--instance`` name whom a control or budget binds, not who acts; a process that has
``$HIVELITE_AGENT`` set acts as that agent, whom the store refuses (only the owner
controls).
"""

from __future__ import annotations

from decimal import Decimal, InvalidOperation
from pathlib import Path
from typing import TYPE_CHECKING

import click

from ...core.errors import InvalidInput
from ..terminal import printable
from .context import Context, acting, pass_context

if TYPE_CHECKING:
    from ...core.models import Budget, Control, Enrolment, StorePolicy, TokenView

REASON = click.option("--reason", help="Why (at most 500 characters; journaled).")
MICROS = Decimal(1_000_000)


def _controls_text(controls: list[Control]) -> str:
    from .. import render

    if not controls:
        return "no controls"
    return "\n".join(render.control_line(c) + (
        f"; ended the claims on task(s) {', '.join(map(str, c.ended))}" if c.ended else "")
        for c in controls)


def _control(ctx: Context, verb: str, **options: object) -> None:
    """A control on the file, or over --url with an owner's token (the verb table's row)."""
    who = ctx.owner_caller()
    with ctx.open() as face:
        ref = options.pop("ref", None)
        assert ref is None or isinstance(ref, str)
        control: Control = face.call(verb, acting(face, who), ref, None, **options)
        ctx.emit(control, lambda: _controls_text([control]))


@click.command()
@click.argument("named", metavar="[AGENT]", required=False)
@click.option("--agent", help="The agent to hold (owner/agent), as AGENT.")
@click.option("--instance", help="The instance to hold: every agent acting from it.")
@REASON
@pass_context
def hold(ctx: Context, named: str | None, agent: str | None, instance: str | None,
         reason: str | None) -> None:
    """Hold an agent or an instance: its live claims end (the tasks go back to routed) and
    it takes no claim until lifted; it may still read.

    \b
    Example:
      hivelite hold ana/coder --reason "over budget"
    """
    _control(ctx, "hold", agent=_one_agent(named, agent), instance=instance, reason=reason)


def _one_agent(named: str | None, agent: str | None) -> str | None:
    """The agent named as the argument or by --agent (one way, not both)."""
    if named is not None and agent is not None:
        raise click.UsageError("name the agent once: AGENT or --agent")
    return named if named is not None else agent


@click.command()
@click.argument("ref")
@click.option("--agent", required=True, help="The agent vetoed on this task (owner/agent);"
              " required.")
@REASON
@pass_context
def veto(ctx: Context, ref: str, agent: str, reason: str | None) -> None:
    """Veto one agent on one task: its claim there ends and it may not claim that task
    again until lifted.

    \b
    Example:
      hivelite veto 7 --agent ana/coder --reason "wrong approach"
    """
    _control(ctx, "veto", ref=ref, agent=agent, reason=reason)


@click.command()
@click.argument("named", metavar="[AGENT]", required=False)
@click.option("--agent", help="The agent to stop (owner/agent), as AGENT.")
@click.option("--instance", help="The instance to stop: every agent acting from it.")
@click.option("--all", "everyone", is_flag=True, help="Every agent.")
@REASON
@pass_context
def stop(ctx: Context, named: str | None, agent: str | None, instance: str | None,
         everyone: bool, reason: str | None) -> None:
    """The kill switch: every live claim of an agent, an instance or every agent ends, and
    every write of theirs is refused until lifted.

    \b
    Example:
      hivelite stop ana/coder --reason "runaway costs"
      hivelite stop --all --reason "runaway costs"
    """
    _control(ctx, "stop", agent=_one_agent(named, agent), instance=instance,
             everyone=everyone, reason=reason)


@click.command()
@click.argument("control", type=int, required=False)
@click.option("--agent", help="Lift every live control on this agent (with --task: its veto"
              " on that task).")
@click.option("--instance", help="Lift every live control on this instance.")
@click.option("--task", help="With --agent: the task of the veto to lift.")
@click.option("--all", "everyone", is_flag=True, help="Lift the stop of every agent.")
@click.option("--kind", type=click.Choice(["hold", "veto", "stop"]),
              help="Only controls of this kind.")
@REASON
@pass_context
def lift(ctx: Context, control: int | None, agent: str | None, instance: str | None,
         task: str | None, everyone: bool, kind: str | None, reason: str | None) -> None:
    """Lift live controls: one by its id (see hivelite controls), or every one on an agent,
    an instance, or every agent.

    \b
    Example:
      hivelite lift 3
      hivelite lift --agent ana/coder --kind hold
    """
    who = ctx.owner_caller()
    with ctx.open() as face:
        lifted: list[Control] = face.call(
            "lift", acting(face, who), None, None, control=control, kind=kind, agent=agent,
            instance=instance, task=task, everyone=everyone, reason=reason)
        ctx.emit(lifted, lambda: _controls_text(lifted))


@click.command()
@click.option("--with-lifted", is_flag=True, help="Lifted controls too.")
@pass_context
def controls(ctx: Context, with_lifted: bool) -> None:
    """The owner's controls in force (hold, veto, stop), oldest first.

    \b
    Example:
      hivelite controls
    """
    with ctx.open_store() as hive:
        rows = hive.controls(live=not with_lifted)
        ctx.emit(rows, lambda: _controls_text(rows))


# -- budgets ------------------------------------------------------------------------------


def usd_micros(text: str | None) -> int | None:
    """Dollars as typed (``2.50``) in whole millionths, exactly; or ``422``."""
    if text is None:
        return None
    try:
        value = Decimal(text.strip()) * MICROS
    except InvalidOperation:
        value = Decimal("NaN")
    if not value.is_finite() or value != value.to_integral_value() or value < 0:
        raise InvalidInput("invalid_budget", f"--usd is an amount of dollars with at most six"
                           f" decimals, like 2.50, not {text!r}", field="usd")
    return int(value)


def _budget_text(budgets: list[Budget]) -> str:
    from .. import render

    if not budgets:
        return "no budgets"
    rows = []
    for b in budgets:
        def limit(used: int, most: int | None) -> str:
            return f"{used}/{most}" if most is not None else f"{used}/-"
        rows.append([b.agent, limit(b.used_tasks, b.tasks), limit(b.used_tokens, b.tokens),
                     f"${b.used_usd_micros / 1e6:.2f}/" + (f"${b.usd_micros / 1e6:.2f}"
                                                           if b.usd_micros is not None else "-"),
                     ", ".join(b.used_up) or "-", f"{b.resets_at} ({b.timezone})"])
    return render.table(["agent", "tasks", "tokens", "usd", "used up", "resets"], rows)


@click.group()
def budget() -> None:
    """Daily budgets per agent: tasks claimed, tokens, money.

    Counted per day in the store's time zone; over budget, claims and usage reports get
    429 (exit 7) until the day resets.

    \b
    Example:
      hivelite budget set --agent ana/coder --tasks 20 --usd 5
      hivelite budget show
    """


@budget.command(name="set")
@click.option("--agent", required=True, help="The agent (owner/agent); required.")
@click.option("--tasks", type=int, help="Tasks it may claim a day.")
@click.option("--tokens", type=int, help="Tokens it may report a day.")
@click.option("--usd", help="Dollars it may report a day (at most six decimals).")
@pass_context
def budget_set(ctx: Context, agent: str, tasks: int | None, tokens: int | None,
               usd: str | None) -> None:
    """Set an agent's daily limits, replacing any it had (a limit left out is none).

    \b
    Example:
      hivelite budget set --agent ana/coder --tasks 20 --usd 5
    """
    micros = usd_micros(usd)
    who = ctx.owner_caller()
    with ctx.open_store() as hive:
        row = hive.set_budget(acting(hive, who), agent, tasks=tasks, tokens=tokens,
                              usd_micros=micros)
        ctx.emit(row, lambda: _budget_text([row]))


@budget.command(name="clear")
@click.option("--agent", required=True, help="The agent (owner/agent); required.")
@pass_context
def budget_clear(ctx: Context, agent: str) -> None:
    """Remove an agent's daily budget.

    \b
    Example:
      hivelite budget clear --agent ana/coder
    """
    who = ctx.owner_caller()
    with ctx.open_store() as hive:
        hive.clear_budget(acting(hive, who), agent)
        data = {"agent": agent, "cleared": True}
        ctx.emit(data, lambda: f"{agent} has no daily budget now")


@budget.command(name="show")
@click.option("--agent", help="One agent (also one without a budget: its use today).")
@pass_context
def budget_show(ctx: Context, agent: str | None) -> None:
    """Every budget with what it used today and when it resets.

    \b
    Example:
      hivelite budget show
    """
    with ctx.open_store() as hive:
        rows = hive.budgets(agent)
        ctx.emit(rows, lambda: _budget_text(rows))


# -- enrolments ---------------------------------------------------------------------------


def _enrolments_text(rows: list[Enrolment]) -> str:
    from .. import render

    if not rows:
        return "no enrolments"
    return render.table(
        ["agent", "projects", "roles", "rights", "budget", "state", "since"],
        [[r.agent, ", ".join(r.projects) or "every project", ", ".join(r.roles) or "-",
          ", ".join(r.rights),
          "-" if r.budget is None else _budget_text([r.budget]).splitlines()[-1].split()[1],
          "active" if r.active else "ended", r.at] for r in rows])


@click.group()
def enrol() -> None:
    """Enrolments (seed 004's opt-in): where the owner lets an agent work.

    An enrolment names the projects an agent works in (none: every one), the roles it
    takes tasks for (a task handed off with --role needs one), the writes it may make and
    its daily budget. Work outside it is refused (403 optin_scope, exit 4); a change while
    the agent holds a claim refuses the claim's next write (409 optin_changed); an ended
    enrolment refuses every write but giving a claim back (409 optin_inactive). An agent
    with no enrolment works anywhere, on tasks without a role.

    \b
    Example:
      hivelite enrol set --agent ana/coder --project shop --role reviewer --tasks 20
      hivelite enrol show
      hivelite enrol end --agent ana/coder --reason "on leave"
    """


@enrol.command(name="set")
@click.option("--agent", required=True, help="The agent (owner/agent); required.")
@click.option("--project", "projects", multiple=True,
              help="A project it works in (repeat; none: every project).")
@click.option("--role", "roles", multiple=True, help="A role it takes tasks for (repeat).")
@click.option("--right", "rights", multiple=True, type=click.Choice(["tasks.propose",
                                                                      "tasks.work"]),
              help="A write it may make (repeat; default both).")
@click.option("--tasks", type=int, help="Tasks it may claim a day (its budget).")
@click.option("--tokens", type=int, help="Tokens it may report a day.")
@click.option("--usd", help="Dollars it may report a day (at most six decimals).")
@REASON
@pass_context
def enrol_set(ctx: Context, agent: str, projects: tuple[str, ...], roles: tuple[str, ...],
              rights: tuple[str, ...], tasks: int | None, tokens: int | None, usd: str | None,
              reason: str | None) -> None:
    """Enrol an agent, or change its enrolment (replacing it whole), or start it again.

    \b
    Example:
      hivelite enrol set --agent ana/coder --project shop --role reviewer --tasks 20
    """
    micros = usd_micros(usd)
    who = ctx.owner_caller()
    with ctx.open_store() as hive:
        row = hive.enrol(acting(hive, who), agent, projects=list(projects), roles=list(roles),
                         rights=list(rights) or None, tasks=tasks, tokens=tokens,
                         usd_micros=micros, reason=reason)
        ctx.emit(row, lambda: _enrolments_text([row]))


@enrol.command(name="end")
@click.option("--agent", required=True, help="The agent (owner/agent); required.")
@REASON
@pass_context
def enrol_end(ctx: Context, agent: str, reason: str | None) -> None:
    """End an agent's enrolment: its writes are refused until it is enrolled again.

    \b
    Example:
      hivelite enrol end --agent ana/coder --reason "on leave"
    """
    who = ctx.owner_caller()
    with ctx.open_store() as hive:
        row = hive.end_enrolment(acting(hive, who), agent, reason=reason)
        ctx.emit(row, lambda: _enrolments_text([row]))


@enrol.command(name="show")
@click.option("--agent", help="One agent's enrolment.")
@pass_context
def enrol_show(ctx: Context, agent: str | None) -> None:
    """Every enrolment, ended ones included, with its budget.

    \b
    Example:
      hivelite enrol show
    """
    with ctx.open_store() as hive:
        rows = hive.enrolments(agent)
        ctx.emit(rows, lambda: _enrolments_text(rows))


# -- policy -------------------------------------------------------------------------------


def _policy_text(policy: StorePolicy) -> str:
    lines = [f"mode        {policy.mode}",
             f"threshold   {policy.threshold}"
             + "".join(f", {p}: {n}" for p, n in sorted(policy.project_thresholds.items())),
             f"timezone    {policy.timezone}",
             f"proposals   {policy.proposals}"]
    if policy.required_plugins:
        lines += [f"requires    {r.name} ({r.kind} {r.digest})"
                  + (f" settings {r.settings}" if r.settings else "")
                  for r in policy.required_plugins]
    else:
        lines.append("requires    no plugin")
    lines.append("enabled     " + (", ".join(policy.enabled_plugins)
                                   or "no installed plugin (installing enables none)"))
    return "\n".join(printable(line) for line in lines)


@click.group()
def policy() -> None:
    """The store's policy, which every process that opens it obeys.

    The independence mode, thresholds, the time zone of the daily budgets, what becomes
    of an agent's proposals, and the policy plugins every writing process must load.

    \b
    Example:
      hivelite policy show
      hivelite policy set mode team
    """


@policy.command(name="show")
@pass_context
def policy_show(ctx: Context) -> None:
    """The store's policy.

    \b
    Example:
      hivelite policy show
    """
    with ctx.open_store() as hive:
        found = hive.policy()
        ctx.emit(found, lambda: _policy_text(found))


def _set(ctx: Context, name: str, value: str | None, project: str | None) -> None:
    who = ctx.owner_caller()
    with ctx.open_store() as hive:
        found = hive.set_policy(acting(hive, who), name, value, project=project)
        ctx.emit(found, lambda: _policy_text(found))


POLICY_KEYS = click.Choice(["mode", "threshold", "timezone", "proposals"])


@policy.command(name="set")
@click.argument("name", type=POLICY_KEYS)
@click.argument("value")
@click.option("--project", help="For threshold: this project only.")
@pass_context
def policy_set(ctx: Context, name: str, value: str, project: str | None) -> None:
    """Set one policy value: mode (personal or team), threshold (0-1000 confirmations),
    timezone (an IANA name, for the daily budgets), proposals (gate, or owner: every task
    an agent proposes waits for the owner).

    \b
    Example:
      hivelite policy set mode team
      hivelite policy set threshold 2 --project web
    """
    _set(ctx, name, value, project)


@policy.command(name="unset")
@click.argument("name", type=POLICY_KEYS)
@click.option("--project", help="For threshold: this project's own value.")
@pass_context
def policy_unset(ctx: Context, name: str, project: str | None) -> None:
    """Put one policy value back to its default.

    \b
    Example:
      hivelite policy unset threshold --project web
    """
    _set(ctx, name, None, project)


@policy.command(name="require")
@click.argument("name")
@pass_context
def policy_require(ctx: Context, name: str) -> None:
    """Require a policy plugin, as this process loads it (its code and settings), of every
    process that writes to the store; again, to re-approve a changed one.

    \b
    Example:
      hivelite --plugins-dir ./policies policy require night_gate
    """
    who = ctx.owner_caller()
    with ctx.open_store() as hive:
        row = hive.require_plugin(acting(hive, who), name)
        ctx.emit(row, lambda: f"required {row.name} ({row.kind} {row.digest})")


@policy.command(name="enable")
@click.argument("name")
@pass_context
def policy_enable(ctx: Context, name: str) -> None:
    """Let an installed plugin act on this store: installing a plugin enables it on no
    store. Journaled; every process that opens the store loads it, where it is installed.

    \b
    Example:
      hivelite policy enable evidence
    """
    _choose_plugin(ctx, name, enable=True)


@policy.command(name="disable")
@click.argument("name")
@pass_context
def policy_disable(ctx: Context, name: str) -> None:
    """Stop an installed plugin acting on this store (a required one acts until the owner
    unrequires it).

    \b
    Example:
      hivelite policy disable evidence
    """
    _choose_plugin(ctx, name, enable=False)


def _choose_plugin(ctx: Context, name: str, *, enable: bool) -> None:
    """``policy enable`` / ``policy disable``: the owner's choice, then the policy shown."""
    who = ctx.owner_caller()
    with ctx.open_store() as hive:
        choose = hive.enable_plugin if enable else hive.disable_plugin
        found = choose(acting(hive, who), name)
        ctx.emit(found, lambda: _policy_text(found))


@policy.command(name="unrequire")
@click.argument("name")
@pass_context
def policy_unrequire(ctx: Context, name: str) -> None:
    """Stop requiring a plugin.

    \b
    Example:
      hivelite policy unrequire night_gate
    """
    who = ctx.owner_caller()
    with ctx.open_store() as hive:
        hive.unrequire_plugin(acting(hive, who), name)
        data = {"unrequired": name}
        ctx.emit(data, lambda: f"{name} is no longer required")


@click.command()
@pass_context
def plugins(ctx: Context) -> None:
    """List the plugins loaded here, those installed, and those the store requires.

    Each with its source, its hooks, whether the store enabled it (an installed plugin acts
    on a store only once its owner enables it there) and whether it passes the store's
    requirements (when the store exists).

    \b
    Example:
      hivelite --plugins-dir ./policies plugins
    """
    from ...core.models import PluginStatus
    from ...verbs.installed import entry_points
    from ...verbs.plugins import POLICY_HOOKS, get_plugin_manager
    from .. import render

    if not ctx.on_server and not Path(ctx.db).exists():  # no store: what would load
        manager = get_plugin_manager(ctx.plugins_dir)
        rows = []
        for d in manager.describe():
            policy = not d["essential"] and bool(POLICY_HOOKS & set(d["hooks"]))
            rows.append(PluginStatus(
                name=d["name"], source=d["source"], hooks=d["hooks"], policy=policy,
                essential=d["essential"], status="built_in" if d["essential"]
                else "ok" if policy else "not_policy"))
        rows += [PluginStatus(name=ep.name, source=f"entry point ({ep.dist})", loaded=False,
                              status="not_enabled", detail="installed; acts on a store only"
                              " once its owner enables it there: hivelite policy enable"
                              f" {ep.name}") for ep in entry_points()]
    else:
        with ctx.open_store() as hive:
            rows = hive.plugin_status()
    ctx.emit(rows, lambda: render.table(
        ["plugin", "source", "hooks", "enabled", "required", "status"],
        [[r.name, r.source, ", ".join(h.removeprefix("hivelite_") for h in r.hooks),
          "yes" if r.enabled else "no" if r.source.startswith("entry point") else "-",
          "yes" if r.required else "no",
          r.status + (f" ({r.detail})" if r.detail else "")] for r in rows]))


# -- tokens ------------------------------------------------------------------------------


def _tokens_text(rows: list[TokenView]) -> str:
    from .. import render

    if not rows:
        return "no tokens"
    return render.table(["id", "for", "rights", "created", "expires", "revoked"], [
        [r.id, f"{r.agent} on {r.instance}" if r.agent else "the owner", ",".join(r.rights),
         r.created_at, r.expires_at or "-", r.revoked_at or "-"] for r in rows])


@click.group()
def token() -> None:
    """Access tokens for hivelite serve: an agent gets a token, never the store file.

    A token is bound to one agent on one instance, with some of the rights tasks.read,
    tasks.propose and tasks.work, or to the owner. Its secret is printed once; the store
    keeps only its hash.

    \b
    Example:
      hivelite token add ana/coder --instance laptop
      hivelite token list
    """


@token.command(name="add")
@click.argument("agent", required=False)
@click.option("--instance", help="The instance the agent acts from; required for an agent.")
@click.option("--rights", help="Comma-separated, some of tasks.read, tasks.propose,"
              " tasks.work (default: all three).")
@click.option("--expires", help="When it stops working (RFC 3339).")
@click.option("--owner", "for_owner", is_flag=True, help="The owner's own token (no AGENT).")
@pass_context
def token_add(ctx: Context, agent: str | None, instance: str | None, rights: str | None,
              expires: str | None, for_owner: bool) -> None:
    """Issue a token and print it once (keep it: it is shown nowhere else).

    \b
    Example:
      hivelite token add ana/coder --instance laptop --rights tasks.read,tasks.work
      hivelite token add --owner
    """
    if for_owner == (agent is not None):
        raise click.UsageError("name the AGENT the token is for, or give --owner")
    who = ctx.owner_caller()
    granted = [r.strip() for r in rights.split(",")] if rights is not None else None
    with ctx.open_store() as hive:
        issued = hive.add_token(acting(hive, who), agent, instance=instance, rights=granted,
                                expires_at=expires)
        ctx.emit(issued, lambda: f"{issued.token}\n(token {issued.id} for "
                 + (f"{issued.agent} on {issued.instance}" if issued.agent else "the owner")
                 + f", rights {','.join(issued.rights)}; shown only now)")


@token.command(name="list")
@pass_context
def token_list(ctx: Context) -> None:
    """Every token issued, revoked ones too; never a secret.

    \b
    Example:
      hivelite token list
    """
    with ctx.open_store() as hive:
        rows = hive.tokens()
        ctx.emit(rows, lambda: _tokens_text(rows))


@token.command(name="revoke")
@click.argument("token_id")
@pass_context
def token_revoke(ctx: Context, token_id: str) -> None:
    """Revoke a token: every later request with it is refused (401).

    \b
    Example:
      hivelite token revoke 3f9a0c1e2b4d
    """
    who = ctx.owner_caller()
    with ctx.open_store() as hive:
        row = hive.revoke_token(acting(hive, who), token_id)
        ctx.emit(row, lambda: f"token {row.id} revoked at {row.revoked_at}")


COMMANDS = (hold, veto, stop, lift, controls, budget, enrol, policy, plugins, token)
"""The commands this module adds to the ``hivelite`` group."""
