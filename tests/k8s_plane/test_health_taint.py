"""The control plane taints nodes whose doctor reports ERR, over the API mock."""

from __future__ import annotations

import logging
from typing import Any

import pytest

from phalanx.compute.kubernetes.health import HEALTH_LABEL
from phalanx.compute.kubernetes.taint import TAINT_KEY
from phalanx.spec.resources import NodeHealth
from tests.k8s_plane.conftest import PlaneFactory, wait_until
from tests.k8s_plane.fake_apiserver import FakeAPIServer
from tests.k8s_plane.helpers import admit, gang, pods

GPU_TAINT = {"key": "nvidia.com/gpu", "value": "present", "effect": "NoSchedule"}
HEALTH_TAINT = {"key": TAINT_KEY, "value": "ERR", "effect": "NoSchedule"}


def _taints(api: FakeAPIServer, node: str) -> list[dict[str, Any]]:
    found = api.get("nodes", node)
    assert found is not None
    return list((found.get("spec") or {}).get("taints") or [])


def _report(api: FakeAPIServer, node: str, status: str) -> None:
    api.update("nodes", node, {"metadata": {"labels": {HEALTH_LABEL: status}}})


def _seen(plane: Any, node: str, status: str) -> None:
    wait_until(lambda: any(n.name == node and (n.health is NodeHealth.UNHEALTHY) == (status == "ERR")
                           for n in plane.inventory()), what=f"{node} {status}")


def test_err_adds_the_taint_and_pass_removes_it(
    api: FakeAPIServer, make_plane: PlaneFactory
) -> None:
    api.add_node("n1", taints=[GPU_TAINT])
    api.add_node("n2")
    plane = make_plane(node_writes=True)
    plane.observe()
    assert api.count("PATCH", "/api/v1/nodes/n1") == 0  # healthy: nothing to write

    _report(api, "n1", "ERR")
    _seen(plane, "n1", "ERR")
    plane.observe()
    plane.observe()  # before or after the watch brings the patched node: no second patch
    assert _taints(api, "n1") == [GPU_TAINT, HEALTH_TAINT]
    assert api.count("PATCH", "/api/v1/nodes/n1") == 1
    assert _taints(api, "n2") == []
    # The scheduler refuses n1 for its health, not for its own taint a second time.
    n1 = next(n for n in plane.inventory() if n.name == "n1")
    assert [t.key for t in n1.taints] == ["nvidia.com/gpu"]

    wait_until(lambda: any(t.get("key") == TAINT_KEY
                           for o in plane.inventory_source.node_objects()
                           for t in (o.get("spec") or {}).get("taints") or []),
               what="taint seen")
    patches = api.count("PATCH", "/api/v1/nodes/n1")
    plane.observe()
    plane.observe()
    assert api.count("PATCH", "/api/v1/nodes/n1") == patches  # idempotent

    _report(api, "n1", "PASS")
    _seen(plane, "n1", "PASS")
    plane.observe()
    assert _taints(api, "n1") == [GPU_TAINT]


def test_a_restarted_plane_removes_a_taint_left_behind(
    api: FakeAPIServer, make_plane: PlaneFactory
) -> None:
    api.add_node("n1", taints=[HEALTH_TAINT, GPU_TAINT], labels={HEALTH_LABEL: "PASS"})
    plane = make_plane(node_writes=True)
    plane.observe()
    assert _taints(api, "n1") == [GPU_TAINT]


def test_without_node_writes_nothing_is_written_and_why_is_logged_once(
    api: FakeAPIServer, make_plane: PlaneFactory, caplog: pytest.LogCaptureFixture
) -> None:
    api.add_node("n1", labels={HEALTH_LABEL: "ERR"})
    api.add_node("n2", labels={HEALTH_LABEL: "ERR"})
    plane = make_plane()
    with caplog.at_level(logging.WARNING, logger="phalanx.compute.kubernetes"):
        plane.observe()
        plane.observe()
    assert api.count("PATCH", "/api/v1/nodes/.*") == 0
    assert _taints(api, "n1") == []
    told = [r for r in caplog.records if "allowNodeWrites" in r.getMessage()]
    assert len(told) == 1


def test_a_refused_patch_stops_the_writes(
    api: FakeAPIServer, make_plane: PlaneFactory, caplog: pytest.LogCaptureFixture
) -> None:
    api.add_node("n1", labels={HEALTH_LABEL: "ERR"})
    api.inject(r"^/api/v1/nodes/n1$", 403, method="PATCH")
    plane = make_plane(node_writes=True)
    with caplog.at_level(logging.WARNING, logger="phalanx.compute.kubernetes"):
        plane.observe()
        plane.observe()
    assert api.count("PATCH", "/api/v1/nodes/n1") == 1
    assert _taints(api, "n1") == []
    assert len([r for r in caplog.records if TAINT_KEY in r.getMessage()]) == 1


def test_a_pod_placed_while_the_taint_lingers_tolerates_it(
    api: FakeAPIServer, make_plane: PlaneFactory
) -> None:
    api.add_node("n1", taints=[HEALTH_TAINT], labels={HEALTH_LABEL: "PASS"})
    plane = make_plane()  # may not write nodes: the taint stays
    wait_until(lambda: plane.inventory_source.node_names() == {"n1"}, what="n1")
    assert [t.key for t in plane.inventory_source.node_taints("n1")] == [TAINT_KEY]
    job = gang("ddp", replicas=1)
    plane.launch(job, 1, admit(job, ["n1"]))
    placed = wait_until(lambda: pods(api, "ddp"), what="pod")
    assert HEALTH_TAINT | {"operator": "Equal"} in placed[0]["spec"]["tolerations"]
