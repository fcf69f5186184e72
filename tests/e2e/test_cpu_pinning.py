"""cpuPinning: exclusive on the local plane: real processes see their own CPUs."""

from __future__ import annotations

import ast
import os
import signal
import time
from typing import Any

import pytest

from tests.e2e.conftest import ControlPlane, py_job

pytestmark = pytest.mark.slow

USABLE = sorted(os.sched_getaffinity(0))
PRINT_AFFINITY = "import os; print('affinity', sorted(os.sched_getaffinity(0)), flush=True)"
HOLD = PRINT_AFFINITY + "; import time; time.sleep(300)"


def pinned(name: str, code: str, replicas: int = 1) -> dict[str, Any]:
    return py_job(name, code, replicas=replicas,
                  pod_set={"resources": {"cpu": "1"}, "cpuPinning": "exclusive"})


def affinities(plane: ControlPlane, name: str) -> dict[str, list[int]]:
    """Each pod's affinity as it printed it (a one-pod job's lines carry no pod prefix)."""
    seen = {}
    for line in plane.logs(name).splitlines():
        prefix, _, text = line.rpartition("affinity ")
        if text:
            pod = prefix.strip().strip("[]") or f"{name}-worker-0"
            seen[pod] = ast.literal_eval(text)
    return seen


def test_pinned_pod_sees_its_own_cpu(plane: ControlPlane) -> None:
    plane.submit(pinned("pinned", HOLD))
    job = plane.wait_for("pinned", "Running")
    deadline = time.time() + 30
    while not affinities(plane, "pinned") and time.time() < deadline:
        time.sleep(0.1)
    [pod] = job["pods"]
    assert len(pod["cpus"]) == 1 and pod["cpus"][0] in USABLE
    assert affinities(plane, "pinned") == {"pinned-worker-0": pod["cpus"]}
    # An unpinned pod keeps every CPU.
    plane.submit(py_job("free", PRINT_AFFINITY))
    assert plane.wait_for("free", "Succeeded")["status"] == "Succeeded"
    assert affinities(plane, "free") == {"free-worker-0": USABLE}


@pytest.mark.skipif(len(USABLE) < 2, reason="needs two CPUs to pin two pods apart")
def test_pinned_cpus_stay_held_across_a_restart_and_are_freed_when_the_pod_ends(
    plane: ControlPlane,
) -> None:
    plane.submit(pinned("holder", HOLD))
    held = plane.wait_for("holder", "Running")["pods"][0]["cpus"]
    plane.stop(signal.SIGKILL)  # the new control plane learns the held CPU from disk
    plane.start()
    plane.submit(pinned("second", PRINT_AFFINITY))
    plane.wait_for("second", "Succeeded")
    [mine] = affinities(plane, "second").values()
    assert len(mine) == 1 and mine != held
    plane.api.post("/v1/jobs/holder/cancel")
    plane.wait_for("holder", "Cancelled")
    # Every CPU, one pinned pod each: only possible once the holder's CPU is free again.
    plane.submit(pinned("all", PRINT_AFFINITY, replicas=len(USABLE)))
    plane.wait_for("all", "Succeeded", timeout=90)
    got = affinities(plane, "all")
    assert sorted(c for cpus in got.values() for c in cpus) == USABLE
    assert all(len(cpus) == 1 for cpus in got.values())
