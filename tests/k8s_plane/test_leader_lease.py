"""Replicas electing their leader through a ``coordination.k8s.io`` Lease on the API mock.

The Lease decides who leads (taken once it has run out, each change conditioned on the
resourceVersion read, ``leaseTransitions`` counting the holders); the store's lease row
follows it and fences: the replica the Lease no longer names writes nothing.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from phalanx.compute.kubernetes.client import KubeClient, configure
from phalanx.compute.kubernetes.leader import URL_ANNOTATION, KubeLeaderLease
from phalanx.compute.kubernetes.lease import parse_micro_time
from phalanx.errors import NotLeader, SpecError
from phalanx.server.replicas import Elector, leader_leases, parse_leader_lease
from phalanx.store import Store
from phalanx.store.leases import Fence, LeaseStore
from tests.k8s_plane.conftest import wait_until
from tests.k8s_plane.fake_apiserver import FakeAPIServer
from tests.store.factories import make_record

URL_A, URL_B = "http://a:7780", "http://b:7780"
NAME = "phalanx-control-plane"


@pytest.fixture
def store(tmp_path: Path) -> Iterator[Store]:
    with Store(f"sqlite:///{tmp_path / 'state' / 'phalanx.db'}") as opened:
        yield opened


def _leases(kubeconfig: Path, store: Store) -> KubeLeaderLease:
    configuration, _ = configure(kubeconfig=kubeconfig)
    return KubeLeaderLease(KubeClient(configuration), "default", LeaseStore(store))


def _lease_object(api: FakeAPIServer) -> dict:
    found = api.get("leases", NAME, "default")
    assert found is not None
    return found


def test_the_lease_names_the_leader_and_a_live_one_is_not_taken(
    api: FakeAPIServer, kubeconfig: Path, store: Store,
) -> None:
    leases = _leases(kubeconfig, store)
    first = leases.try_acquire("a", URL_A, 5.0, now=1000.0)
    assert (first.holder, first.url, first.term) == ("a", URL_A, 1)
    obj = _lease_object(api)
    assert obj["spec"]["holderIdentity"] == "a"
    assert obj["spec"]["leaseDurationSeconds"] == 5
    assert obj["spec"]["leaseTransitions"] == 0
    assert parse_micro_time(obj["spec"]["renewTime"]) == pytest.approx(1000.0)
    assert obj["metadata"]["annotations"][URL_ANNOTATION] == URL_A
    # The store's row follows: its term is what fences.
    row = LeaseStore(store).read()
    assert row is not None and (row.holder, row.term) == ("a", 1)

    # Another replica sees the holder and where it answers, and takes nothing.
    seen = leases.try_acquire("b", URL_B, 5.0, now=1004.0)
    assert (seen.holder, seen.url) == ("a", URL_A)
    assert seen.expires_at == pytest.approx(1005.0)
    assert _lease_object(api)["spec"]["holderIdentity"] == "a"
    row = LeaseStore(store).read()
    assert row is not None and row.holder == "a"

    renewed = leases.try_acquire("a", URL_A, 5.0, now=1004.5)
    assert (renewed.holder, renewed.term) == ("a", 1)
    assert parse_micro_time(_lease_object(api)["spec"]["renewTime"]) == pytest.approx(1004.5)


def test_a_lease_run_out_is_taken_and_the_old_leader_is_fenced_in_the_store(
    api: FakeAPIServer, kubeconfig: Path, store: Store,
) -> None:
    leases = _leases(kubeconfig, store)
    old = leases.try_acquire("a", URL_A, 5.0, now=1000.0)
    store.fence = Fence(old.name, "a", old.term)
    store.create_job(make_record("before"))

    taken = leases.try_acquire("b", URL_B, 5.0, now=1005.0)  # a went silent
    assert (taken.holder, taken.url, taken.term) == ("b", URL_B, 2)
    obj = _lease_object(api)
    assert (obj["spec"]["holderIdentity"], obj["spec"]["leaseTransitions"]) == ("b", 1)
    assert parse_micro_time(obj["spec"]["acquireTime"]) == pytest.approx(1005.0)

    # a, resumed, still believes it leads: the store refuses its write.
    with pytest.raises(NotLeader):
        store.create_job(make_record("after"))
    store.fence = None
    assert [r.name for r in store.list_jobs()] == ["before"]


def test_two_replicas_racing_for_a_free_lease_never_both_lead(
    api: FakeAPIServer, kubeconfig: Path, store: Store,
) -> None:
    leases = _leases(kubeconfig, store)
    leases.try_acquire("a", URL_A, 5.0, now=1000.0)
    winners: list[str] = []
    barrier = threading.Barrier(4)

    def contend(holder: str) -> None:
        mine = _leases(kubeconfig, store)
        barrier.wait()
        lease = mine.try_acquire(holder, f"http://{holder}:7780", 5.0, now=2000.0)
        if lease.holder == holder:
            winners.append(holder)

    threads = [threading.Thread(target=contend, args=(h,)) for h in ("b", "c", "d", "e")]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(30)
    assert len(winners) == 1, winners
    assert _lease_object(api)["spec"]["holderIdentity"] == winners[0]
    assert _lease_object(api)["spec"]["leaseTransitions"] == 1
    row = LeaseStore(store).read()
    assert row is not None and (row.holder, row.term) == (winners[0], 2)


def test_a_released_lease_is_taken_at_once(
    api: FakeAPIServer, kubeconfig: Path, store: Store,
) -> None:
    leases = _leases(kubeconfig, store)
    held = leases.try_acquire("a", URL_A, 60.0)
    fence = Fence(held.name, "a", held.term)
    assert leases.release(fence)
    assert _lease_object(api)["spec"]["holderIdentity"] == ""
    taken = leases.try_acquire("b", URL_B, 60.0)
    assert (taken.holder, taken.term) == ("b", 2)
    assert not leases.release(fence)  # not a's to give any more
    assert _lease_object(api)["spec"]["holderIdentity"] == "b"


def test_electors_hand_over_through_the_lease(
    api: FakeAPIServer, kubeconfig: Path, store: Store,
) -> None:
    """Two Electors (what ``phalanx up --ha --leader-lease kubernetes`` runs): the first to
    try leads; stopped (a planned stop releases), the other leads with the next term."""
    led: dict[str, Fence] = {}
    lost: list[str] = []

    def elector(holder: str, url: str) -> Elector:
        return Elector(store, url, 3.0, holder=holder, leases=_leases(kubeconfig, store),
                       on_lead=lambda fence: led.__setitem__(holder, fence),
                       on_lost=lost.append)

    first = elector("a", URL_A)
    first.start()
    wait_until(lambda: "a" in led, what="a leads")
    second = elector("b", URL_B)
    second.start()
    try:
        wait_until(lambda: second.leader_url() == URL_A, what="b sees a lead")
        assert "b" not in led
        first.stop()
        wait_until(lambda: "b" in led, timeout=15, what="b leads")
        assert led["b"].term == led["a"].term + 1
        assert _lease_object(api)["spec"]["holderIdentity"] == "b"
        assert lost == []
    finally:
        second.stop()
        first.stop()


def test_leader_lease_values_are_checked_naming_the_option(tmp_path: Path,
                                                           store: Store) -> None:
    assert parse_leader_lease("store") == ("store", None, None)
    assert parse_leader_lease("kubernetes") == ("kubernetes", None, None)
    assert parse_leader_lease("kubernetes:ops/lead") == ("kubernetes", "ops", "lead")
    for bad in ("etcd", "kubernetes:ops", "kubernetes:/x", "store:x"):
        with pytest.raises(SpecError) as caught:
            parse_leader_lease(bad)
        assert caught.value.field == "--leader-lease"
        assert "kubernetes:NAMESPACE/NAME" in (caught.value.fix or "")
    assert isinstance(leader_leases(store, "store"), LeaseStore)
