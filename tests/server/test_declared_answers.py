"""Answers the API gives that the fuzz run found undeclared, pinned: each is in the error
envelope and among the responses ``/openapi.json`` declares for its operation (clients
generated from the document depend on that)."""

from __future__ import annotations

from typing import Any

import httpx
import pytest

from tests.server.envelope import error

pytestmark = pytest.mark.slow

# A pod set that names a secret nobody has: the same 404 as another team's secret.
NAMES_A_MISSING_SECRET = {"command": ["true"], "imagePullSecrets": ["t150ccek6509p0"]}


def declared(api: httpx.Client, method: str, path: str) -> set[str]:
    return set(api.get("/openapi.json").json()["paths"][path][method]["responses"])


@pytest.mark.parametrize(("path", "body"), [
    ("/v1/jobs", {"name": "pulls-nothing", "podSets": [NAMES_A_MISSING_SECRET]}),
    ("/v1/jobs:batch", {"items": [{"name": "pulls-nothing", "podSets": [
        NAMES_A_MISSING_SECRET]}]}),
    ("/v1/manifests", {"items": [{"name": "pulls-nothing", "podSets": [
        NAMES_A_MISSING_SECRET]}]}),
])
def test_a_submit_naming_a_secret_it_may_not_use_answers_a_declared_404(
    api: httpx.Client, path: str, body: dict[str, Any],
) -> None:
    field, message, fix = error(api.post(path, json=body), 404)
    assert field is not None and field.endswith("imagePullSecrets[0].name"), field
    assert "t150ccek6509p0" in message and fix
    assert "404" in declared(api, "post", path)
    assert api.get("/v1/jobs/pulls-nothing").status_code == 404  # nothing was stored
