"""The local plane and its pods' supervisors refuse commands of an older leader's term.

Two replicas' planes over one state directory, with real supervisors and pods: once a plane
has acted for term 2, the plane of term 1 (a replica that led, was paused, and resumed)
starts and stops nothing, and a supervisor handed a pod of term 1 runs nothing and says why.
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from phalanx.compute.base import PodPhase
from phalanx.compute.local import LocalPlane
from phalanx.compute.local.plane import SHIM_COMMAND, TERM_GATE
from phalanx.compute.terms import TermGate
from phalanx.errors import Conflict
from tests.compute.conftest import NODE, admit, alive, py_job, stop_everything, wait_pods

SLEEPER = "import time; time.sleep(120)"


def test_a_plane_of_an_older_term_starts_and_stops_nothing(home: Path, tmp_path: Path) -> None:
    old = LocalPlane(home, node_name=NODE, gpus=[], term=1)
    new: LocalPlane | None = None
    try:
        kept = py_job("kept", SLEEPER)
        old.launch(kept, 1, admit(kept))
        [before] = wait_pods(old, lambda pods: [p.phase for p in pods] == [PodPhase.RUNNING])

        new = LocalPlane(home, node_name=NODE, gpus=[], term=2)  # the next leader adopts it
        assert TermGate(home / TERM_GATE).term == 2
        [adopted] = wait_pods(new, lambda pods: len(pods) == 1)
        assert (adopted.phase, adopted.pid) == (PodPhase.RUNNING, before.pid)

        marker = tmp_path / "started"
        late = py_job("late", f"open({str(marker)!r}, 'w').close(); {SLEEPER}")
        old.launch(late, 1, admit(late))  # the resumed old leader's launch: refused
        old.terminate("kept", 1, grace_seconds=0)  # and its stop
        old.forget("kept", 1)
        assert not (home / "pods" / "late").exists()
        assert not marker.exists()
        [still] = new.observe()
        assert (still.phase, still.pid) == (PodPhase.RUNNING, before.pid)
        assert before.pid is not None and alive(before.pid)

        # The leader of term 2 still acts; a plane of term 1 cannot even be built again.
        new.terminate("kept", 1, grace_seconds=0)
        [stopped] = wait_pods(new, lambda pods: all(p.phase.done for p in pods))
        assert stopped.reason == "Terminated"
        with pytest.raises(Conflict, match="term 2"):
            LocalPlane(home, node_name=NODE, gpus=[], term=1)
    finally:
        stop_everything(home)
        old.close()
        if new is not None:
            new.close()


def test_a_supervisor_refuses_a_pod_of_an_older_term(tmp_path: Path) -> None:
    """The start that got past the old plane's own check before the new leader acted: its
    supervisor checks the term again just before it runs the command."""
    gate = TermGate(tmp_path / TERM_GATE)
    assert gate.admits(2)
    marker, log, exit_file = tmp_path / "ran", tmp_path / "pod.log", tmp_path / "exit.json"
    pod = {"command": ["touch", str(marker)], "cwd": str(tmp_path), "env": {},
           "log": str(log), "attempt": 1, "logMaxBytes": 1 << 20, "logKeep": 1,
           "term": 1, "termGate": str(gate.path)}
    subprocess.run([*SHIM_COMMAND, str(exit_file)], input=json.dumps(pod).encode(),
                   check=True, timeout=60)
    record = json.loads(exit_file.read_text())
    assert record["refused"] is True
    assert "term 1" in record["error"] and "term 2" in record["error"]
    assert "not started" in log.read_text() and "term 2" in log.read_text()
    assert not marker.exists()

    # The same pod under the newest term runs.
    subprocess.run([*SHIM_COMMAND, str(exit_file)],
                   input=json.dumps({**pod, "term": 2}).encode(), check=True, timeout=60)
    assert json.loads(exit_file.read_text())["exitCode"] == 0
    assert marker.exists()


def test_the_gate_keeps_the_newest_term_across_processes(tmp_path: Path) -> None:
    first, second = TermGate(tmp_path / "gate"), TermGate(tmp_path / "gate")
    assert first.term == 0 and first.admits(None) and first.admits(3)
    assert not second.admits(2)  # another reader of the same directory sees term 3
    assert second.admits(12) and not first.admits(3)
    assert first.term == 12
    # Terms well below the newest are pruned; the newest stays.
    assert [p.name for p in (tmp_path / "gate").iterdir()] == ["12"]


def test_a_gate_kept_as_one_file_keeps_its_term(tmp_path: Path) -> None:
    (tmp_path / "leader-term").write_text("5\n")
    gate = TermGate(tmp_path / "leader-term")
    assert gate.term == 5 and not gate.admits(4) and gate.admits(5)
