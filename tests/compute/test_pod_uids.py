"""A uid of its own for each running attempt (``--pod-uids``): real processes, real uids.

Pods run the system Python: the uids of the range have no entry in the user database and
may not reach the repository's virtualenv. Switching uids needs root, as the plane does.
"""

from __future__ import annotations

import contextlib
import json
import os
import pwd
import stat
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from phalanx.compute.base import PodCredential, PodPhase, PodState
from phalanx.compute.local import LocalPlane
from phalanx.compute.local.plane import WAITING_FOR_UID
from phalanx.compute.local.uids import UidRange, check_uid_range, parse_uid_range
from phalanx.errors import SpecError
from phalanx.spec.resources import JobSpec
from tests.compute.conftest import NODE, admit, wait_file, wait_pods

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="giving pods other uids needs root")

SYSTEM_PYTHON = "/usr/bin/python3"
SLEEPER = "import time; time.sleep(120)"
# Reads what another attempt's pod keeps: its environment, key file and checkpoints.
PROBE = """
import json, os
out = {"uid": os.getuid(), "gid": os.getgid(), "home": os.environ["HOME"], "cwd": os.getcwd()}
for what, path in (("environ", f"/proc/{os.environ['VICTIM_PID']}/environ"),
                   ("key", os.environ["VICTIM_KEY"])):
    try:
        with open(path, "rb") as f:
            out[what] = f.read().decode(errors="replace")
    except OSError as exc:
        out[what] = type(exc).__name__
try:
    out["checkpoints"] = os.listdir(os.environ["VICTIM_CHECKPOINTS"])
except OSError as exc:
    out["checkpoints"] = type(exc).__name__
name = f"probe-{os.environ['RANK']}.json"
with open(os.path.join(os.environ["PHALANX_CHECKPOINT_DIR"], name), "w") as f:
    json.dump(out, f)
"""


def free_uids(count: int, start: int = 3_900_000) -> UidRange:
    """``count`` uids in a row that no user of this machine has."""
    taken = {e.pw_uid for e in pwd.getpwall()}
    first = start
    while any(u in taken for u in range(first, first + count)):
        first += count
    return UidRange(first, first + count - 1)


def job(name: str, code: str, replicas: int = 1, env: dict[str, str] | None = None) -> JobSpec:
    return JobSpec.model_validate({"name": name, "podSets": [{
        "name": "w", "replicas": replicas, "command": [SYSTEM_PYTHON, "-c", code],
        "env": env or {}}]})


@pytest.fixture
def planes(tmp_path: Path) -> Iterator[list[LocalPlane]]:
    """Planes a test makes; every pod they started is stopped and every attempt forgotten
    (which gives the uids back and removes the directories under /var/tmp)."""
    made: list[LocalPlane] = []
    yield made
    for plane in made:
        for pod in plane.observe():
            plane.terminate(pod.ref.job, pod.ref.attempt, grace_seconds=0)
        wait_pods(plane, lambda pods: all(p.phase.done for p in pods))
        for pod in plane.observe():
            plane.forget(pod.ref.job, pod.ref.attempt)
            plane.release_checkpoints(pod.ref.job)
        plane.close()
        assert plane.uids is not None
        for root in (plane.credentials.root, plane.checkpoints.root, plane.uids.workdirs):
            with contextlib.suppress(OSError):  # this plane's own, empty once forgotten
                root.rmdir()


def make_plane(planes: list[LocalPlane], home: Path, uids: UidRange,
               control_plane: str = "cp-test") -> LocalPlane:
    plane = LocalPlane(home, node_name=NODE, gpus=[], pod_uids=uids,
                       control_plane=control_plane)
    planes.append(plane)
    return plane


def running(job_name: str, count: int = 1) -> Callable[[list[PodState]], bool]:
    def check(pods: list[PodState]) -> bool:
        mine = [p for p in pods if p.ref.job == job_name]
        return len(mine) == count and all(p.phase is PodPhase.RUNNING for p in mine)
    return check


def command_pid(plane: LocalPlane, job_name: str) -> int:
    """The pid of the pod's command (the child of its supervisor)."""
    import psutil

    [pod] = [p for p in plane.observe() if p.ref.job == job_name]
    assert pod.pid is not None
    for _ in range(500):
        children = psutil.Process(pod.pid).children()
        if children:
            return children[0].pid
        psutil.wait_procs([], timeout=0.02)
    raise AssertionError("the pod's command never started")


def command_uid(plane: LocalPlane, job_name: str) -> int:
    """The uid the pod's command runs as, once it runs the command (a fresh child of the
    supervisor is still root until it execs)."""
    pid = command_pid(plane, job_name)
    for _ in range(500):
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            if f.read().startswith(SYSTEM_PYTHON.encode()):
                return os.stat(f"/proc/{pid}").st_uid
        time.sleep(0.02)
    raise AssertionError("the pod's command never ran")


def test_one_attempts_pods_cannot_read_anothers_environment_key_or_checkpoints(
        planes: list[LocalPlane], tmp_path: Path) -> None:
    uids = free_uids(3)
    plane = make_plane(planes, tmp_path / "home", uids)
    victim = job("bob", SLEEPER, env={"DB_PASSWORD": "bobs-password"})
    plane.launch(victim, 1, admit(victim), credential=PodCredential("http://x", "phj_bobs_key"))
    wait_pods(plane, running("bob"), job="bob")
    key_file = plane.credentials.directory("bob", 1) / "api-key"
    checkpoints = plane.checkpoints.path("bob")
    (checkpoints / "model.pt").write_text("bob's weights")
    victim_pid = command_pid(plane, "bob")
    victim_uid = command_uid(plane, "bob")
    assert victim_uid in uids
    # Owner-only, and the owner is bob's attempt's uid.
    for path, mode in ((key_file, 0o600), (key_file.parent, 0o700), (checkpoints, 0o700)):
        assert (path.stat().st_uid, stat.S_IMODE(path.stat().st_mode)) == (victim_uid, mode)

    prober = job("alice", PROBE, replicas=2, env={
        "VICTIM_PID": str(victim_pid), "VICTIM_KEY": str(key_file),
        "VICTIM_CHECKPOINTS": str(checkpoints)})
    plane.launch(prober, 1, admit(prober), credential=PodCredential("http://x", "phj_alices"))
    pods = wait_pods(plane, lambda ps: len(ps) == 2 and all(p.phase.done for p in ps),
                     job="alice")
    assert all(p.phase is PodPhase.SUCCEEDED for p in pods), pods
    found = [json.loads(wait_file(plane.checkpoints.path("alice") / f"probe-{rank}.json"))
             for rank in (0, 1)]
    # Both pods of the gang share one uid, not bob's, and each reads nothing of bob's.
    assert found[0]["uid"] == found[1]["uid"] == found[0]["gid"]
    assert found[0]["uid"] in uids and found[0]["uid"] != victim_uid
    for probe in found:
        assert probe["environ"] == "PermissionError"
        assert probe["key"] == "PermissionError"
        assert probe["checkpoints"] == "PermissionError"
        # Its working directory and HOME are its attempt's own.
        assert probe["cwd"] == probe["home"]
        assert os.stat(probe["cwd"]).st_uid == found[0]["uid"]
    assert "bobs-password" in Path(f"/proc/{victim_pid}/environ").read_text()  # it was there


def test_an_exhausted_range_holds_the_attempt_pending_until_a_uid_frees(
        planes: list[LocalPlane], tmp_path: Path) -> None:
    uids = free_uids(1)
    plane = make_plane(planes, tmp_path / "home", uids)
    first, second = job("first", SLEEPER), job("second", SLEEPER)
    plane.launch(first, 1, admit(first))
    wait_pods(plane, running("first"), job="first")
    plane.launch(second, 1, admit(second))
    [pod] = [p for p in plane.observe() if p.ref.job == "second"]
    assert (pod.phase, pod.reason) == (PodPhase.PENDING, WAITING_FOR_UID)
    [event] = plane.pod_events("second")
    assert event.type == "Warning" and event.reason == WAITING_FOR_UID
    assert f"all 1 uids of --pod-uids {uids}" in event.message
    holder = command_uid(plane, "first")
    plane.terminate("first", 1, grace_seconds=0)
    wait_pods(plane, lambda ps: all(p.phase.done for p in ps), job="first")
    # Ended but not forgotten: the uid stays held (its files and processes may remain).
    assert [p.phase for p in plane.observe() if p.ref.job == "second"] == [PodPhase.PENDING]
    plane.forget("first", 1)
    wait_pods(plane, running("second"), job="second")
    assert command_uid(plane, "second") == holder
    assert plane.pod_events("second") == []


def test_a_restarted_plane_keeps_each_attempts_uid_and_its_waiting_attempts(
        planes: list[LocalPlane], tmp_path: Path) -> None:
    uids = free_uids(2)
    home = tmp_path / "home"
    plane = make_plane(planes, home, uids)
    for name in ("a", "b", "c"):
        spec = job(name, SLEEPER)
        plane.launch(spec, 1, admit(spec))
    wait_pods(plane, lambda ps: sum(p.phase is PodPhase.RUNNING for p in ps) == 2)
    held = {name: command_uid(plane, name) for name in ("a", "b")}
    assert sorted(held.values()) == list(uids)
    plane.close()
    planes.remove(plane)

    again = make_plane(planes, home, uids)
    states = {p.ref.job: p for p in again.observe()}
    assert states["a"].phase is states["b"].phase is PodPhase.RUNNING  # adopted
    assert (states["c"].phase, states["c"].reason) == (PodPhase.PENDING, WAITING_FOR_UID)
    assert {name: command_uid(again, name)
            for name in ("a", "b")} == held
    late = job("d", SLEEPER)
    again.launch(late, 1, admit(late))  # no uid is free: d waits too, behind c
    assert [p.phase for p in again.observe() if p.ref.job == "d"] == [PodPhase.PENDING]
    again.terminate("a", 1, grace_seconds=0)
    wait_pods(again, lambda ps: all(p.phase.done for p in ps), job="a")
    again.forget("a", 1)
    wait_pods(again, running("c"), job="c")
    assert command_uid(again, "c") == held["a"]
    assert [p.phase for p in again.observe() if p.ref.job == "d"] == [PodPhase.PENDING]


def test_two_control_planes_on_one_machine_share_no_directory(
        planes: list[LocalPlane], tmp_path: Path) -> None:
    one = make_plane(planes, tmp_path / "one", free_uids(1), control_plane="cp-one")
    two = make_plane(planes, tmp_path / "two", free_uids(1, start=3_910_000),
                     control_plane="cp-two")
    assert one.credentials.root != two.credentials.root
    assert one.checkpoints.root != two.checkpoints.root
    for plane in (one, two):
        assert plane.credentials.root.parent == plane.checkpoints.root.parent == Path("/var/tmp")
    spec = job("train", SLEEPER)
    one.launch(spec, 1, admit(spec), credential=PodCredential("http://x", "phj_one"))
    two.launch(spec, 1, admit(spec), credential=PodCredential("http://x", "phj_two"))
    assert (one.credentials.directory("train", 1) / "api-key").read_text() == "phj_one"
    assert (two.credentials.directory("train", 1) / "api-key").read_text() == "phj_two"
    assert one.checkpoints.path("train") != two.checkpoints.path("train")


def test_a_range_is_refused_when_it_cannot_be_given_out_safely(tmp_path: Path) -> None:
    for text in ("", "5", "10-5", "0-10", "a-b"):
        with pytest.raises(SpecError) as bad:
            parse_uid_range(text)
        assert bad.value.field == "--pod-uids"
    uids = free_uids(10)
    with pytest.raises(SpecError, match="cannot start processes as other uids"):
        check_uid_range(uids, control_plane_uid=1000)
    check_uid_range(uids, control_plane_uid=0)
    users = sorted(e.pw_uid for e in pwd.getpwall() if 0 < e.pw_uid < 61184)
    if users:
        with pytest.raises(SpecError, match="users of this machine"):
            check_uid_range(UidRange(users[0], users[0] + 1), control_plane_uid=0)
    with pytest.raises(SpecError, match="systemd"):
        check_uid_range(parse_uid_range("61000-61200"), control_plane_uid=0)
    subuid = tmp_path / "subuid"
    subuid.write_text("ann:100000:65536\n")
    with pytest.raises(SpecError, match="ann's 100000-165535"):
        check_uid_range(UidRange(165000, 166000), control_plane_uid=0, subordinate=[subuid])
    check_uid_range(UidRange(165536, 166000), control_plane_uid=0, subordinate=[subuid])
    with pytest.raises(SpecError, match="65535"):
        check_uid_range(parse_uid_range("65530-65535"), control_plane_uid=0)


def test_pod_uids_are_for_the_local_plane_alone_and_not_with_run_as_user(
        tmp_path: Path) -> None:
    from phalanx.compute.factory import make_plane as build

    with pytest.raises(SpecError) as other_plane:
        build("simulated", tmp_path, pod_uids=str(free_uids(2)))
    assert other_plane.value.field == "--pod-uids"
    with pytest.raises(SpecError, match="both say whom pods run as"):
        build("local", tmp_path, run_as_user="nobody", pod_uids=str(free_uids(2)))
    with pytest.raises(SpecError, match="is not a range of uids"):
        build("local", tmp_path, pod_uids="many")
