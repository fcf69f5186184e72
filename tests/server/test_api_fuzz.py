"""Every operation of ``/openapi.json``, fuzzed against a live control plane over real HTTP.

Schemathesis generates requests from the document, valid and invalid, and checks that the
server never fails (5xx) and that each answer has a declared status, content type and
schema. The control plane runs on the simulated compute plane (conftest.py), so the jobs the
fuzzer submits run nothing on this machine. About 15 s on two cores.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from urllib.parse import quote

import httpx
import pytest
import schemathesis
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from schemathesis import Case, GenerationMode
from schemathesis.checks import not_a_server_error
from schemathesis.schemas import APIOperation, BaseSchema
from schemathesis.specs.openapi.checks import (
    content_type_conformance,
    response_schema_conformance,
    status_code_conformance,
)

from tests.sdk.live_server import LiveServer

pytestmark = pytest.mark.slow

CHECKS = [
    not_a_server_error, response_schema_conformance, status_code_conformance,
    content_type_conformance,
]
# A bounded number per operation in the suite; a longer hunt sets PHALANX_FUZZ_EXAMPLES.
EXAMPLES = int(os.environ.get("PHALANX_FUZZ_EXAMPLES", "25"))
SNAPSHOT = Path(__file__).with_name("openapi_v1.json")


@pytest.fixture(scope="module")
def api_schema(sim_server: LiveServer) -> BaseSchema:
    return schemathesis.openapi.from_url(sim_server.url + "/openapi.json")


def _operations() -> list[str]:
    """Labels of the operations, from the snapshot that test_openapi.py keeps equal to the
    live document (the live one is what gets fuzzed: the server starts only at run time)."""
    doc = json.loads(SNAPSHOT.read_text())
    return [f"{method.upper()} {path}" for path, ops in doc["paths"].items() for method in ops]


def _strategy(operation: APIOperation) -> st.SearchStrategy[Case]:
    # A followed log streams until its job ends, and a fuzzed job may wait for ever;
    # the followed answer is checked on its own in test_api.py.
    query = {"follow": "false"} if operation.path.endswith("/logs") else None
    modes = (GenerationMode.POSITIVE, GenerationMode.NEGATIVE)
    return st.one_of(*(operation.as_strategy(mode, query=query) for mode in modes))


@pytest.mark.parametrize("label", _operations())
def test_every_operation_answers_as_declared(
    label: str, api_schema: BaseSchema, sim_server: LiveServer
) -> None:
    operation = api_schema.find_operation_by_label(label)
    assert operation is not None, f"{label} is in the snapshot but not in the live document"
    headers = {"Authorization": f"Bearer {sim_server.token}"}

    @given(case=_strategy(operation))
    @settings(max_examples=EXAMPLES, deadline=None, database=None,
              suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much])
    def answers_as_declared(case: Case) -> None:
        new_job = _new_job_name(label, case, sim_server)
        response = case.call_and_validate(base_url=sim_server.url, headers=headers,
                                          checks=CHECKS, timeout=30)
        if new_job is not None and response.status_code >= 400:
            assert not _stored(new_job, sim_server), (
                f"a refused submit ({response.status_code}) stored job {new_job!r}")

    answers_as_declared()


def _new_job_name(label: str, case: Case, server: LiveServer) -> str | None:
    """The name a fuzzed submit asks for, if no job has it yet: a refused submit must leave
    it free (nothing half-applied)."""
    name = case.body.get("name") if isinstance(case.body, dict) else None
    if label != "POST /v1/jobs" or not isinstance(name, str) or not name:
        return None
    return None if _stored(name, server) else name


def _stored(name: str, server: LiveServer) -> bool:
    answer = httpx.get(f"{server.url}/v1/jobs/{quote(name, safe='')}",
                       headers={"Authorization": f"Bearer {server.token}"}, timeout=30)
    return answer.status_code == 200


def test_the_server_logged_no_traceback(sim_server: LiveServer) -> None:
    """Runs after the fuzzing above: a 5xx that slipped past the checks would leave one."""
    log = (sim_server.home / "server.log").read_text()
    assert "Traceback" not in log, log[-4000:]
