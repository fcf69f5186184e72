"""A waiting job across a control-plane crash: real processes, real HTTP."""

from __future__ import annotations

import signal
from pathlib import Path

import pytest

from tests.e2e.conftest import ControlPlane, py_job

pytestmark = pytest.mark.slow

UNTIL_GO = ("import os, time\n"
            "while not os.path.exists(os.environ['GO']): time.sleep(0.05)\n"
            "print('upstream done')\n")


def test_waiting_job_still_waits_after_a_crash_and_runs_once_upstream_ends(
    plane: ControlPlane, tmp_path: Path,
) -> None:
    go = tmp_path / "go"
    runs = tmp_path / "runs"
    plane.submit(py_job("upstream", UNTIL_GO, pod_set={"env": {"GO": str(go)}}))
    plane.submit(py_job("downstream", f"open({str(runs)!r}, 'a').write('run\\n')",
                        dependsOn=["upstream"]))
    plane.wait_for("upstream", "Running")
    plane.stop(signal.SIGKILL)  # no clean shutdown
    plane.start()
    # A job submitted after it runs to its end: had the restart let downstream through, it
    # would have been admitted first (same queue, room for both, submitted earlier).
    plane.submit(py_job("later", "pass"))
    plane.wait_for("later", "Succeeded")
    down = plane.job("downstream")
    assert down["status"] == "Queued" and down["attempt"] == 0
    assert down["pendingMessage"] == "waiting for job upstream to succeed"
    assert not runs.exists()
    go.touch()
    assert plane.wait_for("upstream", "Succeeded")["attempt"] == 1  # adopted, not rerun
    down = plane.wait_for("downstream", "Succeeded")
    assert runs.read_text() == "run\n"  # ran once
    assert "DependenciesMet" in [e["reason"] for e in down["events"]]
