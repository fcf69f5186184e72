"""The local plane with real processes and signals: gangs, exits, stops, logs."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import psutil

from phalanx.compute.base import PodPhase, PodState
from phalanx.compute.local import LocalPlane
from phalanx.spec.resources import JobSpec
from tests.compute.conftest import (
    NODE,
    admit,
    alive,
    all_done,
    py_job,
    wait_file,
    wait_gone,
    wait_pods,
)

# Waits until the test creates $GO, so the test sees every pod running first.
GANG = (
    "import os, time\n"
    "print('rank', os.environ['RANK'], 'of', os.environ['WORLD_SIZE'],"
    " 'port', os.environ['PHALANX_MASTER_PORT'])\n"
    "while not os.path.exists(os.environ['GO']): time.sleep(0.02)\n"
)


def running(pods: list[PodState]) -> bool:
    return bool(pods) and all(p.phase is PodPhase.RUNNING for p in pods)


def command_pid(pod: PodState) -> int:
    """The pid of the pod's command: the only child of its supervisor."""
    assert pod.pid is not None
    [child] = wait_children(pod.pid)
    return child.pid


def wait_children(pid: int) -> list[psutil.Process]:
    for _ in range(500):
        children = psutil.Process(pid).children()
        if children:
            return children
        psutil.wait_procs([], timeout=0.02)
    raise AssertionError(f"{pid} never started its command")


def test_gang_of_four_runs_then_succeeds(plane: LocalPlane, tmp_path: Path) -> None:
    job = py_job("gang", GANG, replicas=4, env={"GO": str(tmp_path / "go")})
    plane.launch(job, 1, admit(job))
    pods = wait_pods(plane, running)
    assert [p.ref.rank for p in pods] == [0, 1, 2, 3]
    assert {p.node for p in pods} == {NODE}
    assert len({p.pid for p in pods}) == 4
    for pod in pods:  # each pod is its own session, its command in the supervisor's group
        assert pod.pid is not None
        assert os.getsid(pod.pid) == os.getpgid(pod.pid) == pod.pid
        assert os.getpgid(command_pid(pod)) == pod.pid
    (tmp_path / "go").touch()
    pods = wait_pods(plane, all_done)
    assert [(p.phase, p.reason, p.exit_code, p.failure) for p in pods] == [
        (PodPhase.SUCCEEDED, "Completed", 0, None)] * 4
    assert all(p.finished_at and p.started_at and p.finished_at >= p.started_at for p in pods)
    logs = [plane.logs.path("gang", f"gang-w-{i}").read_text() for i in range(4)]
    # the layout state directories already have: <home>/logs/<job>/<pod>.log
    assert plane.logs.path("gang", "gang-w-3") == plane.home / "logs" / "gang" / "gang-w-3.log"
    port = logs[0].split()[-1]
    assert logs == [f"rank {i} of 4 port {port}\n" for i in range(4)]


def test_exit_codes_signals_and_terminate_are_classified(plane: LocalPlane) -> None:
    sleeper = "import time; time.sleep(60)"
    jobs = {
        "ok": py_job("ok", "print('fine')"),
        "three": py_job("three", "import sys; sys.exit(3)"),
        "segv": py_job("segv", "import ctypes; ctypes.string_at(0)"),
        "killed": py_job("killed", sleeper),
        "stopped": py_job("stopped", sleeper),
        "missing": JobSpec.model_validate({"name": "missing",
                                           "podSets": [{"command": ["no-such-command-x"]}]}),
    }
    for job in jobs.values():
        plane.launch(job, 1, admit(job))
    pods = {p.ref.job: p for p in wait_pods(
        plane, lambda ps: all(p.phase is PodPhase.RUNNING for p in ps if p.ref.job in
                              ("killed", "stopped")))}
    psutil.Process(command_pid(pods["killed"])).send_signal(signal.SIGKILL)  # not asked for
    command_pid(pods["stopped"])  # its command runs (else it is stopped before it starts)
    plane.terminate("stopped", 1, grace_seconds=30)
    pods = {p.ref.job: p for p in wait_pods(plane, all_done)}

    def summary(job: str) -> tuple[object, ...]:
        p = pods[job]
        return p.phase, p.reason, p.failure, p.exit_code, p.signal

    assert summary("ok") == (PodPhase.SUCCEEDED, "Completed", None, 0, None)
    assert summary("three") == (PodPhase.FAILED, "Error", "user", 3, None)
    assert summary("segv") == (PodPhase.FAILED, "Crashed", "user", None, signal.SIGSEGV)
    assert summary("killed") == (PodPhase.FAILED, "Signaled", "system", None, signal.SIGKILL)
    # SIGTERM was enough: the grace never ran out
    assert summary("stopped") == (PodPhase.FAILED, "Terminated", None, None, signal.SIGTERM)
    assert summary("missing") == (PodPhase.FAILED, "Error", "user", 127, None)
    assert "no-such-command-x" in plane.logs.path("missing", "missing-worker-0").read_text()


TREE = (
    "import os, signal, subprocess, sys, time\n"
    "if os.environ.get('STUBBORN'): signal.signal(signal.SIGTERM, signal.SIG_IGN)\n"
    "grand = 'import time; time.sleep(120)'\n"
    "child = ('import subprocess, sys, time; '\n"
    "         f'g = subprocess.Popen([sys.executable, \"-c\", {grand!r}]); '\n"
    "         'print(g.pid, flush=True); time.sleep(120)')\n"
    "c = subprocess.Popen([sys.executable, '-c', child], stdout=subprocess.PIPE, text=True)\n"
    "g = c.stdout.readline().strip()\n"
    "open(os.environ['PIDS'], 'w').write(f'{os.getpid()} {c.pid} {g}')\n"
    "time.sleep(120)\n"
)


def launch_tree(plane: LocalPlane, name: str, tmp_path: Path, stubborn: bool) -> list[int]:
    pids_file = tmp_path / f"{name}.pids"
    env = {"PIDS": str(pids_file), **({"STUBBORN": "1"} if stubborn else {})}
    job = py_job(name, TREE, env=env)
    plane.launch(job, 1, admit(job))
    pids = [int(p) for p in wait_file(pids_file).split()]
    assert len(pids) == 3 and all(alive(p) for p in pids)
    return pids


def test_terminate_kills_the_whole_tree(plane: LocalPlane, tmp_path: Path) -> None:
    pids = launch_tree(plane, "tree", tmp_path, stubborn=False)
    supervisor = plane.observe()[0].pid
    assert supervisor is not None
    plane.terminate("tree", 1, grace_seconds=30)
    [pod] = wait_pods(plane, all_done)
    wait_gone([*pids, supervisor])
    assert (pod.reason, pod.failure, pod.signal) == ("Terminated", None, signal.SIGTERM)


def test_sigterm_ignoring_tree_is_killed_after_the_grace(
    plane: LocalPlane, tmp_path: Path
) -> None:
    pids = launch_tree(plane, "stubborn", tmp_path, stubborn=True)
    plane.terminate("stubborn", 1, grace_seconds=0.5)
    plane.terminate("stubborn", 1, grace_seconds=60)  # asking again never extends the grace
    [pod] = wait_pods(plane, all_done)
    wait_gone(pids)
    assert (pod.reason, pod.failure, pod.signal) == ("Terminated", None, signal.SIGKILL)


def test_processes_left_behind_by_a_finished_command_are_killed(
    plane: LocalPlane, tmp_path: Path
) -> None:
    pid_file = tmp_path / "bg"
    code = (
        "import os, subprocess, sys\n"
        "bg = subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(120)'])\n"
        "open(os.environ['BG'], 'w').write(str(bg.pid))\n"
    )
    job = py_job("leaver", code, env={"BG": str(pid_file)})
    plane.launch(job, 1, admit(job))
    [pod] = wait_pods(plane, all_done)
    assert pod.phase is PodPhase.SUCCEEDED
    wait_gone([int(wait_file(pid_file))])


def test_launch_is_idempotent(plane: LocalPlane, tmp_path: Path) -> None:
    job = py_job("twice", GANG, replicas=2, env={"GO": str(tmp_path / "go")})
    plane.launch(job, 1, admit(job))
    first = wait_pods(plane, running)
    plane.launch(job, 1, admit(job))
    again = wait_pods(plane, running)
    assert [p.pid for p in again] == [p.pid for p in first]
    assert [p.started_at for p in again] == [p.started_at for p in first]
    (tmp_path / "go").touch()
    wait_pods(plane, all_done)
    plane.launch(job, 1, admit(job))  # done pods are not started again either
    assert all(p.phase.done for p in plane.observe())
    log = plane.logs.path("twice", "twice-w-0").read_text()
    assert log.count("rank 0") == 1


def test_logs_arrive_line_by_line_and_accumulate_across_attempts(
    plane: LocalPlane, tmp_path: Path
) -> None:
    go = tmp_path / "go"
    code = (
        "import os, time\n"
        "print('attempt', os.environ['PHALANX_ATTEMPT'], 'starts')\n"
        "while not os.path.exists(os.environ['GO']): time.sleep(0.02)\n"
        "print('attempt', os.environ['PHALANX_ATTEMPT'], 'ends')\n"
    )
    job = py_job("chatty", code, env={"GO": str(go)})
    log = plane.logs.path("chatty", "chatty-w-0")
    plane.launch(job, 1, admit(job))
    assert wait_file(log) == "attempt 1 starts\n"  # flushed while the pod still runs
    assert plane.observe()[0].phase is PodPhase.RUNNING
    go.touch()
    wait_pods(plane, all_done)
    plane.forget("chatty", 1)
    assert plane.observe() == [] and log.exists()  # forgetting keeps the logs
    plane.launch(job, 2, admit(job))
    wait_pods(plane, all_done)
    assert log.read_text() == (
        "attempt 1 starts\nattempt 1 ends\n=== attempt 2 ===\nattempt 2 starts\nattempt 2 ends\n"
    )


def test_a_new_plane_readopts_running_pods(home: Path, tmp_path: Path) -> None:
    go = tmp_path / "go"
    code = (
        "import os, sys, time\n"
        "while not os.path.exists(os.environ['GO']): time.sleep(0.02)\n"
        "sys.exit(int(os.environ['RANK']) * 5)\n"
    )
    job = py_job("survivor", code, replicas=2, env={"GO": str(go)})
    first = LocalPlane(home, node_name=NODE)
    first.launch(job, 1, admit(job))
    before = wait_pods(first, running)
    first.close()
    del first

    second = LocalPlane(home, node_name=NODE)
    try:
        adopted = wait_pods(second, running)
        assert [(p.ref, p.pid, p.started_at) for p in adopted] == [
            (p.ref, p.pid, p.started_at) for p in before]
        second.launch(job, 1, admit(job))  # the restarted control plane re-issues launch
        assert [p.pid for p in second.observe()] == [p.pid for p in before]
        go.touch()
        done = wait_pods(second, all_done)
        assert [(p.phase, p.exit_code, p.failure) for p in done] == [
            (PodPhase.SUCCEEDED, 0, None), (PodPhase.FAILED, 5, "user")]
    finally:
        second.close()


def test_a_lost_supervisor_is_a_system_failure(plane: LocalPlane) -> None:
    job = py_job("orphan", "import time; time.sleep(60)")
    plane.launch(job, 1, admit(job))
    [pod] = wait_pods(plane, running)
    assert pod.pid is not None
    command = command_pid(pod)
    psutil.Process(pod.pid).kill()  # the supervisor alone dies; its command lives on
    [pod] = wait_pods(plane, all_done)
    assert (pod.phase, pod.reason, pod.failure) == (PodPhase.FAILED, "Lost", "system")
    assert alive(command)
    plane.terminate("orphan", 1, grace_seconds=5)  # what the control plane does next
    wait_gone([command])


def test_a_new_plane_honours_the_grace_deadline(home: Path, tmp_path: Path) -> None:
    pids_file = tmp_path / "pid"
    code = (
        "import os, signal, time\n"
        "signal.signal(signal.SIGTERM, signal.SIG_IGN)\n"
        "open(os.environ['PID'], 'w').write(str(os.getpid()))\n"
        "time.sleep(60)\n"
    )
    job = py_job("deadline", code, env={"PID": str(pids_file)})
    first = LocalPlane(home, node_name=NODE)
    first.launch(job, 1, admit(job))
    pid = int(wait_file(pids_file))
    first.terminate("deadline", 1, grace_seconds=1.0)
    first.close()  # gone before the grace ends: nobody of this plane will SIGKILL
    del first
    assert alive(pid)

    second = LocalPlane(home, node_name=NODE)
    try:
        wait_gone([pid])  # killed by the new plane's own thread, without any call
        # The command is gone; its supervisor, killed with it, may take a moment more.
        [pod] = wait_pods(second, all_done)
        assert (pod.reason, pod.failure, pod.signal) == ("Terminated", None, signal.SIGKILL)
        second.forget("deadline", 1)
        assert second.observe() == [] and not (home / "pods" / "deadline").exists()
    finally:
        second.close()


CRASHING_SERVER = """
import sys, time
from pathlib import Path
from phalanx.compute.local import LocalPlane
from tests.compute.conftest import admit, py_job
home, go = sys.argv[1:]
code = f"import os, time\\nwhile not os.path.exists({go!r}): time.sleep(0.02)\\nprint('done')"
job = py_job("crash", code)
plane = LocalPlane(Path(home), node_name="testnode")
plane.launch(job, 1, admit(job))
print("launched", flush=True)
time.sleep(60)
"""


def test_a_plane_killed_mid_run_leaves_pods_to_the_next(home: Path, tmp_path: Path) -> None:
    """The launching process dies by SIGKILL; its pods keep running and are adopted."""
    go = tmp_path / "go"
    server = subprocess.Popen(
        [sys.executable, "-c", CRASHING_SERVER, str(home), str(go)], stdout=subprocess.PIPE,
        text=True, cwd=Path(__file__).resolve().parents[2],
    )
    try:
        assert server.stdout is not None and server.stdout.readline().strip() == "launched"
    finally:
        server.kill()
        server.wait()
        if server.stdout is not None:
            server.stdout.close()
    plane = LocalPlane(home, node_name=NODE)
    try:
        [pod] = wait_pods(plane, running)
        go.touch()
        [pod] = wait_pods(plane, all_done)
        assert (pod.phase, pod.exit_code) == (PodPhase.SUCCEEDED, 0)
        assert plane.logs.path("crash", "crash-w-0").read_text() == "done\n"
    finally:
        plane.close()


CUT_SHORT = """
import os, signal, sys
from pathlib import Path
from phalanx.compute.local import LocalPlane
from tests.compute.conftest import admit, py_job
home, marks, go = sys.argv[1:]
code = (f"import os, time\\n"
        f"open(os.path.join({marks!r}, os.environ['PHALANX_POD_NAME']), 'a').write('started\\\\n')\\n"
        f"while not os.path.exists({go!r}): time.sleep(0.02)\\n")
job = py_job("cut", code, replicas=4)
plane = LocalPlane(Path(home), node_name="testnode")
start, started = plane._start, []


def start_then_die(current, pod, launch):  # SIGKILL once two of the four pods started
    start(current, pod, launch)
    started.append(pod)
    if len(started) == 2:
        os.kill(os.getpid(), signal.SIGKILL)


plane._start = start_then_die
plane.launch(job, 1, admit(job))
"""


def test_a_launch_cut_short_is_resumed_by_the_next_plane(home: Path, tmp_path: Path) -> None:
    """The launching process dies by SIGKILL after two of a gang's four pods started: the
    next plane starts the other two from the plans kept on disk, and none starts twice."""
    marks, go = tmp_path / "marks", tmp_path / "go"
    marks.mkdir()
    launcher = subprocess.run(
        [sys.executable, "-c", CUT_SHORT, str(home), str(marks), str(go)],
        cwd=Path(__file__).resolve().parents[2], capture_output=True, text=True, timeout=120)
    assert launcher.returncode == -signal.SIGKILL, launcher.stderr
    assert (home / "pods" / "cut" / "1" / "launches.json").exists()
    plane = LocalPlane(home, node_name=NODE)
    try:
        pods = wait_pods(plane, running)
        assert [p.ref.rank for p in pods] == [0, 1, 2, 3]
        wait_file(marks / "cut-w-3")
        go.touch()
        pods = wait_pods(plane, all_done)
        assert [(p.phase, p.exit_code) for p in pods] == [(PodPhase.SUCCEEDED, 0)] * 4
        assert {m.name: m.read_text() for m in marks.iterdir()} == {
            f"cut-w-{i}": "started\n" for i in range(4)}
        # The plans (they hold the pods' env) are gone once every pod has started.
        assert not (home / "pods" / "cut" / "1" / "launches.json").exists()
    finally:
        plane.close()


def test_a_whole_launch_leaves_no_plans_on_disk(plane: LocalPlane, tmp_path: Path) -> None:
    job = py_job("whole", "print('hi')", replicas=2)
    plane.launch(job, 1, admit(job))
    wait_pods(plane, all_done)
    assert not (plane.home / "pods" / "whole" / "1" / "launches.json").exists()
