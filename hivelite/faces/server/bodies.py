"""Reading a request's body, bounded (the bodies' shapes are the verbs' inputs, in
``hivelite.verbs.inputs``)."""

from __future__ import annotations

from starlette.requests import Request

from ...core.errors import InvalidInput

MAX_BODY = 1 << 20
"""The largest request body read (a full result with twenty pieces of evidence is a few
hundred kB): anything longer is refused before it is all in memory."""


async def read_body(request: Request, limit: int = MAX_BODY) -> bytes:
    """The request's body, or ``422 body_too_large`` once it passes ``limit`` bytes."""
    declared = request.headers.get("content-length", "")
    if declared.isdigit() and int(declared) > limit:
        raise InvalidInput("body_too_large", f"a request body is at most {limit} bytes",
                           field="body")
    chunks, size = [], 0
    async for chunk in request.stream():
        size += len(chunk)
        if size > limit:
            raise InvalidInput("body_too_large", f"a request body is at most {limit} bytes",
                               field="body")
        chunks.append(chunk)
    return b"".join(chunks)
