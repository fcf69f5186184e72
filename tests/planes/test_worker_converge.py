"""The worker's converge against a real simulated plane: an attempt it refused stays
refused while the control plane lists it (the refusal is sent again when the desired state
is taken whole), and an attempt it launched is never launched twice."""

from __future__ import annotations

from pathlib import Path

from phalanx.compute.simulated import SimulatedPlane
from phalanx.spec.planes import DesiredAttempt, DesiredState
from phalanx.spec.resources import Node
from phalanx.spec.status import JobAdmission
from phalanx.worker.agent import Worker, WorkerOptions
from phalanx.worker.client import PlaneClient


def wanted(job: str, attempt: int, node: str) -> DesiredAttempt:
    return DesiredAttempt(
        job=job, attempt=attempt, epoch=attempt,
        spec={"name": job, "podSets": [{"name": "main", "replicas": 1,
                                        "resources": {"cpu": "1"}}]},
        admission=JobAdmission.model_validate({
            "clusterQueue": "default", "podSets": [{
                "name": "main", "count": 1, "flavors": {"cpu": "default"},
                "nodes": [node]}]}))


def desired(version: int, *attempts: DesiredAttempt) -> DesiredState:
    return DesiredState(version=version, attempts=list(attempts))


def make_worker(tmp_path: Path) -> tuple[Worker, SimulatedPlane]:
    plane = SimulatedPlane([Node(name="n1", allocatable={"cpu": "4"})])
    key = tmp_path / "key"
    key.write_text("unused")  # (converge never calls the control plane)
    client = PlaneClient("http://127.0.0.1:9", "east", key)
    return Worker(plane, client, tmp_path, WorkerOptions(compute="simulated")), plane


def refusals(worker: Worker) -> list[tuple[str, int]]:
    taken, worker._refusals = worker._refusals, []
    return [(r.job, r.attempt) for r in taken]


def test_a_refused_attempt_is_not_launched_when_its_node_comes_back(tmp_path: Path) -> None:
    # The refusal has not reached the control plane yet; a blip makes the worker take the
    # desired state whole, and the node is back: it refuses again, and starts nothing.
    worker, plane = make_worker(tmp_path)
    worker.converge(desired(1, wanted("a", 3, "n2")))
    assert refusals(worker) == [("a", 3)]
    plane.upsert_node(Node(name="n2", allocatable={"cpu": "4"}))
    worker.converge(desired(1, wanted("a", 3, "n2")), fresh=True)
    assert refusals(worker) == [("a", 3)]
    assert plane.observe() == []
    worker.converge(desired(2, wanted("a", 3, "n2")))  # not fresh: nothing sent again
    assert refusals(worker) == []
    # Once the control plane took it (it lists the attempt no more), the worker forgets the
    # refusal: listed again (a control plane that lost its record of it), it starts.
    worker.converge(desired(3))
    worker.converge(desired(1, wanted("a", 3, "n2")), fresh=True)
    assert refusals(worker) == []
    assert [(p.ref.job, p.ref.attempt) for p in plane.observe()] == [("a", 3)]


def test_a_launched_attempt_is_never_launched_again(tmp_path: Path) -> None:
    worker, plane = make_worker(tmp_path)
    worker.converge(desired(1, wanted("b", 1, "n1")))
    assert len(plane.observe()) == 1
    plane.forget("b", 1)  # its pods are gone, though the control plane still lists it
    worker.converge(desired(1, wanted("b", 1, "n1")), fresh=True)
    assert plane.observe() == []
    assert refusals(worker) == []
