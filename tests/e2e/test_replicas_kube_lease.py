"""Replicas of the control plane electing their leader through a Kubernetes Lease.

Two ``phalanx up --ha --leader-lease kubernetes:default/phalanx-control-plane`` processes on
one PostgreSQL store, against the Kubernetes API mock over HTTP: the Lease names the
leader; killed with SIGKILL, the other replica takes the Lease once it runs out, leads with
the next term and runs what is submitted next.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from phalanx.compute.kubernetes.leader import URL_ANNOTATION
from tests.e2e.conftest import py_job
from tests.e2e.test_replicas import Replica, Replicas
from tests.k8s_plane.fake_apiserver import FakeAPIServer
from tests.store.postgres import fresh_database, postgres_admin_url

pytestmark = [pytest.mark.slow, pytest.mark.postgres]

LEASE = 3.0
WHERE = "default/phalanx-control-plane"


@pytest.fixture
def api() -> Iterator[FakeAPIServer]:
    server = FakeAPIServer(namespaces=("default",)).start()
    try:
        yield server
    finally:
        server.stop()


def _holder(api: FakeAPIServer) -> tuple[str, str, int]:
    lease = api.get("leases", "phalanx-control-plane", "default")
    assert lease is not None
    return (lease["spec"]["holderIdentity"], lease["metadata"]["annotations"][URL_ANNOTATION],
            lease["spec"]["leaseTransitions"])


def test_the_lease_names_the_leader_and_a_follower_takes_it_when_the_leader_dies(
    tmp_path: Path, api: FakeAPIServer,
) -> None:
    kubeconfig = tmp_path / "kubeconfig"
    kubeconfig.write_text(api.kubeconfig())
    home = tmp_path / "home"
    home.mkdir(mode=0o700)
    with fresh_database(postgres_admin_url()) as db:
        group = Replicas(home, [Replica(i, home, db, lease=LEASE, leader_lease=f"kubernetes:{WHERE}",
                                        env={"KUBECONFIG": str(kubeconfig)})
                                for i in range(2)])
        try:
            for replica in group.members:
                replica.start()
            first = group.leader()
            holder, url, transitions = _holder(api)
            assert (url, transitions) == (first.url, 0)
            first_term = first.ready()
            assert first_term is not None
            with group.client() as client:
                client.submit(py_job("before", "print('before')"))
                assert client.wait("before", timeout=120).status.value == "Succeeded"

            assert first.proc is not None
            first.proc.kill()  # SIGKILL: no release; the Lease runs out
            first.proc.wait(30)
            second = group.leader(besides=first)
            new_holder, new_url, new_transitions = _holder(api)
            assert new_holder != holder and new_url == second.url and new_transitions == 1
            second_term = second.ready()
            assert second_term is not None and second_term["term"] == first_term["term"] + 1
            with group.client() as client:
                client.submit(py_job("after", "print('after')"))
                assert client.wait("after", timeout=120).status.value == "Succeeded"
                assert {r.name for r in client.list()} >= {"before", "after"}
        finally:
            group.stop()
