"""Reading the API's error envelope in tests."""

from __future__ import annotations

import httpx

from phalanx.spec.api import ErrorResponse


def error(response: httpx.Response, status: int) -> tuple[str | None, str, str | None]:
    """(field, message, fix) of an error answer, which must be the declared envelope."""
    assert response.status_code == status, response.text
    assert response.headers["content-type"] == "application/json"
    body = ErrorResponse.model_validate(response.json()).error
    return body.field, body.message, body.fix
