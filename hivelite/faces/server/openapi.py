"""The OpenAPI document of the HTTP service, generated from the route table.

``python -m hivelite.faces.server.openapi > docs/openapi.json`` writes the committed copy; a
test holds it, and the served ``/openapi.json``, to the routes.
"""

from __future__ import annotations

import json
from functools import cache
from typing import Any

from pydantic import BaseModel
from pydantic.json_schema import JsonSchemaMode, models_json_schema

from ...core.errors import ERROR_CLASSES
from .routes import ROUTES

REF = "#/components/schemas/{model}"
ERROR = {"type": "object", "required": ["error"], "properties": {"error": {
    "type": "object", "required": ["status", "code", "reason", "message"],
    "properties": {"status": {"type": "integer"},
                   "code": {"type": "string", "enum": sorted(ERROR_CLASSES)},
                   "reason": {"type": "string"}, "message": {"type": "string"},
                   "number": {"type": "integer"},
                   "retry_after_s": {"type": "integer"}}}}}


def _version() -> str:
    from importlib.metadata import PackageNotFoundError, version
    try:
        return version("hivelite")
    except PackageNotFoundError:  # pragma: no cover - run from a source tree
        return "0"


@cache
def openapi_document() -> dict[str, Any]:
    """The whole document (OpenAPI 3.1), built once per process."""
    models: list[type[BaseModel]] = []
    for route in ROUTES:
        for model in (route.body, route.query, route.verb.answer):
            if model is not None and model not in models:
                models.append(model)
    modes: list[tuple[type[BaseModel], JsonSchemaMode]] = [
        (m, "validation" if any(m in (r.body, r.query) for r in ROUTES) else "serialization")
        for m in models]
    found, top = models_json_schema(modes, ref_template=REF)
    refs: dict[tuple[type[BaseModel], str], dict[str, Any]] = {
        (model, mode): schema for (model, mode), schema in found.items()
        if isinstance(model, type) and issubclass(model, BaseModel)}
    schemas = dict(top.get("$defs", {}))
    schemas["Error"] = ERROR
    paths: dict[str, dict[str, Any]] = {}
    for route in ROUTES:
        verb = route.verb
        operation: dict[str, Any] = {
            "operationId": route.name, "summary": route.summary,
            "description": verb.description,
            "tags": ["seed 004" if route.seed else "hivelite"],
            "security": [{"token": []}],
            "x-hivelite-right": route.right,
            "x-hivelite-verb": verb.name,
            "x-hivelite-refusals": list(verb.refusals),
            "parameters": [{"name": "vault_id", "in": "path", "required": True,
                            "schema": {"type": "string"}}],
            "responses": {"default": {"description": "an error", "content": {
                "application/json": {"schema": {"$ref": REF.format(model="Error")}}}}},
        }
        if "{number}" in route.path:
            operation["parameters"].append({
                "name": "number", "in": "path", "required": True,
                "description": "The task's number, or its id.",
                "schema": {"anyOf": [{"type": "integer", "minimum": 1}, {"type": "string"}]}})
        if route.query is not None:
            name = route.query.__name__
            query = schemas.get(name) or refs[(route.query, "validation")]
            for field, schema in query.get("properties", {}).items():
                operation["parameters"].append({
                    "name": field, "in": "query", "required": False,
                    "description": schema.get("description", ""), "schema": schema,
                    **({"explode": False, "style": "form"}
                       if field in ("state", "priority", "labels") else {})})
        if route.body is not None:
            operation["requestBody"] = {"required": True, "content": {"application/json": {
                "schema": refs[(route.body, "validation")]}}}
        schema = refs[(verb.answer, "serialization")]
        if verb.many:
            schema = {"type": "array", "items": schema}
        operation["responses"]["200"] = {"description": "the answer", "content": {
            "application/json": {"schema": schema}}}
        path = "/v1/vaults/{vault_id}/tasks" + route.path
        paths.setdefault(path, {})[route.method.lower()] = operation
    return {
        "openapi": "3.1.0",
        "info": {"title": "hivelite", "version": _version(),
                 "description": "Agent tasks, claims and results: seed 004's routes and"
                 " hivelite's own, one vault per store."},
        "paths": paths,
        "components": {"schemas": schemas, "securitySchemes": {"token": {
            "type": "http", "scheme": "bearer",
            "description": "hl_<id>_<secret>, from hivelite token add"}}},
    }


if __name__ == "__main__":
    print(json.dumps(openapi_document(), indent=2, sort_keys=True))
