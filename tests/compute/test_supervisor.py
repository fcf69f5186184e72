"""The supervisor's handshake and the process-identity guard, with real processes."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from phalanx.compute.local import LocalPlane, procs
from phalanx.compute.local.plane import SHIM_COMMAND
from phalanx.errors import SpecError
from phalanx.spec.resources import JobSpec
from tests.compute.conftest import NODE, admit, alive, py_job, wait_gone


def test_supervisor_runs_nothing_without_the_pod(tmp_path: Path) -> None:
    """A plane that dies before handing the pod over leaves nothing running."""
    exit_file = tmp_path / "pod.exit.json"
    pid, stdin = procs.spawn_session([*SHIM_COMMAND, str(exit_file)], os.environ)
    assert os.getsid(pid) == pid  # leads its own session
    os.close(stdin)  # end of file, no pod
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0
    assert not exit_file.exists()


def test_a_reused_pid_is_never_signalled() -> None:
    victim = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"],
                              start_new_session=True)
    try:
        start = procs.start_time(victim.pid)
        assert start is not None and procs.is_running(victim.pid, start)
        # recorded with another start time: some other process once had this pid
        assert not procs.signal_group(victim.pid, start - 1, signal.SIGKILL)
        assert not procs.is_running(victim.pid, start - 1)
        assert alive(victim.pid)
        assert procs.signal_group(victim.pid, start, signal.SIGKILL)
        victim.wait(timeout=10)
        assert victim.returncode == -signal.SIGKILL
        assert not procs.is_running(victim.pid, start)
    finally:
        victim.kill()
        victim.wait()
    wait_gone([victim.pid])


@pytest.mark.parametrize(
    ("spec", "node", "field"),
    [
        ({"podSets": [{"command": ["true"]}]}, "elsewhere", "admission.podSets.nodes"),
        ({"podSets": [{}]}, NODE, "podSets[0].command"),
        ({"podSets": [{"command": ["true"], "workingDir": "/no/such/dir"}]}, NODE,
         "podSets[0].workingDir"),
    ],
)
def test_bad_launches_start_nothing(
    plane: LocalPlane, home: Path, spec: dict[str, object], node: str, field: str
) -> None:
    job = JobSpec.model_validate({"name": "bad", **spec})
    with pytest.raises(SpecError) as caught:
        plane.launch(job, 1, admit(job, node=node))
    assert caught.value.field == field and caught.value.fix
    assert plane.observe() == [] and not (home / "pods" / "bad").exists()
    good = py_job("bad", "print('ok')")  # the same attempt can still be launched correctly
    plane.launch(good, 1, admit(good))
    assert [p.ref.name for p in plane.observe()] == ["bad-w-0"]
