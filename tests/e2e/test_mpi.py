"""``kind: mpi`` on the local plane: real OpenMPI, mpi4py and Phalanx as the rsh agent."""

from __future__ import annotations

import os
import re
import shutil
import time
from typing import Any

import psutil
import pytest

from tests.e2e.conftest import ControlPlane, example_job

# The tests share one control plane (their jobs have names of their own and end before
# the next test starts); a test's agents-left check covers the earlier tests' jobs too.
pytestmark = [
    pytest.mark.slow,
    # CI installs OpenMPI (scripts/test.sh): there a missing mpirun fails the tests.
    pytest.mark.skipif(shutil.which("mpirun") is None and not os.environ.get("CI"),
                       reason="OpenMPI is not installed (scripts/test.sh installs openmpi-bin)"),
]


def example() -> dict[str, Any]:
    return example_job("mpi-allreduce.yaml")


def agents_of(plane: ControlPlane) -> list[psutil.Process]:
    found = []
    for proc in psutil.process_iter(["cmdline", "environ"]):
        cmdline = proc.info.get("cmdline") or []
        if "phalanx.kinds.mpi_agent" in cmdline:
            found.append(proc)
    return found


def test_allreduce_example_sums_right_on_every_rank(shared_plane: ControlPlane) -> None:
    plane = shared_plane
    plane.submit(example())
    job = plane.wait_for("mpi-allreduce", "Succeeded", "Failed", timeout=120)
    logs = plane.logs("mpi-allreduce")
    assert job["status"] == "Succeeded", logs
    lines = re.findall(r"rank (\d) of 3 in (\S+): allreduce sum = (\d+)", logs)
    assert sorted(rank for rank, _, _ in lines) == ["0", "1", "2"], logs
    assert {total for _, _, total in lines} == {"6"}
    # Each rank ran inside a worker pod (its orted was started there), one per worker.
    assert sorted(pod for _, pod, _ in lines) == [
        "mpi-allreduce-worker-0", "mpi-allreduce-worker-1", "mpi-allreduce-worker-2"]
    hostfile = plane.logs("mpi-allreduce", pod="mpi-allreduce-launcher-0")
    assert "every worker is up" in hostfile
    # The workers were stopped once the launcher succeeded.
    # From the listing's own snapshot: an agent that ends meanwhile is gone, as it should be.
    assert not [p for p in agents_of(plane)
                if str(plane.home) in " ".join(p.info.get("cmdline") or [])]


def test_failing_mpi_program_fails_the_job_as_the_users(shared_plane: ControlPlane) -> None:
    plane = shared_plane
    spec = example()
    spec["name"] = "mpi-fails"
    spec["podSets"][0]["command"] = [
        "mpirun", "-np", "2", "python", "-c",
        "from mpi4py import MPI; import sys; sys.exit(3 if MPI.COMM_WORLD.rank == 1 else 0)"]
    spec["podSets"][1]["replicas"] = 2
    plane.submit(spec)
    job = plane.wait_for("mpi-fails", "Failed", "Succeeded", timeout=120)
    assert job["status"] == "Failed", plane.logs("mpi-fails")
    assert "mpi-fails-launcher-0" in job["message"]
    # A user failure: not restarted (maxRestarts 0), where a system one would have been.
    assert job["attempt"] == 1 and job["exitCode"] not in (None, 0), job


def test_slots_come_from_nproc_per_node(shared_plane: ControlPlane) -> None:
    plane = shared_plane
    spec = example()
    spec["name"] = "mpi-slots"
    spec["podSets"][0]["command"] = ["mpirun", "python", "mpi_allreduce.py"]
    spec["podSets"][1].update(replicas=2, env={"NPROC_PER_NODE": "2"})
    plane.submit(spec)
    job = plane.wait_for("mpi-slots", "Succeeded", "Failed", timeout=120)
    logs = plane.logs("mpi-slots")
    assert job["status"] == "Succeeded", logs
    # mpirun without -np fills every slot of the hostfile: 2 workers x 2 slots.
    lines = re.findall(r"rank (\d) of 4 in (\S+): allreduce sum = (\d+)", logs)
    assert len(lines) == 4 and {t for _, _, t in lines} == {"10"}, logs
    assert sorted(p for _, p, _ in lines) == ["mpi-slots-worker-0"] * 2 + ["mpi-slots-worker-1"] * 2


def test_workers_still_running_when_the_launcher_succeeds_get_a_graceful_stop(
    shared_plane: ControlPlane,
) -> None:
    """The launcher leaves a process running in the worker pod that writes a marker on
    SIGTERM: the job succeeds, and the worker's pod is stopped with SIGTERM and the
    job's grace (a SIGKILL would leave no marker)."""
    plane = shared_plane
    marker = plane.home / "worker-got-sigterm"
    # Started through Phalanx's rsh agent, in the worker pod's process group, outliving
    # the command that started it, as an orted left behind would.
    lingering = (f"(trap 'echo TERM > {marker}; exit 0' TERM; "
                 "while :; do sleep 0.1; done) </dev/null >/dev/null 2>&1 &")
    spec = example()
    spec["name"] = "mpi-graceful"
    spec["terminationGrace"] = "30s"
    spec["podSets"][0]["command"] = [
        "sh", "-c", 'python -m phalanx.kinds.mpi_rsh mpi-graceful-worker-0 "$0" && echo left',
        lingering]
    spec["podSets"][1]["replicas"] = 1
    plane.submit(spec)
    job = plane.wait_for("mpi-graceful", "Succeeded", "Failed", timeout=120)
    assert job["status"] == "Succeeded", plane.logs("mpi-graceful")
    assert "left" in plane.logs("mpi-graceful", pod="mpi-graceful-launcher-0")
    deadline = time.monotonic() + 30
    while not marker.exists() and time.monotonic() < deadline:
        time.sleep(0.1)
    assert marker.exists() and marker.read_text().strip() == "TERM"
    # From the listing's own snapshot: an agent that ends meanwhile is gone, as it should be.
    assert not [p for p in agents_of(plane)
                if str(plane.home) in " ".join(p.info.get("cmdline") or [])]
