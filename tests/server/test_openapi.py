"""The API's models are versioned: any change to ``/openapi.json`` fails here first.

A change that is meant is committed together with a new snapshot, written by
``python -m phalanx.server.openapi --write tests/server/openapi_v1.json``.
"""

from __future__ import annotations

import json
from pathlib import Path

import httpx

from phalanx.server.openapi import document, render, without_version
from tests.sdk.live_server import LiveServer

SNAPSHOT = Path(__file__).with_name("openapi_v1.json")
REGENERATE = "python -m phalanx.server.openapi --write tests/server/openapi_v1.json"


def test_the_live_document_is_the_committed_snapshot(sim_server: LiveServer) -> None:
    live = httpx.get(sim_server.url + "/openapi.json", timeout=10)  # open: no token needed
    assert live.status_code == 200
    snapshot = json.loads(SNAPSHOT.read_text())
    assert without_version(live.json()) == snapshot, (
        "the HTTP API changed; if that is meant, regenerate the snapshot with "
        f"`{REGENERATE}` and commit it with the change"
    )


def test_the_generator_writes_what_the_server_serves() -> None:
    assert render(document()) == SNAPSHOT.read_text(), f"regenerate with `{REGENERATE}`"


def test_every_v1_operation_needs_the_token_and_declares_its_errors() -> None:
    doc = document()
    assert doc["components"]["securitySchemes"]["bearerAuth"]["scheme"] == "bearer"
    for path, operations in doc["paths"].items():
        for method, operation in operations.items():
            where = f"{method.upper()} {path}"
            responses = operation["responses"]
            assert "422" not in responses, where  # bad input answers 400, never 422
            errors = {code: r for code, r in responses.items() if code[0] in "45"}
            assert "500" in errors, where
            for code, response in errors.items():
                assert response["content"] == {"application/json": {"schema": {
                    "$ref": "#/components/schemas/ErrorResponse"}}}, f"{where} {code}"
            if path == "/v1/auth/token":  # takes an API key, gives the token
                assert "security" not in operation and "429" in errors, where
            elif path.startswith("/v1/"):
                assert operation["security"] == [{"bearerAuth": []}], where
                assert "401" in errors, where
            else:
                assert "security" not in operation, where
    logs = doc["paths"]["/v1/jobs/{name}/logs"]["get"]["responses"]["200"]["content"]
    assert list(logs) == ["text/plain"]
