"""An enrolment's rules (seed 004's opt-in), as the write path asks them of an agent's write:
each answers the refusal, or None. ``enrolments`` keeps the verbs that change one."""

from __future__ import annotations

import json

from ..core.errors import ForbiddenRight, HiveliteError, InvalidState
from ..store import EnrolmentRow, TaskRow
from ..store.schema import ENROLMENT_RIGHTS


def inactive(row: EnrolmentRow | None, agent: str) -> HiveliteError | None:
    """``409 optin_inactive`` when the agent's enrolment ended."""
    if row is not None and not row.active:
        return InvalidState("optin_inactive", f"the enrolment of {agent} ended at {row.at};"
                            " the owner enrols it again (hivelite enrol)", agent=agent)
    return None


def outside_rights(row: EnrolmentRow | None, agent: str, verb: str,
                   right: str | None) -> HiveliteError | None:
    """``403 optin_scope`` when the write needs a right the enrolment does not give."""
    if row is None or right not in ENROLMENT_RIGHTS or right in row.rights.split(","):
        return None
    return ForbiddenRight("optin_scope", f"{verb} needs {right}; the enrolment of {agent}"
                          f" gives {row.rights.replace(',', ', ')}", agent=agent, right=right)


def outside_project(row: EnrolmentRow | None, agent: str, project: str) -> HiveliteError | None:
    """``403 optin_scope`` when the enrolment does not cover ``project``."""
    if row is None:
        return None
    projects = json.loads(row.projects)
    if not projects or project in projects:
        return None
    return ForbiddenRight("optin_scope", f"the enrolment of {agent} covers the projects"
                          f" {', '.join(projects)}, not {project}", agent=agent,
                          project=project)


def lacks_role(row: EnrolmentRow | None, agent: str, task: TaskRow) -> HiveliteError | None:
    """``403 not_permitted`` when the task needs a role its claimant is not enrolled in."""
    if task.role is None:
        return None
    roles = json.loads(row.roles) if row is not None and row.active else []
    if task.role in roles:
        return None
    has = f"is enrolled in {', '.join(roles)}" if roles else "has no role"
    return ForbiddenRight("not_permitted", f"task {task.number} needs the role {task.role};"
                          f" {agent} {has}", agent=agent, role=task.role)


def changed(row: EnrolmentRow | None, agent: str, task: TaskRow) -> HiveliteError | None:
    """``409 optin_changed`` when the enrolment changed since the agent's claim on
    ``task`` was taken."""
    now = row.seq if row is not None else None
    if task.lease_id is None or task.lease_holder != agent or task.lease_scope == now:
        return None
    return InvalidState("optin_changed", f"the enrolment of {agent} changed since it claimed"
                        f" task {task.number}; give the task back (release) and claim it"
                        " again under the new one", agent=agent)


__all__ = ["changed", "inactive", "lacks_role", "outside_project", "outside_rights"]
