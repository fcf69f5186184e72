"""This machine as a Node, and GPU discovery and assignment."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import psutil
import pytest

from phalanx.compute.base import PodPhase
from phalanx.compute.local import GPUInfo, LocalPlane, discover_gpus
from phalanx.compute.local.gpus import GPUsUnavailable, assign_gpus
from phalanx.spec.quantity import MILLI
from phalanx.spec.resources import GPU, JobSpec, NodeHealth
from tests.compute.conftest import NODE, admit, all_done, wait_pods

FAKE_GPUS = [GPUInfo(i, f"GPU-{i:04d}", "NVIDIA H100 80GB HBM3", 80 * 2**30) for i in range(4)]


def test_discovery_without_a_gpu_reports_none() -> None:
    gpus = discover_gpus()
    assert isinstance(gpus, list)
    if not Path("/dev/nvidia0").exists():  # this machine: no GPU, no driver
        assert gpus == []


def test_inventory_is_this_machine(tmp_path: Path) -> None:
    plane = LocalPlane(tmp_path, gpus=[])
    [node] = plane.inventory()
    assert node.name == plane.node_name and node.name
    assert node.labels["kubernetes.io/hostname"]
    assert node.allocatable["cpu"] == len(os.sched_getaffinity(0)) * MILLI
    assert node.allocatable["memory"] == psutil.virtual_memory().total * MILLI
    assert node.allocatable[GPU] == 0
    assert "phalanx.io/gpu-product" not in node.labels
    assert node.health is NodeHealth.HEALTHY and not node.unschedulable


def test_inventory_with_gpus_and_a_chosen_name(tmp_path: Path) -> None:
    [node] = LocalPlane(tmp_path, node_name="box-1", gpus=FAKE_GPUS).inventory()
    assert node.name == "box-1" and node.labels["kubernetes.io/hostname"] == "box-1"
    assert node.allocatable[GPU] == 4 * MILLI
    assert node.labels["phalanx.io/gpu-product"] == "NVIDIA-H100-80GB-HBM3"
    assert node.labels["phalanx.io/gpu-count"] == "4"


def test_assignment_skips_held_gpus_and_is_all_or_nothing() -> None:
    assert assign_gpus([2, 0, 1], [0, 1, 2, 3], held={1}) == [(0, 2), (), (3,)]
    with pytest.raises(GPUsUnavailable) as caught:
        assign_gpus([2, 2], [0, 1, 2, 3], held={3})
    assert "3 of 4 are free" in caught.value.message and caught.value.fix


ECHO_GPUS = (
    "import os, time\n"
    "print('cvd=' + os.environ.get('CUDA_VISIBLE_DEVICES', '<unset>'),"
    " os.environ['CUDA_DEVICE_ORDER'])\n"
    "time.sleep(float(os.environ['HOLD']))\n"
)


def gpu_job(name: str, gpus: int, replicas: int, hold: float) -> JobSpec:
    return JobSpec.model_validate({"name": name, "podSets": [{
        "name": "w", "replicas": replicas, "resources": {GPU: str(gpus)},
        "command": [sys.executable, "-c", ECHO_GPUS],
        # the user cannot widen their share of the machine's GPUs
        "env": {"HOLD": str(hold), "CUDA_VISIBLE_DEVICES": "0,1,2,3"},
    }]})


def visible(plane: LocalPlane, job: str, pods: int) -> list[str]:
    def text(i: int) -> str:
        return plane.logs.read(job, f"{job}-w-{i}")[0].decode()

    wait_pods(plane, lambda _: all("cvd=" in text(i) for i in range(pods)), job=job)
    return [text(i).split()[0] for i in range(pods)]


def test_cuda_visible_devices_follow_the_assignment(home: Path) -> None:
    plane = LocalPlane(home, node_name=NODE, gpus=FAKE_GPUS)
    try:
        holder = gpu_job("holder", gpus=1, replicas=1, hold=30)
        plane.launch(holder, 1, admit(holder))
        assert visible(plane, "holder", 1) == ["cvd=0"]
        pair = gpu_job("pair", gpus=1, replicas=2, hold=0)
        plane.launch(pair, 1, admit(pair))
        assert visible(plane, "pair", 2) == ["cvd=1", "cvd=2"]
        none = gpu_job("none", gpus=0, replicas=1, hold=0)
        plane.launch(none, 1, admit(none))
        assert visible(plane, "none", 1) == ["cvd="]  # no GPU requested: none visible

        greedy = gpu_job("greedy", gpus=2, replicas=2, hold=0)
        wait_pods(plane, all_done, job="pair")
        with pytest.raises(GPUsUnavailable):  # 4 wanted, 3 free (0 is held)
            plane.launch(greedy, 1, admit(greedy))
        assert not (home / "pods" / "greedy").exists()  # nothing half-started
        plane.terminate("holder", 1, grace_seconds=0)
        wait_pods(plane, all_done, job="holder")
        plane.launch(greedy, 1, admit(greedy))  # GPU 0 is free again
        assert visible(plane, "greedy", 2) == ["cvd=0,1", "cvd=2,3"]
        assert all(p.phase is PodPhase.SUCCEEDED
                   for p in wait_pods(plane, all_done, job="greedy"))
    finally:
        for job in ("holder", "pair", "none", "greedy"):
            plane.terminate(job, 1, grace_seconds=0)
        plane.close()


def test_fractional_gpus_are_refused(home: Path) -> None:
    plane = LocalPlane(home, node_name=NODE, gpus=FAKE_GPUS)
    job = JobSpec.model_validate({"name": "half", "podSets": [
        {"resources": {GPU: "500m"}, "command": ["true"]}]})
    from phalanx.errors import SpecError

    with pytest.raises(SpecError) as caught:
        plane.launch(job, 1, admit(job))
    assert caught.value.field == f"podSets[0].resources.{GPU}"
    assert plane.observe() == []
