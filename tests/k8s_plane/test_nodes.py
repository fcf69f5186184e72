"""Node inventory: allocatable less foreign pods, labels, taints, health, watch and relist."""

from __future__ import annotations

from phalanx.spec.quantity import parse_quantity
from phalanx.spec.resources import GPU, NodeHealth
from tests.k8s_plane.conftest import RUNS, PlaneFactory, wait_until
from tests.k8s_plane.fake_apiserver import FakeAPIServer


def _foreign_pod(name: str, node: str, ns: str = "default", *, cpu: str = "1",
                 memory: str = "1Gi", gpus: int = 0, phase: str = "Running",
                 labels: dict[str, str] | None = None) -> dict:
    requests = {"cpu": cpu, "memory": memory}
    if gpus:
        requests[GPU] = str(gpus)
    return {
        "metadata": {"name": name, "namespace": ns, "labels": labels or {}},
        "spec": {"nodeName": node, "containers": [
            {"name": "c", "image": "x", "resources": {"requests": requests, "limits": requests}},
        ], "initContainers": [
            {"name": "init", "image": "x", "resources": {"requests": {"cpu": "500m"}}},
        ]},
        "status": {"phase": phase},
    }


def _by_name(plane) -> dict:
    return {n.name: n for n in plane.inventory()}


def test_nodes_with_foreign_usage_subtracted(api: FakeAPIServer, make_plane: PlaneFactory) -> None:
    api.add_node("gpu-1", cpu="32", memory="256Gi", gpus=8, labels={"gpu-pool": "a100"},
                 taints=[{"key": "nvidia.com/gpu", "value": "present", "effect": "NoSchedule"}])
    api.add_node("cpu-1", cpu="8", memory="32Gi", unschedulable=True)
    api.add_node("sick", ready=False)
    api.add("pods", _foreign_pod("other-team", "gpu-1", cpu="4", memory="16Gi", gpus=2))
    api.add("pods", _foreign_pod("finished", "gpu-1", cpu="4", phase="Succeeded"))
    api.add("pods", _foreign_pod("unbound", "", cpu="4"))
    # a Phalanx pod in the runs namespace is the scheduler's own business, not foreign
    api.add("pods", _foreign_pod("ours", "gpu-1", RUNS, cpu="4",
                                 labels={"app.kubernetes.io/managed-by": "phalanx"}))
    plane = make_plane()
    nodes = _by_name(plane)
    assert sorted(nodes) == ["cpu-1", "gpu-1", "sick"]
    gpu = nodes["gpu-1"]
    assert gpu.allocatable["cpu"] == parse_quantity("28")
    assert gpu.allocatable["memory"] == parse_quantity("240Gi")
    assert gpu.allocatable[GPU] == parse_quantity("6")
    assert gpu.allocatable["pods"] == parse_quantity("109")
    assert "ephemeral-storage" not in gpu.allocatable
    assert gpu.labels["gpu-pool"] == "a100"
    assert [(t.key, t.value, t.effect) for t in gpu.taints] == [
        ("nvidia.com/gpu", "present", "NoSchedule")]
    assert gpu.health is NodeHealth.HEALTHY
    assert nodes["cpu-1"].unschedulable
    assert nodes["sick"].health is NodeHealth.UNHEALTHY
    assert "KubeletNotReady" in nodes["sick"].health_reasons[0]

    # Watches: a foreign pod ends, another starts, a node goes away, one arrives.
    before = plane.inventory_generation
    api.update("pods", "other-team", {"status": {"phase": "Succeeded"}}, "default")
    api.add("pods", _foreign_pod("late", "cpu-1", cpu="2"))
    api.remove("nodes", "sick")
    api.add_node("gpu-2", gpus=4)
    wait_until(lambda: "gpu-2" in _by_name(plane) and "sick" not in _by_name(plane)
               and _by_name(plane)["gpu-1"].allocatable[GPU] == parse_quantity("8")
               and _by_name(plane)["cpu-1"].allocatable["cpu"] == parse_quantity("6"),
               what="the watches to deliver")
    assert plane.inventory_generation > before


def test_relists_after_410_and_resumes(api: FakeAPIServer, make_plane: PlaneFactory) -> None:
    api.add_node("n1", cpu="4")
    plane = make_plane()
    lists = plane.inventory_source.nodes.lists
    # The watch is cut, changes happen, the history is compacted: the informer's version
    # is gone when it comes back, so it gets 410 Gone and lists again.
    api.set_hold_watches(True)
    api.add_node("n2", cpu="4")
    api.compact()
    api.set_hold_watches(False)
    wait_until(lambda: "n2" in _by_name(plane), what="n2 after a relist")
    wait_until(lambda: plane.inventory_source.nodes.lists > lists, what="a relist")
    # A 410 answered as a status on the next watch request: relist as well.
    api.inject(r"^/api/v1/nodes$", 410, watch=True)
    api.add_node("n3", cpu="4")
    wait_until(lambda: "n3" in _by_name(plane), what="n3")
    api.update("nodes", "n1", {"spec": {"unschedulable": True}})
    wait_until(lambda: _by_name(plane)["n1"].unschedulable, what="cordon seen")


def test_watch_errors_are_retried(api: FakeAPIServer, make_plane: PlaneFactory) -> None:
    api.add_node("n1", cpu="4")
    api.inject(r"^/api/v1/nodes$", 500, count=2, watch=False)
    api.inject(r"^/api/v1/nodes$", 429, count=1, watch=False, retry_after="0")
    plane = make_plane()
    assert "n1" in _by_name(plane)
    assert api.count("GET", "/api/v1/nodes", 500) == 2
    assert api.count("GET", "/api/v1/nodes", 429) == 1
