"""A launched attempt reads as pending on a remote plane until its worker reports it."""

from __future__ import annotations

from phalanx.compute.base import PodPhase
from phalanx.compute.remote import RemotePlane
from phalanx.scheduler.types import Admission, PodSetAssignment
from phalanx.spec.planes import PlaneReport, PodReport
from phalanx.spec.resources import JobSpec

JOB = JobSpec.model_validate({"name": "ddp", "podSets": [
    {"name": "main", "replicas": 2, "command": ["true"], "resources": {"cpu": "1"}}]})
ADMISSION = Admission(job="ddp", cluster_queue="default", pod_sets=(
    PodSetAssignment(name="main", count=2, flavors={"cpu": "default"}, nodes=("n1", "n2")),))


def _report(plane: RemotePlane, *pods: PodReport) -> None:
    plane.report(PlaneReport(worker="w", pods=list(pods)))


def test_pending_until_reported_then_what_the_worker_says() -> None:
    plane = RemotePlane("gke")
    _report(plane)
    plane.launch(JOB, 1, ADMISSION)
    before = plane.observe()
    assert [(p.ref.rank, p.node, p.phase) for p in before] == [
        (0, "n1", PodPhase.PENDING), (1, "n2", PodPhase.PENDING)]
    _report(plane)  # a report from before the worker created anything: still pending
    assert len(plane.observe()) == 2
    running = [PodReport(job="ddp", attempt=1, pod_set="main", index=i, rank=i, node=n,
                         phase="Running") for i, n in enumerate(("n1", "n2"))]
    _report(plane, *running)
    assert {p.phase for p in plane.observe()} == {PodPhase.RUNNING}
    # Once reported, an attempt the worker stops reporting is gone: no stand-in returns.
    _report(plane)
    assert plane.observe() == []


def test_a_stopped_attempt_leaves_no_stand_in() -> None:
    plane = RemotePlane("gke")
    plane.launch(JOB, 1, ADMISSION)
    plane.terminate("ddp", 1)
    assert plane.observe() == []
