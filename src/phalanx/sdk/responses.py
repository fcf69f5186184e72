"""The ``phalanx.errors`` exception an HTTP error response stands for.

Its own module, below the client and its authentication, which both raise from responses.
"""

from __future__ import annotations

import contextlib
from typing import Any

import httpx

from phalanx.errors import ERROR_TYPES, PhalanxError, ServerError, SpecError, error_by_status


def _by_status(status: int) -> type[PhalanxError]:
    """The error for an answer without the envelope (a proxy's, say), by its status."""
    return SpecError if status == 422 else error_by_status(status, ServerError)


def error_from_response(response: httpx.Response) -> PhalanxError:
    """The phalanx.errors exception an error response stands for, with its field and fix."""
    body: Any = None
    with contextlib.suppress(ValueError):
        body = response.json()
    error = body.get("error") if isinstance(body, dict) else None
    if isinstance(error, dict) and isinstance(error.get("message"), str):
        cls = ERROR_TYPES.get(str(error.get("type")))
        if cls is None:
            cls = _by_status(response.status_code)
        field, fix = error.get("field"), error.get("fix")
        return cls(
            error["message"],
            field=field if isinstance(field, str) else None,
            fix=fix if isinstance(fix, str) else None,
        )
    cls = _by_status(response.status_code)
    text = response.text.strip()[:200] or response.reason_phrase
    return cls(f"HTTP {response.status_code} from {response.request.url}: {text}")
