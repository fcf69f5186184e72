"""The provider the control plane drives for a plane behind a worker: creating and deleting
edit the plane's desired state, statuses come from the worker's reports, failures keep
their class, and a silent worker's pools read Unknown."""

from __future__ import annotations

import pytest

from phalanx.compute.remote import PlaneState, PlaneTimers, RemotePlane
from phalanx.provisioning.base import (
    ConfigurationError,
    PodSetShape,
    PoolRequest,
    PoolState,
    Stockout,
    TransientError,
)
from phalanx.provisioning.remote import RemoteProvider
from phalanx.provisioning.rules import ProvisioningSettings, failure_decision
from phalanx.spec.planes import DesiredState, PlaneHello, PlaneReport, PoolReport


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def request(name: str = "train-1") -> PoolRequest:
    return PoolRequest(
        name=name, job="train", attempt=1, flavor="burst", provider="local", node_count=2,
        node={"cpu": 1000}, node_labels={"phalanx.dev/plane": "east"}, node_taints=(),
        pod_sets=(PodSetShape("main", 2, {"cpu": 1000}),))


def connected(clock: Clock, providers: list[str] | None = None) -> RemotePlane:
    plane = RemotePlane("east", timers=PlaneTimers(worker_grace=5, worker_lost_after=60),
                        clock=clock)
    plane.hello(PlaneHello(worker="w1", compute="local", fence_after=10,
                           providers=["local"] if providers is None else providers))
    plane.report(PlaneReport(worker="w1", seq=1, nodes=[]))
    assert plane.state is PlaneState.CONNECTED
    return plane


def report(plane: RemotePlane, seq: int, *pools: PoolReport) -> None:
    plane.report(PlaneReport(worker="w1", seq=seq, pools=list(pools)))


def test_create_asks_the_worker_and_reads_its_report() -> None:
    plane = connected(Clock())
    provider = RemoteProvider("local", plane)
    before = plane.desired(-1, 0).version
    status = provider.create(request())
    assert status.state is PoolState.CREATING and status.node_count == 2
    desired = plane.desired(before, 0)
    assert desired.version > before  # the worker's poll wakes
    assert [(p.name, p.provider, p.deleted) for p in desired.pools] == [
        ("train-1", "local", False)]
    assert PoolRequest.from_dict(desired.pools[0].request) == request()
    report(plane, 2, PoolReport(name="train-1", provider="local", state="Ready",
                                nodes=["train-1-0", "train-1-1"], ready_nodes=2, node_count=2,
                                config_hash=request().config_hash))
    ready = provider.status("train-1")
    assert ready is not None and ready.ready
    # Named as the control plane names the plane's nodes.
    assert ready.nodes == ("east.train-1-0", "east.train-1-1")
    assert [s.name for s in provider.list()] == ["train-1"]
    assert RemoteProvider("other", plane).list() == []


@pytest.mark.parametrize(("kind", "cls"), [("Stockout", Stockout),
                                           ("ConfigurationError", ConfigurationError),
                                           ("TransientError", TransientError)])
def test_a_failure_on_the_worker_keeps_its_class(kind: str, cls: type) -> None:
    plane = connected(Clock())
    provider = RemoteProvider("local", plane)
    provider.create(request())
    report(plane, 2, PoolReport(name="train-1", provider="local", state="Failed",
                                message="no capacity", error=kind))
    failed = provider.status("train-1")
    assert failed is not None and failed.state is PoolState.FAILED
    assert type(failed.error) is cls and failed.error.message == "no capacity"
    # So the same rules decide: a configuration error fails the job, the others do not.
    decision = failure_decision(failed.error, "what", 0.0, ProvisioningSettings(),
                                transient_tries=1)
    assert decision.fail_job is (cls is ConfigurationError)


def test_delete_is_confirmed_once_the_worker_reports_the_pool_gone() -> None:
    plane = connected(Clock())
    provider = RemoteProvider("local", plane)
    provider.create(request())
    pool = PoolReport(name="train-1", provider="local", state="Ready", nodes=["train-1-0"])
    report(plane, 2, pool)
    provider.delete("train-1")
    assert [(p.name, p.deleted) for p in plane.desired(-1, 0).pools] == [("train-1", True)]
    report(plane, 3, pool)  # not deleted yet
    assert provider.status("train-1") is not None
    report(plane, 4)
    assert provider.status("train-1") is None
    assert plane.desired(-1, 0).pools == []  # done: no longer sent


def test_a_silent_workers_pools_read_unknown_and_no_deletion_is_taken_as_done() -> None:
    clock = Clock()
    plane = connected(clock)
    provider = RemoteProvider("local", plane)
    provider.create(request())
    report(plane, 2, PoolReport(name="train-1", provider="local", state="Ready"))
    provider.delete("train-1")
    clock.now += 10  # past the grace
    plane.observe()
    assert plane.state is PlaneState.SILENT
    unknown = provider.status("train-1")
    assert unknown is not None and unknown.state is PoolState.UNKNOWN
    assert "disconnected" in unknown.message
    assert provider.list() == []  # nothing is collected on an old report
    assert provider.status("never-asked") is None


def test_a_provider_the_worker_does_not_offer_is_refused_for_good() -> None:
    plane = connected(Clock(), providers=[])
    with pytest.raises(ConfigurationError, match="does not offer provider local"):
        RemoteProvider("local", plane).create(request())
    assert plane.desired(-1, 0).pools == []
    # A worker not heard from since this start has not said: tried again later.
    fresh = RemotePlane("east")
    with pytest.raises(TransientError, match="has not said"):
        RemoteProvider("local", fresh).create(request())


def test_old_workers_and_control_planes_still_talk() -> None:
    # Messages without the pool fields parse, with nothing to do.
    assert DesiredState.model_validate({"version": 3}).pools == []
    old = PlaneReport.model_validate({"worker": "w1", "seq": 1})
    assert old.pools == [] and old.providers is None
    assert PlaneHello.model_validate({"worker": "w", "compute": "local",
                                      "fence_after": 5}).providers == []


def test_a_deletion_failing_on_the_worker_raises_as_its_provider_would() -> None:
    plane = connected(Clock())
    provider = RemoteProvider("local", plane)
    provider.create(request())
    report(plane, 2, PoolReport(name="train-1", provider="local", state="Ready",
                                deletion_error="pool train-1 could not be deleted"))
    with pytest.raises(TransientError, match="could not delete pool train-1: pool train-1"):
        provider.delete("train-1")
    assert [(p.name, p.deleted) for p in plane.desired(-1, 0).pools] == [("train-1", True)]
    report(plane, 3)
    provider.delete("train-1")  # gone: nothing to say
    assert provider.status("train-1") is None
