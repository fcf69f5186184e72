"""What a job may ask for is bounded at submit, and the loop survives a job it cannot handle.

A job the cluster could never run is refused with the field at fault and the fix; one that
got in anyway (a record stored by an older version, say) fails on its own and the loop goes
on scheduling everything else.
"""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest

from phalanx.compute.local.inventory import machine_node
from phalanx.compute.simulated import SimulatedPlane
from phalanx.control import Controller
from phalanx.errors import NotFound, SpecError
from phalanx.spec import JobSpec, Node
from phalanx.spec.base import validate
from phalanx.spec.quantity import MILLI
from phalanx.spec.status import JobStatus
from phalanx.store import Store

SIM = {"PHALANX_SIM_DURATION": "50ms"}


def spec(name: str, *pod_sets: dict[str, Any]) -> JobSpec:
    return validate(JobSpec, {"name": name, "podSets": [
        {"name": f"p{i}", "command": ["true"], "env": SIM, **ps} for i, ps in enumerate(pod_sets)
    ]})


def controller(tmp_path: Path, nodes: list[Node]) -> Controller:
    return Controller(Store(f"sqlite:///{tmp_path / 's.db'}"), SimulatedPlane(nodes),
                      tick_seconds=0.01)


# --------------------------------------------------------------------------- finding 1
def test_replicas_have_a_hard_bound_in_the_schema() -> None:
    with pytest.raises(SpecError) as caught:
        spec("huge", {"replicas": 1_000_000_000})
    assert caught.value.field == "podSets[0].replicas"
    assert "100000" in caught.value.message and caught.value.fix


def test_the_machine_node_offers_a_pod_cap() -> None:
    node = machine_node("box", [])
    assert node.allocatable["pods"] == 110 * MILLI
    assert machine_node("box", [], max_pods=16).allocatable["pods"] == 16 * MILLI


def test_simulated_nodes_get_a_pod_cap_unless_they_declare_one() -> None:
    plane = SimulatedPlane([Node(name="a", allocatable={"cpu": 1}),
                            Node(name="b", allocatable={"cpu": 1, "pods": 7})])
    pods = {n.name: n.allocatable["pods"] for n in plane.inventory()}
    assert pods == {"a": 110 * MILLI, "b": 7 * MILLI}


def test_a_job_with_more_pods_than_the_cluster_holds_is_refused(tmp_path: Path) -> None:
    ctl = controller(tmp_path, [Node(name="a", allocatable={"cpu": 4}),
                                Node(name="b", allocatable={"cpu": 4})])
    with pytest.raises(SpecError) as caught:  # 150 + 100 pods, 220 pod slots
        ctl.submit(spec("many", {"replicas": 150}, {"replicas": 100}))
    assert caught.value.field == "podSets" and "250 pods" in caught.value.message
    assert caught.value.fix
    with pytest.raises(NotFound):  # nothing was stored
        ctl.get("many")
    assert ctl.submit(spec("fits", {"replicas": 120}, {"replicas": 100})).name == "fits"


LOOP_SURVIVES = """
import resource, sys, time
resource.setrlimit(resource.RLIMIT_AS, (3 * 2**30, 3 * 2**30))
from phalanx.compute.simulated import SimulatedPlane
from phalanx.control import Controller
from phalanx.spec import JobSpec, Node
from phalanx.spec.resources import PodSet
from phalanx.spec.status import JobEvent, JobRecord
from phalanx.store import Store

# Room for any number of pods: placing the bad job's billion would exhaust the memory.
plane = SimulatedPlane([Node(name="n0", allocatable={"cpu": 4, "memory": 2**34,
                                                     "pods": 2 * 10**9})])
ctl = Controller(Store(f"sqlite:///{sys.argv[1]}/s.db"), plane, tick_seconds=0.01)
good = JobSpec.model_validate({"name": "good", "podSets": [
    {"command": ["true"], "resources": {"cpu": 1}, "env": {"PHALANX_SIM_DURATION": "10ms"}}]})
# A record no submit accepts today, as an older version could have stored it: queued
# before the good job, so a cycle meets it first.
bad = good.model_copy(update={"name": "bad", "pod_sets": [PodSet.model_construct(
    **{**good.pod_sets[0].__dict__, "replicas": 1_000_000_000, "resources": {}})]})
record = JobRecord(name="bad", spec=bad, queue="default", cluster_queue="default",
                   priority=0, submitted_at=1.0, queued_at=1.0)
ctl.store.create_job(record, JobEvent(job="bad", time=1.0, reason="Submitted", message="-"))
with ctl.state.lock:
    ctl.state.jobs["bad"] = record
    ctl.state.queue(record)
ctl.submit(good)
ctl.start()
deadline = time.monotonic() + 30
while ctl.get("good").status.value != "Succeeded" and time.monotonic() < deadline:
    time.sleep(0.02)
ctl.stop()
print(ctl.get("good").status.value, ctl.get("bad").status.value, ctl.get("bad").message)
"""


def test_the_loop_fails_a_job_it_cannot_handle_and_goes_on(tmp_path: Path) -> None:
    run = subprocess.run([sys.executable, "-c", textwrap.dedent(LOOP_SURVIVES), str(tmp_path)],
                         capture_output=True, text=True, timeout=120)
    assert run.returncode == 0, run.stderr[-3000:]
    good, bad, message = run.stdout.strip().split(" ", 2)
    assert good == JobStatus.SUCCEEDED.value
    assert bad == JobStatus.FAILED.value and "replicas" in message, message


def test_the_local_plane_takes_its_pod_cap_from_up(tmp_path: Path) -> None:
    from phalanx.server.main import make_plane

    plane = make_plane("local", tmp_path, max_pods=16)
    try:
        assert plane.inventory()[0].allocatable["pods"] == 16 * MILLI
    finally:
        plane.close()
    with pytest.raises(SpecError) as caught:
        make_plane("simulated", tmp_path, nodes_file=tmp_path / "nodes.yaml", max_pods=16)
    assert caught.value.field == "--max-pods" and caught.value.fix


# --------------------------------------------------------------------------- finding 6
def test_pod_sets_that_only_fit_one_at_a_time_are_refused(tmp_path: Path) -> None:
    ctl = controller(tmp_path, [Node(name="a", allocatable={"cpu": 2, "memory": 2**30})])
    with pytest.raises(SpecError) as caught:
        ctl.submit(spec("three", *[{"resources": {"cpu": 1}}] * 3))
    error = caught.value
    assert error.field == "podSets"
    assert "need 3 cpu" in error.message and "never get more than 2" in error.message
    assert error.fix and "smaller" in error.fix
    with pytest.raises(NotFound):
        ctl.get("three")
    assert ctl.submit(spec("two", *[{"resources": {"cpu": 1}}] * 2)).name == "two"


def test_the_local_plane_refuses_a_pod_set_without_a_command(tmp_path: Path) -> None:
    from phalanx.compute.local import LocalPlane

    plane = LocalPlane(tmp_path, gpus=[])
    try:
        with pytest.raises(SpecError) as caught:
            plane.check_job(validate(JobSpec, {"name": "bare", "podSets": [{}]}))
        assert caught.value.field == "podSets[0].command" and caught.value.fix
    finally:
        plane.close()
