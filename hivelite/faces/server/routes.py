"""The HTTP routes: the verb table's rows that are served over HTTP, each at its path below
``/v1/vaults/{vault_id}/tasks`` (seed 004's first, then ours).

A route adds only what belongs to HTTP: a method and a path, the task number in the path,
a read's input in the query string. The app (``app.py``) and the OpenAPI document are
built from this list alone, so a route cannot be served without being documented, or
documented without being served; its right, input, answer and words are its verb's.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from pydantic import BaseModel, WithJsonSchema

from ...verbs.table import VERBS, Http, Verb

QUERY_LISTS = frozenset({"state", "priority", "labels"})
"""Query parameters that take several values: ``state=routed,working`` (or repeated)."""
QUERY_ALIASES = {"after": "cursor", "label": "labels"}
"""Older spellings a query may use for an input's field."""


@dataclass(frozen=True)
class Route:
    """One verb as HTTP serves it."""

    verb: Verb

    @property
    def http(self) -> Http:
        assert self.verb.http is not None, f"{self.verb.name} is not served over HTTP"
        return self.verb.http

    @property
    def name(self) -> str:
        return self.http.name

    @property
    def method(self) -> str:
        return self.http.method

    @property
    def path(self) -> str:
        return self.http.path

    @property
    def right(self) -> str:
        return self.verb.right.value

    @property
    def seed(self) -> bool:
        return self.http.seed

    @property
    def summary(self) -> str:
        return self.verb.summary

    @property
    def body(self) -> type[BaseModel] | None:
        """The JSON body a write takes (a read takes its input in the query)."""
        return None if self.method == "GET" else self.verb.input

    @property
    def query(self) -> type[BaseModel] | None:
        """The query parameters a read takes, as its input model."""
        return self.verb.input if self.method == "GET" and self.verb.input.model_fields else None


def query_input(model: type[BaseModel], query: Mapping[str, str],
                lists: Mapping[str, list[str]]) -> dict[str, Any]:
    """A read's input from its query string: lists split on commas, whole numbers read as
    numbers, the older names as today's; what the model does not know is left for it to
    refuse, and a number that is not one for the verb."""
    data: dict[str, Any] = {}
    for key, value in query.items():
        name = QUERY_ALIASES.get(key, key)
        if name in QUERY_LISTS:
            data[name] = [v for item in lists.get(key, [value]) for v in item.split(",") if v]
        elif (value.isascii() and value.isdigit() and len(value) < 20
              and _takes(model, name, "integer")):
            data[name] = int(value)
        elif _NUMBER.fullmatch(value) and _takes(model, name, "number"):
            data[name] = float(value)
        else:
            data[name] = value
    return data


_NUMBER = re.compile(r"[0-9]{1,12}(?:\.[0-9]{1,9})?")
"""A number of seconds as a query string spells it (a ``wait``)."""


def _takes(model: type[BaseModel], name: str, kind: str) -> bool:
    """Whether the field ``name`` of ``model`` takes a JSON ``kind``: ``integer`` (a whole
    number), or ``number`` (any)."""
    field = model.model_fields.get(name)
    if field is None:
        return False
    schemas = [m.json_schema for m in field.metadata if isinstance(m, WithJsonSchema)]
    kinds = [s.get("type") for schema in schemas if schema
             for s in [schema, *schema.get("anyOf", [])]]
    return kind in kinds or (kind == "integer" and field.annotation in (int, int | None))


def routes_of(verbs: Sequence[Verb]) -> tuple[Route, ...]:
    """The routes of ``verbs``' rows served over HTTP, seed 004's first."""
    return tuple(sorted((Route(verb) for verb in verbs if verb.http is not None),
                        key=lambda route: not route.seed))


ROUTES: tuple[Route, ...] = routes_of(VERBS)
"""Every route the server serves."""

__all__ = ["ROUTES", "Route", "query_input", "routes_of"]
