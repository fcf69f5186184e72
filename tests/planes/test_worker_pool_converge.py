"""The worker's side of node pools, on a real local plane: it offers the local provider,
creates the pools the desired state wants, reports them (a refused one with its class),
deletes those it is told to, and leaves alone a pool nobody lists."""

from __future__ import annotations

from pathlib import Path

from phalanx.compute.local import LocalPlane
from phalanx.provisioning.base import PodSetShape, PoolRequest
from phalanx.spec.planes import DesiredPool
from phalanx.worker.pools import WorkerPools, offered_providers


def wanted(name: str, attempt: int = 1, deleted: bool = False, **options: object
           ) -> DesiredPool:
    request = PoolRequest(
        name=name, job="train", attempt=attempt, flavor="burst", provider="local",
        node_count=2, node={"cpu": 1000}, node_labels={"pool": "burst"}, node_taints=(),
        pod_sets=(PodSetShape("main", 2, {"cpu": 1000}),), options=dict(options))
    return DesiredPool(name=name, provider="local", request=request.to_dict(), deleted=deleted)


def test_the_worker_makes_reports_and_deletes_the_pools_it_is_told(tmp_path: Path) -> None:
    plane = LocalPlane(tmp_path / "home", gpus=[])
    pools = WorkerPools(offered_providers(plane, "local"))
    assert pools.offered == ["local"]
    # Offered only by a plane of its kind.
    assert WorkerPools(offered_providers(plane, "kubernetes")).offered == []

    pools.converge([wanted("train-1")])
    [report] = pools.report()
    assert (report.name, report.provider, report.state) == ("train-1", "local", "Ready")
    assert report.nodes == ["train-1-0", "train-1-1"] and report.error is None
    assert {"train-1-0", "train-1-1"} <= {n.name for n in plane.inventory()}

    # A restarted control plane lists no pool: the worker's stay.
    pools.converge([])
    assert [r.name for r in pools.report()] == ["train-1"]

    pools.converge([wanted("train-1", deleted=True)])
    assert pools.report() == []
    assert not any(n.name.startswith("train-1") for n in plane.inventory())


def test_a_refused_pool_is_reported_with_its_class_until_no_longer_wanted(
        tmp_path: Path) -> None:
    plane = LocalPlane(tmp_path / "home", gpus=[])
    pools = WorkerPools(offered_providers(plane, "local"))
    pools.converge([wanted("train-1", stockout=True)])
    [report] = pools.report()
    assert (report.state, report.error) == ("Failed", "Stockout")
    assert "no capacity" in report.message
    pools.converge([wanted("train-2", attempt=2, error="configuration")])
    [report] = pools.report()  # the first is no longer wanted: dropped
    assert (report.name, report.error) == ("train-2", "ConfigurationError")
    # A provider this worker does not offer is refused for good.
    other = wanted("train-3").model_copy(update={"provider": "kubernetes-provisioningrequest"})
    pools.converge([other])
    [report] = pools.report()
    assert (report.name, report.error) == ("train-3", "ConfigurationError")
    assert "does not offer" in report.message


def test_a_failing_deletion_is_reported_and_tried_again(tmp_path: Path) -> None:
    plane = LocalPlane(tmp_path / "home", gpus=[])
    pools = WorkerPools(offered_providers(plane, "local"))
    pools.converge([wanted("train-1", failDeletion=True)])
    pools.converge([wanted("train-1", deleted=True, failDeletion=True)])
    [report] = pools.report()
    assert report.state == "Ready"
    assert "could not be deleted" in report.deletion_error
    # No longer listed as deleted (the control plane gave up on it): the reason goes too.
    pools.converge([])
    [report] = pools.report()
    assert report.deletion_error == ""
