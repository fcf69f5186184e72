"""A Ray cluster's dashboard through the control plane's proxy, on the local plane with
real Ray: its member submits a Ray job there with Ray's own ``JobSubmissionClient`` and
their bearer token, and reads its logs; a teammate may read but not submit; another
team's member is answered as if the cluster did not exist. One small cluster (a head)."""

from __future__ import annotations

import contextlib
import time
from collections.abc import Iterator
from dataclasses import dataclass

import httpx
import pytest

from phalanx import Client
from phalanx.ray import Cluster, ClusterConfiguration
from tests.e2e.conftest import ControlPlane, running

pytest.importorskip("ray")

from ray.job_submission import JobStatus as RayJobStatus
from ray.job_submission import JobSubmissionClient

pytestmark = [pytest.mark.slow, pytest.mark.timeout(600)]
READY_SECONDS = 240
NAME = "dash"
QUEUES = [
    {"kind": "ClusterQueue", "name": "cq", "resourceGroups": [{
        "coveredResources": ["cpu", "memory"], "flavors": [{"name": "default", "resources": [
            {"name": "cpu", "nominalQuota": 2}, {"name": "memory", "nominalQuota": "4Gi"}]}]}]},
    {"kind": "LocalQueue", "name": "qa", "clusterQueue": "cq"},
    {"kind": "LocalQueue", "name": "qb", "clusterQueue": "cq"},
]


@dataclass
class Setup:
    plane: ControlPlane
    url: str
    tokens: dict[str, str]  # user -> bearer token
    cluster: Cluster

    def headers(self, user: str) -> dict[str, str]:
        return {"Authorization": f"Bearer {self.tokens[user]}"}


def _member(plane: ControlPlane, user: str, team: str) -> Client:
    api = plane.api
    assert api.post("/v1/users", json={"name": user, "role": "member",
                                       "teams": [team]}).status_code == 201
    created = api.post("/v1/keys", json={"user": user})
    assert created.status_code == 201, created.text
    return Client(str(api.base_url), created.json()["key"])


@pytest.fixture(scope="module")
def setup(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Setup]:
    with running(ControlPlane(tmp_path_factory.mktemp("raydash") / "home", grace=15)) as cp:
        api = cp.api
        assert api.post("/v1/config/apply", json={"documents": QUEUES}).status_code == 200
        for team, queue in (("team-a", "qa"), ("team-b", "qb")):
            assert api.put(f"/v1/teams/{team}", json={"queues": [queue]}).status_code == 200
        clients = {user: _member(cp, user, team) for user, team in (
            ("alice", "team-a"), ("bob", "team-a"), ("mallory", "team-b"))}
        tokens = {user: c.bearer() or "" for user, c in clients.items()}
        cluster = Cluster(ClusterConfiguration(
            name=NAME, local_queue="qa", num_workers=0, head_cpu="500m", head_memory="1Gi",
            # A machine busy with other work may take Ray's node more than its default
            # minute to register.
            envs={"RAY_raylet_start_wait_time_s": "300"}), clients["alice"])
        cluster.up()
        # Through the proxy already: wait_ready asks the dashboard which Ray nodes live.
        cluster.wait_ready(timeout=READY_SECONDS, show_progress=False)
        try:
            yield Setup(cp, str(api.base_url).rstrip("/"), tokens, cluster)
        finally:
            with contextlib.suppress(Exception):
                cluster.down(show_progress=False)
            for c in clients.values():
                c.close()


def test_a_member_submits_a_ray_job_through_the_proxy_with_rays_own_client(
        setup: Setup) -> None:
    address = setup.cluster.dashboard_uri()
    assert address == f"{setup.url}/v1/jobs/{NAME}/ray"
    assert setup.cluster.cluster_dashboard_uri() == address  # CodeFlare's name
    ray_client = JobSubmissionClient(address, headers=setup.headers("alice"))
    submission = ray_client.submit_job(
        entrypoint="python -c \"print('hello through the proxy')\"")
    deadline = time.monotonic() + 120
    status = ray_client.get_job_status(submission)
    while not status.is_terminal() and time.monotonic() < deadline:
        time.sleep(0.5)
        status = ray_client.get_job_status(submission)
    logs = ray_client.get_job_logs(submission)
    assert status == RayJobStatus.SUCCEEDED, logs
    assert "hello through the proxy" in logs
    assert submission in {job.submission_id for job in ray_client.list_jobs()}
    # The SDK's own job client goes the same way, with the same token.
    assert setup.cluster.job_status(submission) == RayJobStatus.SUCCEEDED


def test_another_teams_member_is_answered_as_for_no_such_cluster(setup: Setup) -> None:
    with httpx.Client(base_url=setup.url, headers=setup.headers("mallory"), timeout=30) as http:
        for method in ("GET", "POST"):
            theirs = http.request(method, f"/v1/jobs/{NAME}/ray/api/jobs/", json={
                "entrypoint": "env"})
            none = http.request(method, "/v1/jobs/nosuch/ray/api/jobs/", json={
                "entrypoint": "env"})
            assert theirs.status_code == none.status_code == 404, theirs.text
            assert theirs.json()["error"]["message"].replace(NAME, "nosuch") == \
                none.json()["error"]["message"]
            assert {k: v for k, v in theirs.json()["error"].items() if k != "message"} == \
                {k: v for k, v in none.json()["error"].items() if k != "message"}
    with pytest.raises(Exception, match="404"):
        # Ray's client checks the address first, and is refused there.
        JobSubmissionClient(setup.cluster.dashboard_uri(), headers=setup.headers("mallory"))


def test_a_teammate_reads_the_dashboard_but_may_not_submit(setup: Setup) -> None:
    with httpx.Client(base_url=setup.url, headers=setup.headers("bob"), timeout=30) as http:
        version = http.get(f"/v1/jobs/{NAME}/ray/api/version")
        assert version.status_code == 200 and "ray_version" in version.json()
        refused = http.post(f"/v1/jobs/{NAME}/ray/api/jobs/", json={"entrypoint": "env"})
        assert refused.status_code == 403, refused.text
        assert "submitter (alice)" in refused.json()["error"]["message"]
    anonymous = httpx.get(f"{setup.url}/v1/jobs/{NAME}/ray/api/version", timeout=30)
    assert anonymous.status_code == 401


def test_the_dashboards_own_page_comes_through(setup: Setup) -> None:
    """The dashboard's own page (what the widget's dashboard button opens), as it sent it,
    sandboxed in an origin of its own, without the dashboard's cookies."""
    with httpx.Client(base_url=setup.url, headers=setup.headers("alice"), timeout=30) as http:
        page = http.get(f"/v1/jobs/{NAME}/ray/")
        assert page.status_code == 200 and "<html" in page.text.lower()
        assert "set-cookie" not in page.headers
        assert page.headers["content-security-policy"].startswith("sandbox ")


def test_a_dashboard_not_answering_yet_is_no_failure_of_the_control_plane(
        setup: Setup) -> None:
    """wait_ready() asked the proxy while the head was starting (503s, said to the caller):
    the control plane logged no failure of its own for them."""
    assert "Traceback" not in (setup.plane.home / "server.log").read_text()
