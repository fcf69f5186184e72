"""The local plane runs the doctor: a GPU that turns bad stops the gang on it and requeues
it as a system failure; the node offers what NVML sees. A real control plane in a
subprocess that loads the fake NVML library, over real HTTP."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.e2e.conftest import ControlPlane, py_job, running
from tests.health.conftest import FakeNVML


class DoctoredPlane(ControlPlane):
    def serve_args(self) -> str:
        return f"db={self.db!r}, health_interval=0.3"


@pytest.fixture
def gpu_plane(nvml: FakeNVML, tmp_path: Path,
              monkeypatch: pytest.MonkeyPatch) -> Iterator[DoctoredPlane]:
    nvml.add(2)
    for key, value in nvml.env().items():  # what the control plane's process starts with
        monkeypatch.setenv(key, value)
    with running(DoctoredPlane(tmp_path / "home", grace=1.0)) as cp:
        yield cp


def _node(cp: ControlPlane) -> dict[str, Any]:
    items = cp.api.get("/v1/nodes").json()["items"]
    assert len(items) == 1
    return items[0]


def _until(condition: Any, timeout: float = 20.0) -> Any:
    deadline = time.time() + timeout
    while time.time() < deadline:
        value = condition()
        if value:
            return value
        time.sleep(0.1)
    raise AssertionError("timed out")


def test_bad_gpu_stops_and_requeues_the_gang(gpu_plane: DoctoredPlane, nvml: FakeNVML) -> None:
    cp = gpu_plane
    node = _until(lambda: (n := _node(cp))["checks"] and n)
    assert node["health"] == "healthy"
    assert node["allocatable"]["nvidia.com/gpu"] == "2"
    assert {c["name"]: c["status"] for c in node["checks"]}["gpu-count"] == "PASS"

    cp.submit(py_job("train", "import time; time.sleep(60)",
                     pod_set={"resources": {"cpu": "100m", "nvidia.com/gpu": 1}}))
    cp.wait_for("train", "Running")

    nvml.gpus[0].settings["remap_pending"] = 1
    nvml.write()
    job = cp.wait_for("train", "Queued", timeout=30)
    assert job["systemRestarts"] == 1 and job["userRestarts"] == 0
    stop = next(e for e in job["events"] if e["reason"] == "NodeUnhealthy")
    assert stop["type"] == "Warning"
    assert node["name"] in stop["message"] and "gpu-remapped-rows" in stop["message"]
    node = _node(cp)
    assert node["health"] == "unhealthy"
    assert any(r.startswith("gpu-remapped-rows: GPU 0") for r in node["healthReasons"])
    metrics = cp.api.get("/metrics").text
    assert (f'phalanx_node_check{{check="gpu-remapped-rows",node="{node["name"]}"}} 2.0'
            in metrics)
    # An unhealthy node gets no pods: the job waits ...
    time.sleep(1.0)
    assert cp.job("train")["status"] == "Queued"
    # ... and runs again once the GPU is reset.
    nvml.gpus[0].settings["remap_pending"] = 0
    nvml.write()
    cp.wait_for("train", "Running", timeout=30)
    assert _node(cp)["health"] == "healthy"


def test_a_gpu_that_falls_off_is_no_longer_offered(gpu_plane: DoctoredPlane,
                                                    nvml: FakeNVML) -> None:
    cp = gpu_plane
    _until(lambda: _node(cp)["checks"])
    nvml.gpus.pop()
    nvml.write()
    node = _until(lambda: (n := _node(cp))["allocatable"]["nvidia.com/gpu"] == "1" and n)
    assert node["health"] == "unhealthy"
    assert "gpu-count: 1 of 2 GPU(s) visible" in node["healthReasons"]
