"""The simulated compute plane, driven by an injected clock."""

from __future__ import annotations

import threading
from pathlib import Path

import pytest

from phalanx.compute.base import PodPhase
from phalanx.compute.simulated import SimulatedPlane, load_nodes, parse_nodes
from phalanx.compute.simulated.plane import DEFAULT_MAX_PODS, with_pod_cap
from phalanx.errors import SpecError
from phalanx.scheduler.types import Admission, PodSetAssignment
from phalanx.spec.quantity import MILLI
from phalanx.spec.resources import JobSpec, Node
from phalanx.store import LogStore

NODES = [
    Node(name="a", allocatable={"cpu": 8}, labels={"rack": "r1"}),
    Node(name="b", allocatable={"cpu": 8}, labels={"rack": "r2"}),
]


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def job(name: str, replicas: int = 1, /, **env: str) -> JobSpec:
    return JobSpec.model_validate({
        "name": name, "podSets": [{"name": "w", "replicas": replicas, "env": env}],
    })


def admit(spec: JobSpec, *nodes: str) -> Admission:
    placed = nodes or ("a",) * spec.pod_sets[0].replicas
    return Admission(spec.name, "cq", (PodSetAssignment("w", len(placed), {}, tuple(placed)),))


@pytest.fixture
def clock() -> Clock:
    return Clock()


@pytest.fixture
def sim(clock: Clock, tmp_path: Path) -> SimulatedPlane:
    return SimulatedPlane(NODES, clock=clock, logs_root=tmp_path / "logs")


def phases(plane: SimulatedPlane, name: str | None = None) -> list[str]:
    pods = sorted(plane.observe(), key=lambda p: (p.ref.job, p.ref.attempt, p.ref.rank))
    return [p.phase.value for p in pods if name is None or p.ref.job == name]


def test_pods_run_for_their_duration_then_succeed(sim: SimulatedPlane, clock: Clock) -> None:
    spec = job("j", 2, PHALANX_SIM_DURATION="250ms")
    sim.launch(spec, 1, admit(spec, "a", "b"))
    clock.now += 0.125  # steps exact in binary, so "on time" is exactly on time
    assert phases(sim) == ["Running", "Running"]
    clock.now += 0.125
    pods = sorted(sim.observe(), key=lambda p: p.ref.rank)
    assert [p.phase for p in pods] == [PodPhase.SUCCEEDED] * 2
    assert [p.node for p in pods] == ["a", "b"]
    assert [p.ref.name for p in pods] == ["j-w-0", "j-w-1"]
    for pod in pods:
        assert pod.exit_code == 0 and pod.reason == "Completed" and pod.failure is None
        assert pod.started_at is not None and pod.finished_at is not None
        assert pod.finished_at - pod.started_at == pytest.approx(0.25)
    clock.now += 10
    assert phases(sim) == ["Succeeded", "Succeeded"]  # done is final


def test_exit_code_fails_the_pod_as_a_user_error(sim: SimulatedPlane, clock: Clock) -> None:
    spec = job("bad", PHALANX_SIM_DURATION="1s", PHALANX_SIM_EXIT_CODE="3")
    sim.launch(spec, 1, admit(spec))
    clock.now += 1
    [pod] = sim.observe()
    assert pod.phase is PodPhase.FAILED
    assert (pod.exit_code, pod.reason, pod.failure) == (3, "Error", "user")


def test_launch_is_idempotent(sim: SimulatedPlane, clock: Clock) -> None:
    spec = job("j", PHALANX_SIM_DURATION="2s")
    sim.launch(spec, 1, admit(spec))
    clock.now += 1.5
    sim.launch(spec, 1, admit(spec))  # a restarted loop re-issuing it: the pod keeps its start
    assert len(sim.observe()) == 1
    clock.now += 0.5
    assert phases(sim) == ["Succeeded"]


def test_observe_reports_every_attempt_until_forgotten(sim: SimulatedPlane, clock: Clock) -> None:
    spec = job("j", PHALANX_SIM_DURATION="1s")
    sim.launch(spec, 1, admit(spec))
    clock.now += 1
    sim.launch(spec, 2, admit(spec, "b"))
    assert sorted((p.ref.attempt, p.phase.value) for p in sim.observe()) == [
        (1, "Succeeded"), (2, "Running"),
    ]
    sim.forget("j", 1)
    assert [(p.ref.attempt, p.node) for p in sim.observe()] == [(2, "b")]
    sim.forget("j", 1)  # forgetting twice is harmless
    assert len(sim.observe()) == 1


def test_pod_without_duration_runs_until_terminated(sim: SimulatedPlane, clock: Clock) -> None:
    spec = job("server", 2)
    sim.launch(spec, 1, admit(spec))
    clock.now += 3600
    assert phases(sim) == ["Running", "Running"]
    sim.terminate("server", 1, grace_seconds=30)
    pods = sim.observe()
    assert [p.phase for p in pods] == [PodPhase.FAILED] * 2
    # Stopped on request: nobody's failure, as on the local plane.
    assert all(p.reason == "Terminated" and p.failure is None for p in pods)
    assert all(p.finished_at is not None and p.started_at is not None
               and p.finished_at - p.started_at == pytest.approx(3600) for p in pods)


def test_terminate_keeps_the_outcome_of_pods_already_done(
    sim: SimulatedPlane, clock: Clock
) -> None:
    spec = job("j", PHALANX_SIM_DURATION="1s")
    sim.launch(spec, 1, admit(spec))
    clock.now += 2  # ended before anyone looked
    sim.terminate("j", 1)
    assert phases(sim) == ["Succeeded"]
    sim.terminate("nothing", 7)  # an attempt the plane never saw: a no-op


def test_forget_stops_a_running_attempt(sim: SimulatedPlane, tmp_path: Path) -> None:
    spec = job("j")
    sim.launch(spec, 1, admit(spec))
    sim.forget("j", 1)
    assert sim.observe() == []
    sim.flush_logs()
    log = LogStore(tmp_path / "logs").read("j", "j-w-0")[0].decode()
    assert "terminated" in log


def test_pods_write_a_start_and_an_end_line(sim: SimulatedPlane, clock: Clock,
                                             tmp_path: Path) -> None:
    spec = job("j", 2, PHALANX_SIM_DURATION="500ms", PHALANX_SIM_EXIT_CODE="4")
    sim.launch(spec, 1, admit(spec, "a", "b"))
    sim.flush_logs()
    logs = LogStore(tmp_path / "logs")
    assert logs.pods("j") == ["j-w-0", "j-w-1"]
    first = logs.read("j", "j-w-1")[0].decode().splitlines()
    assert len(first) == 1 and "started on node b" in first[0]
    clock.now += 0.5
    sim.observe()
    sim.observe()  # the end is logged once
    sim.flush_logs()
    lines = logs.read("j", "j-w-1")[0].decode().splitlines()
    assert len(lines) == 2 and "exited with code 4 after 0.500s" in lines[1]


def test_without_logs_root_nothing_is_written(clock: Clock, tmp_path: Path) -> None:
    plane = SimulatedPlane(NODES, clock=clock)
    spec = job("j", PHALANX_SIM_DURATION="1s")
    plane.launch(spec, 1, admit(spec))
    clock.now += 1
    assert phases(plane) == ["Succeeded"]
    assert not any(tmp_path.iterdir())


@pytest.mark.parametrize(("env", "field"), [
    ({"PHALANX_SIM_DURATION": "soon"}, "podSets[0].env.PHALANX_SIM_DURATION"),
    ({"PHALANX_SIM_DURATION": "-1"}, "podSets[0].env.PHALANX_SIM_DURATION"),
    ({"PHALANX_SIM_EXIT_CODE": "x"}, "podSets[0].env.PHALANX_SIM_EXIT_CODE"),
    ({"PHALANX_SIM_EXIT_CODE": "256"}, "podSets[0].env.PHALANX_SIM_EXIT_CODE"),
])
def test_bad_env_starts_nothing(sim: SimulatedPlane, env: dict[str, str], field: str) -> None:
    spec = job("j", **env)
    with pytest.raises(SpecError) as caught:
        sim.launch(spec, 1, admit(spec))
    assert caught.value.field == field and caught.value.fix
    assert sim.observe() == []


def test_placement_on_an_unknown_node_starts_nothing(sim: SimulatedPlane) -> None:
    spec = job("j", 2)
    with pytest.raises(SpecError) as caught:
        sim.launch(spec, 1, admit(spec, "a", "nowhere"))
    assert caught.value.field == "admission.podSets.nodes" and "nowhere" in caught.value.message
    assert sim.observe() == []


def test_inventory_is_the_declared_nodes(sim: SimulatedPlane) -> None:
    nodes = sim.inventory()
    # A node that declares no pod cap gets the default one (as a kubelet's --max-pods).
    assert nodes == [with_pod_cap(n) for n in NODES]
    assert all(n.allocatable["pods"] == DEFAULT_MAX_PODS * MILLI for n in nodes)
    nodes[0].labels["changed"] = "yes"
    assert "changed" not in sim.inventory()[0].labels


def test_subscriber_is_called_when_a_pod_ends() -> None:
    plane = SimulatedPlane(NODES)  # the real clock: the plane's timer thread waits on it
    ended = threading.Event()
    try:
        plane.subscribe(ended.set)
        spec = job("j", PHALANX_SIM_DURATION="50ms")
        plane.launch(spec, 1, admit(spec))
        assert ended.wait(10), "the subscriber was never called"
        assert phases(plane) == ["Succeeded"]
    finally:
        plane.close()


# --------------------------------------------------------------------------- nodes files
def write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "nodes.yaml"
    path.write_text(text)
    return path


@pytest.mark.parametrize("text", [
    "- {name: a, allocatable: {cpu: 4}}\n- {name: b, allocatable: {cpu: 2}}\n",
    "nodes:\n  - {name: a, allocatable: {cpu: 4}}\n  - {name: b, allocatable: {cpu: 2}}\n",
    "kind: Node\nname: a\nallocatable: {cpu: 4}\n---\nname: b\nallocatable: {cpu: 2}\n",
])
def test_nodes_file_shapes(tmp_path: Path, text: str) -> None:
    plane = SimulatedPlane.from_file(write(tmp_path, text))
    assert [(n.name, n.allocatable["cpu"]) for n in plane.inventory()] == [
        ("a", 4000), ("b", 2000),
    ]


def test_count_and_rack_size_expand_an_entry() -> None:
    nodes = parse_nodes("- {name: cpu, count: 12, rackSize: 5, allocatable: {cpu: 20}}\n")
    assert [n.name for n in nodes][:2] == ["cpu-00", "cpu-01"] and len(nodes) == 12
    assert [n.labels["rack"] for n in nodes[4:6]] == ["cpu-rack-0", "cpu-rack-1"]


@pytest.mark.parametrize(("text", "field", "words"), [
    ("- {name: a, allocatable: {cpu: lots}}\n", "nodes.yaml[0].allocatable.cpu", "quantity"),
    ("- {name: a, cpus: 4}\n", "nodes.yaml[0].cpus", "unknown field"),
    ("- {allocatable: {cpu: 4}}\n", "nodes.yaml[0].name", "required"),
    ("- {name: a}\n- {name: a}\n", "nodes.yaml", "twice"),
    ("[]\n", "nodes.yaml", "no nodes"),
    ("- [a, b]\n", "nodes.yaml[0]", "not a mapping"),
    ("nodes: {a: 1}\n", "nodes.yaml.nodes", "list"),
    ("- {name: a, count: 0}\n", "nodes.yaml[0].count", "whole number"),
    ("- {name: a\n", "nodes.yaml", "not valid YAML"),
])
def test_bad_nodes_file_names_the_field(
    tmp_path: Path, text: str, field: str, words: str
) -> None:
    path = write(tmp_path, text)
    with pytest.raises(SpecError) as caught:
        load_nodes(path)
    assert caught.value.field == str(tmp_path / field)
    assert words in caught.value.message and caught.value.fix


def test_missing_nodes_file(tmp_path: Path) -> None:
    with pytest.raises(SpecError) as caught:
        SimulatedPlane.from_file(tmp_path / "absent.yaml")
    assert caught.value.field == str(tmp_path / "absent.yaml")
    assert caught.value.message == "no such file"


def test_no_nodes_at_all() -> None:
    with pytest.raises(SpecError) as caught:
        SimulatedPlane([])
    assert caught.value.field == "nodes"
