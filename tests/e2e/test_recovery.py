"""Recovery that keeps work, end to end on the embedded control plane: checkpoint
directories across attempts, the job's own termination grace, and a DDP run that a
preemption interrupts and that resumes from its checkpoint."""

from __future__ import annotations

import re
import time
from pathlib import Path
from typing import Any

import pytest

from tests.e2e.conftest import ControlPlane, apply_one_cpu_queue, example_job, py_job

pytestmark = pytest.mark.slow

def _preempt(plane: ControlPlane, name: str) -> None:
    """Take ``small``'s whole quota with a short high-priority job; wait until it ran."""
    plane.submit(py_job(f"{name}-preemptor", "print('high ran')", queue="small",
                        priority="high", pod_set={"resources": {"cpu": "1"}}))
    plane.wait_for(f"{name}-preemptor", "Succeeded", timeout=90)


def _until(condition: Any, timeout: float = 60.0) -> Any:
    deadline = time.time() + timeout
    while time.time() < deadline:
        if value := condition():
            return value
        time.sleep(0.2)
    raise AssertionError("timed out")


DDP_EPOCHS = 14


def _ddp_job(name: str) -> dict[str, Any]:
    spec = example_job("ddp-cpu.yaml")
    spec["name"] = name
    spec["queue"], spec["priority"] = "small", "low"
    pod_set = spec["podSets"][0]
    pod_set["env"] |= {"EPOCHS": str(DDP_EPOCHS), "EPOCH_PAUSE": "0.4"}
    pod_set["resources"] = {"cpu": "500m"}
    return spec


def _epochs_run(logs: str) -> list[int]:
    return [int(m) for m in re.findall(r"-worker-0\] epoch +(\d+) ", logs)]


def test_a_preempted_ddp_run_resumes_from_its_checkpoint(plane: ControlPlane) -> None:
    apply_one_cpu_queue(plane)
    plane.submit(_ddp_job("ddp"))
    _until(lambda: len(_epochs_run(plane.logs("ddp"))) >= 4)
    _preempt(plane, "ddp")
    job = plane.wait_for("ddp", "Succeeded", "Failed", timeout=180)
    logs = plane.logs("ddp")
    assert job["status"] == "Succeeded", logs
    assert job["preemptions"] == 1 and job["attempt"] == 2
    epochs = _epochs_run(logs)
    resumed = re.search(r"resuming from epoch (\d+)", logs)
    assert resumed is not None, logs
    before = int(resumed.group(1))  # epochs the first attempt saved
    assert before >= 4 and "stopping after epoch" in logs  # SIGTERM: it saved and stopped
    # Every epoch ran once: fewer in all than a restart from zero would run.
    assert sorted(epochs) == list(range(DDP_EPOCHS)), epochs
    assert len(epochs) < DDP_EPOCHS + before
    # The job ended and keeps nothing: its checkpoint directory went with it.
    assert not (plane.home / "checkpoints" / "ddp").exists()


GRACEFUL = (
    "import os, signal, sys, time\n"
    "def stop(*_):\n"
    "    time.sleep(3)  # longer than the control plane's grace (2s), within the job's\n"
    "    open(os.path.join(os.environ['PHALANX_CHECKPOINT_DIR'], 'saved'), 'w').write(\n"
    "        os.environ['PHALANX_ATTEMPT'])\n"
    "    sys.exit(0)\n"
    "signal.signal(signal.SIGTERM, stop)\n"
    "print('attempt', os.environ['PHALANX_ATTEMPT'],\n"
    "      'found', sorted(os.listdir(os.environ['PHALANX_CHECKPOINT_DIR'])), flush=True)\n"
    "if os.environ['PHALANX_ATTEMPT'] == '1':\n"
    "    time.sleep(120)\n"
)


def test_preemption_gives_the_job_its_own_grace_and_the_directory_outlives_the_attempt(
    plane: ControlPlane,
) -> None:
    apply_one_cpu_queue(plane)
    plane.submit(py_job("graceful", GRACEFUL, queue="small", priority="low",
                        terminationGrace="20s", checkpoint={"keep": True},
                        pod_set={"resources": {"cpu": "1"}}))
    _until(lambda: "attempt 1 found []" in plane.logs("graceful"))
    _preempt(plane, "graceful")
    job = plane.wait_for("graceful", "Succeeded", timeout=90)
    assert job["attempt"] == 2
    # The first attempt saved after SIGTERM (3 s in: the control plane's 2 s grace would
    # have killed it); the second found what it saved.
    assert "attempt 2 found ['saved']" in plane.logs("graceful")
    kept = plane.home / "checkpoints" / "graceful" / "saved"
    assert kept.read_text() == "1"  # checkpoint.keep: still there after the job ended


def test_without_its_own_grace_the_job_is_killed_before_it_saves(plane: ControlPlane) -> None:
    apply_one_cpu_queue(plane)
    plane.submit(py_job("hasty", GRACEFUL, queue="small", priority="low",
                        checkpoint={"keep": True}, pod_set={"resources": {"cpu": "1"}}))
    _until(lambda: "attempt 1 found []" in plane.logs("hasty"))
    _preempt(plane, "hasty")
    plane.wait_for("hasty", "Succeeded", timeout=90)
    assert "attempt 2 found []" in plane.logs("hasty")
    assert not Path(plane.home / "checkpoints" / "hasty" / "saved").exists()
