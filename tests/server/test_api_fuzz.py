"""Every operation of ``/openapi.json``, fuzzed against a live control plane over real HTTP,
as the admin and as a member of a team.

Schemathesis generates requests from the document, valid and invalid, and checks that the
server never fails (5xx) and that each answer has a declared status, content type and
schema (errors in the envelope); a request valid by the document that is refused (400)
must name the field at fault. The control plane runs on the simulated compute plane
(conftest.py), so the jobs the fuzzer submits run nothing on this machine. About 30 s on
two cores; ``python -m benchmarks.api_fuzz`` is the long hunt (``PHALANX_FUZZ_EXAMPLES``
examples per operation and role, and a report of what was sent).
"""

from __future__ import annotations

import json
import os
import time
from collections import Counter
from collections.abc import Iterator
from http.cookiejar import DefaultCookiePolicy
from pathlib import Path
from urllib.parse import quote

import httpx
import pytest
import requests
import schemathesis
from hypothesis import HealthCheck, Phase, given, settings
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
LONG_HUNT = "PHALANX_FUZZ_EXAMPLES" in os.environ
EXAMPLES = int(os.environ.get("PHALANX_FUZZ_EXAMPLES", "25"))
# Where to write what was sent, by operation and role (benchmarks/api_fuzz.py reads it).
REPORT = os.environ.get("PHALANX_FUZZ_REPORT")
SNAPSHOT = Path(__file__).with_name("openapi_v1.json")
# The roles fuzzed; a long hunt runs one process per role (each with a control plane of
# its own, so the admin's rotations and disables leave the member's run alone).
ROLES = tuple(os.environ.get("PHALANX_FUZZ_ROLES", "admin,member").split(","))
# Generating a request body from the document is most of a long hunt's time; shrinking a
# failure to its smallest form would add many minutes per failure there, where the failing
# request as generated is reported all the same.
PHASES = (Phase.explicit, Phase.generate) if LONG_HUNT else tuple(Phase)
# The member's team, and the address its key is exchanged from: another than the fuzzer's,
# whose wrong keys at /v1/auth/token may have the exchange refused from 127.0.0.1 a while.
TEAM, MEMBER, MEMBER_ADDRESS = "fuzz-team", "fuzz-member", "127.0.0.9"
SENT: Counter[tuple[str, str, int]] = Counter()
# Seconds each (operation, role) took: where a long hunt spends its time.
SECONDS: dict[tuple[str, str], float] = {}


class Bearer:
    """A role's token, exchanged again before it expires (tokens live minutes; a long
    hunt lasts longer)."""

    def __init__(self, url: str, key: str, *, exchange: bool) -> None:
        self.url, self.key, self.exchange = url, key, exchange
        # A key to exchange has no token yet: the first header exchanges it.
        self.token, self.expires_at = key, float("-inf") if exchange else float("inf")

    def header(self) -> dict[str, str]:
        if self.exchange and time.time() > self.expires_at - 60:
            transport = httpx.HTTPTransport(local_address=MEMBER_ADDRESS)
            with httpx.Client(transport=transport, timeout=30) as client:
                answer = client.post(f"{self.url}/v1/auth/token", json={"key": self.key})
            assert answer.status_code == 200, answer.text
            self.token, self.expires_at = answer.json()["token"], answer.json()["expiresAt"]
        return {"Authorization": f"Bearer {self.token}"}


@pytest.fixture(scope="module")
def bearers(sim_server: LiveServer) -> Iterator[dict[str, Bearer]]:
    """The admin (the bootstrap key) and a member of a team that submits to ``default``."""
    with sim_server.client() as api:
        assert api.put(f"/v1/teams/{TEAM}", json={"queues": ["default"]}).is_success
        assert api.post("/v1/users", json={"name": MEMBER, "role": "member",
                                           "teams": [TEAM]}).is_success
        key = api.post("/v1/keys", json={"user": MEMBER, "description": "fuzzing"})
        assert key.status_code == 201, key.text
    roles = {"admin": Bearer(sim_server.url, sim_server.token, exchange=False),
             "member": Bearer(sim_server.url, key.json()["key"], exchange=True)}
    yield roles


@pytest.fixture(scope="module")
def session() -> Iterator[requests.Session]:
    """One connection kept alive for every fuzzed request (a new one per request costs more
    than many an answer); it keeps no cookie, so each request carries only its own."""
    with requests.Session() as kept:
        kept.cookies.set_policy(DefaultCookiePolicy(allowed_domains=[]))
        yield kept


@pytest.fixture(scope="module")
def admin_api(sim_server: LiveServer) -> Iterator[httpx.Client]:
    with sim_server.client() as client:
        yield client


def _is_role(bearer: Bearer, role: str, url: str, session: requests.Session) -> None:
    """Each role is who it should be before its operation, or nothing is tested (a token
    that the admin's fuzzed signing-key rotation voided is exchanged again)."""
    me = session.get(f"{url}/v1/auth/whoami", headers=bearer.header(), timeout=30)
    if me.status_code == 401 and bearer.exchange:
        bearer.expires_at = float("-inf")
        me = session.get(f"{url}/v1/auth/whoami", headers=bearer.header(), timeout=30)
    assert me.status_code == 200 and me.json()["role"] == role, (role, me.text)


def _report() -> None:
    """What was sent so far (after each operation: a long hunt stopped early still tells)."""
    if REPORT:
        rows = [{"operation": op, "role": role, "status": status, "requests": n}
                for (op, role, status), n in sorted(SENT.items())]
        took = [{"operation": op, "role": role, "seconds": round(seconds, 1)}
                for (op, role), seconds in sorted(SECONDS.items())]
        Path(REPORT).write_text(json.dumps({"examples": EXAMPLES, "sent": rows,
                                            "seconds": took}, indent=2))


@pytest.fixture(scope="module")
def api_schema(sim_server: LiveServer) -> BaseSchema:
    return schemathesis.openapi.from_url(sim_server.url + "/openapi.json")


def _operations() -> list[str]:
    """Labels of the operations, from the snapshot that test_openapi.py keeps equal to the
    live document (the live one is what gets fuzzed: the server starts only at run time)."""
    doc = json.loads(SNAPSHOT.read_text())
    return [f"{method.upper()} {path}" for path, ops in doc["paths"].items() for method in ops]


def _strategy(operation: APIOperation) -> st.SearchStrategy[tuple[Case, bool]]:
    """Cases, each with whether the document says it is valid."""
    # A followed log streams until its job ends, and a fuzzed job may wait for ever;
    # the followed answer is checked on its own in test_api.py.
    query = {"follow": "false"} if operation.path.endswith("/logs") else None
    valid = operation.as_strategy(GenerationMode.POSITIVE, query=query)
    invalid = operation.as_strategy(GenerationMode.NEGATIVE, query=query)
    return st.one_of(valid.map(lambda case: (case, True)),
                     invalid.map(lambda case: (case, False)))


@pytest.mark.parametrize("role", ROLES)
@pytest.mark.parametrize("label", _operations())
def test_every_operation_answers_as_declared(
    label: str, role: str, api_schema: BaseSchema, sim_server: LiveServer,
    bearers: dict[str, Bearer], session: requests.Session, admin_api: httpx.Client,
) -> None:
    operation = api_schema.find_operation_by_label(label)
    assert operation is not None, f"{label} is in the snapshot but not in the live document"
    bearer = bearers[role]
    _is_role(bearer, role, sim_server.url, session)

    @given(drawn=_strategy(operation))
    @settings(max_examples=EXAMPLES, deadline=None, database=None, phases=PHASES,
              suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much])
    def answers_as_declared(drawn: tuple[Case, bool]) -> None:
        case, valid = drawn
        new_job = _new_job_name(label, case, admin_api)
        response = case.call_and_validate(base_url=sim_server.url, session=session,
                                          headers=bearer.header(), checks=CHECKS, timeout=30)
        SENT[(label, role, response.status_code)] += 1
        if valid and response.status_code == 400:
            refusal = response.json()["error"]
            assert refusal["field"], (
                f"a request valid by the document was refused without naming the field: "
                f"{refusal}")
        if new_job is not None and response.status_code >= 400:
            assert not _stored(new_job, admin_api), (
                f"a refused submit ({response.status_code}) stored job {new_job!r}")

    started = time.monotonic()
    try:
        answers_as_declared()
    finally:
        SECONDS[(label, role)] = time.monotonic() - started
        _report()


def _new_job_name(label: str, case: Case, admin_api: httpx.Client) -> str | None:
    """The name a fuzzed submit asks for, if no job has it yet: a refused submit must leave
    it free (nothing half-applied)."""
    name = case.body.get("name") if isinstance(case.body, dict) else None
    if label != "POST /v1/jobs" or not isinstance(name, str) or not name:
        return None
    return None if _stored(name, admin_api) else name


def _stored(name: str, admin_api: httpx.Client) -> bool:
    """Whether a job of this name is stored (asked as the admin, who sees every job)."""
    return admin_api.get(f"/v1/jobs/{quote(name, safe='')}").status_code == 200


def test_the_server_logged_no_traceback(sim_server: LiveServer) -> None:
    """Runs after the fuzzing above: a 5xx that slipped past the checks would leave one."""
    log = (sim_server.home / "server.log").read_text()
    assert "Traceback" not in log, log[-4000:]
