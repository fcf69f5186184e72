"""Every plane offers the same optional capabilities, declared once in ``compute/base.py``,
and reports node changes the same way: the control loop sees them at its next step."""

from __future__ import annotations

from pathlib import Path

import pytest

from phalanx.compute.base import ComputePlane, PodCredential, PodPhase, PodState
from phalanx.compute.local import LocalPlane
from phalanx.compute.local.gpus import GPUInfo
from phalanx.compute.simulated import SimulatedPlane
from phalanx.control import Controller
from phalanx.scheduler.types import Admission
from phalanx.spec import JobSpec, Node
from phalanx.spec.resources import NodeHealth
from phalanx.spec.status import JobStatus
from phalanx.store import Store

NODES = [Node(name=f"n{i}", allocatable={"cpu": 4, "memory": 2 ** 34}) for i in range(2)]


class Inert(ComputePlane):
    """A plane with only what every plane must have: it runs nothing."""

    name = "inert"

    def inventory(self) -> list[Node]:
        return list(NODES)

    def launch(self, job: JobSpec, attempt: int, admission: Admission, *,
               credential: PodCredential | None = None) -> None:
        return None

    def observe(self) -> list[PodState]:
        return []

    def terminate(self, job: str, attempt: int, grace_seconds: float = 10.0) -> None:
        return None

    def forget(self, job: str, attempt: int) -> None:
        return None

    def close(self) -> None:
        return None


def test_a_plane_must_implement_every_required_verb() -> None:
    class Partial(ComputePlane):
        name = "partial"

        def inventory(self) -> list[Node]:
            return []

    with pytest.raises(TypeError, match="abstract"):
        Partial()  # type: ignore[abstract]


def test_optional_capabilities_default_to_not_offered(tmp_path: Path) -> None:
    plane = Inert()
    assert plane.inventory_generation == 0
    assert plane.pod_events("any") == []
    assert plane.flush_logs() is None
    woken: list[int] = []
    plane.subscribe(lambda: woken.append(1))
    plane._nodes_changed()
    assert (plane.inventory_generation, woken) == (1, [1])
    # The controller drives such a plane with no probing: a step admits a job on it.
    controller = Controller(Store(f"sqlite:///{tmp_path / 's.db'}"), plane)
    controller.submit(JobSpec.model_validate({
        "name": "j", "podSets": [{"resources": {"cpu": "1"}, "command": ["x"]}]}))
    assert [a.job for a in controller.step().admissions] == ["j"]


def job(name: str, cpu: str = "4", **env: str) -> JobSpec:
    return JobSpec.model_validate({
        "name": name, "restart": {"backoff": 0},
        "podSets": [{"resources": {"cpu": cpu}, "command": ["x"], "env": env}],
    })


def test_simulated_node_changes_reach_the_scheduler(tmp_path: Path) -> None:
    plane = SimulatedPlane(NODES, logs_root=tmp_path / "logs")
    woken: list[int] = []
    plane.subscribe(lambda: woken.append(1))
    controller = Controller(Store(f"sqlite:///{tmp_path / 's.db'}"), plane)
    before = plane.inventory_generation
    for node in NODES:
        plane.upsert_node(node.model_copy(update={"unschedulable": True}))
    assert plane.inventory_generation == before + 2 and len(woken) >= 2
    plane.upsert_node(NODES[0].model_copy(update={"unschedulable": True}))  # no change
    assert plane.inventory_generation == before + 2
    controller.submit(job("waits"))
    assert controller.step().admissions == []
    reason = controller.get("waits")
    assert reason.status is JobStatus.QUEUED and reason.pending_code == "NoNodeFits"
    plane.upsert_node(NODES[1])  # uncordoned
    assert [a.job for a in controller.step().admissions] == ["waits"]


def test_a_simulated_node_lost_fails_its_pods_as_a_system_failure(tmp_path: Path) -> None:
    plane = SimulatedPlane(NODES, logs_root=tmp_path / "logs")
    controller = Controller(Store(f"sqlite:///{tmp_path / 's.db'}"), plane)
    controller.submit(job("long"))
    (admission,) = controller.step().admissions
    node = admission.pod_sets[0].nodes[0]
    controller.step()
    assert controller.get("long").status is JobStatus.RUNNING
    plane.remove_node(node)
    (pod,) = [p for p in plane.observe() if p.ref.job == "long"]
    assert (pod.phase, pod.reason, pod.failure) == (PodPhase.FAILED, "NodeLost", "system")
    controller.step()  # the failure is charged to the system budget; queued again at once
    controller.step()  # and admitted on the node that is left
    record = controller.get("long")
    assert record.system_restarts == 1 and record.attempt == 2
    assert record.admission is not None
    assert {n for p in record.admission.pod_sets for n in p.nodes} == {
        n.name for n in NODES if n.name != node}
    assert node not in {n.name for n in controller.state.nodes}


def test_local_node_state_reaches_the_scheduler(tmp_path: Path) -> None:
    plane = LocalPlane(tmp_path / "home", node_name="box", gpus=[])
    controller = Controller(Store(f"sqlite:///{tmp_path / 's.db'}"), plane)
    generation = plane.inventory_generation
    plane.set_node_state(unschedulable=True)
    plane.set_node_state(health=NodeHealth.UNHEALTHY, reasons=["xid 79 on GPU 0"])
    assert plane.inventory_generation == generation + 2
    controller.step()
    (node,) = controller.state.nodes
    assert node.unschedulable and node.health is NodeHealth.UNHEALTHY
    assert node.health_reasons == ["xid 79 on GPU 0"]


def test_local_plane_offers_the_gpus_it_has_now(tmp_path: Path) -> None:
    gpus = [GPUInfo(i, f"GPU-{i}", "Fake", 2**30) for i in range(2)]
    plane = LocalPlane(tmp_path / "home", node_name="box", gpus=gpus)
    assert plane.inventory()[0].allocatable["nvidia.com/gpu"] == 2000
    plane.set_node_state(unschedulable=True)
    plane.set_gpus(gpus[:1])
    (node,) = plane.inventory()
    assert node.allocatable["nvidia.com/gpu"] == 1000 and node.unschedulable


def test_the_local_plane_refuses_a_pod_set_with_nothing_to_run_at_submit(tmp_path: Path) -> None:
    from phalanx.errors import SpecError

    plane = LocalPlane(tmp_path / "home", node_name="box", gpus=[])
    controller = Controller(Store(f"sqlite:///{tmp_path / 's.db'}"), plane)
    spec = JobSpec.model_validate({"name": "empty", "podSets": [
        {"name": "a", "command": ["true"]}, {"name": "b"}]})
    with pytest.raises(SpecError) as err:
        controller.submit(spec)
    assert err.value.field == "podSets[1].command"
    assert err.value.fix is not None and '["python", "train.py"]' in err.value.fix
    assert controller.store.list_jobs() == []
