"""Whom the local plane's pods run as (``phalanx up --run-as-user``), and its supervisor's
part: the command gets that identity, its log stays owner-only."""

from __future__ import annotations

import json
import os
import pwd
import stat
import subprocess
import sys
from pathlib import Path

import pytest

from phalanx.compute.local.plane import without_control_plane_settings
from phalanx.compute.local.shim import PRIVATE_FILE_MODE
from phalanx.compute.local.users import FIELD, pod_user_for, resolve_pod_user
from phalanx.errors import SpecError
from phalanx.server.main import make_plane


def _unused_uid() -> int:
    uid = 54321
    while True:
        try:
            pwd.getpwuid(uid)
        except KeyError:
            return uid
        uid += 1


def test_a_root_control_plane_warns_when_its_pods_run_as_root_unless_told(
    caplog: pytest.LogCaptureFixture,
) -> None:
    with caplog.at_level("WARNING", logger="phalanx.compute.local"):
        assert pod_user_for(None, control_plane_uid=0) is None
    assert "--run-as-user nobody" in caplog.text
    caplog.clear()
    with caplog.at_level("WARNING", logger="phalanx.compute.local"):
        assert pod_user_for("root", control_plane_uid=0) is None
    assert caplog.text == ""  # said on purpose: as itself
    assert pod_user_for("0", control_plane_uid=0) is None


def test_an_ordinary_control_plane_runs_pods_as_itself_and_cannot_switch() -> None:
    assert pod_user_for(None, control_plane_uid=1000) is None
    with pytest.raises(SpecError) as caught:
        pod_user_for("0", control_plane_uid=1000)
    assert caught.value.field == FIELD and "root" in (caught.value.fix or "")


def test_names_and_numbers_resolve() -> None:
    root = resolve_pod_user("root")
    assert (root.uid, root.gid, root.name) == (0, 0, "root")
    uid = _unused_uid()
    anonymous = resolve_pod_user(str(uid))
    # A uid unknown to the user database gets its own number as group, never root's.
    assert (anonymous.uid, anonymous.gid, anonymous.groups, anonymous.home) == (uid, uid, (), "/")
    assert anonymous.environment() == {"HOME": "/"}
    with pytest.raises(SpecError) as caught:
        resolve_pod_user("no-such-user-here")
    assert caught.value.field == FIELD and "no user named" in caught.value.message
    with pytest.raises(SpecError):
        resolve_pod_user("  ")


def test_run_as_user_is_for_the_local_plane_only(tmp_path: Path) -> None:
    nodes = tmp_path / "nodes.yaml"
    nodes.write_text("- name: n1\n  allocatable: {cpu: '1'}\n")
    with pytest.raises(SpecError) as caught:
        make_plane("simulated", tmp_path, nodes_file=nodes, run_as_user="nobody")
    assert caught.value.field == "--run-as-user"


def test_pods_inherit_no_control_plane_setting() -> None:
    environ = {"PHALANX_HOME": "/x", "PHALANX_TOKEN": "t", "PHALANX_URL": "u",
               "PHALANX_K8S_TOKEN": "k", "PATH": "/bin", "HOME": "/root"}
    assert without_control_plane_settings(environ) == {"PATH": "/bin", "HOME": "/root"}


@pytest.mark.skipif(os.geteuid() != 0, reason="switching users needs root")
def test_the_supervisor_runs_the_command_as_the_pod_user(tmp_path: Path) -> None:
    uid = _unused_uid()
    log = tmp_path / "pod.log"
    code = ("import os; print(os.getuid(), os.getgid(), os.getgroups(), "
            "oct(os.umask(0)), flush=True)")
    pod = {
        "command": ["/usr/bin/env", "python3", "-c", code], "cwd": "/", "attempt": 1,
        "env": {"PATH": "/usr/bin:/bin"}, "log": str(log),
        "logMaxBytes": 2**20, "logKeep": 1,
        "user": {"uid": uid, "gid": uid, "groups": []},
    }
    # In a session of its own, as the plane starts it: once the command ends, the
    # supervisor kills whatever else is in its process group, which here would be the
    # test runner's parents.
    runner = ("import json, sys; from phalanx.compute.local.shim import run_pod; "
              "print(json.dumps(run_pod(json.loads(sys.argv[1]))))")
    done = subprocess.run([sys.executable, "-c", runner, json.dumps(pod)], capture_output=True,
                          text=True, timeout=120, check=False, start_new_session=True)
    assert done.returncode == 0, done.stderr[-2000:]
    record = json.loads(done.stdout)
    assert record["exitCode"] == 0, log.read_text()
    # Root's supplementary groups are gone and the conventional umask is back.
    assert log.read_text().split() == [str(uid), str(uid), "[]", "0o22"]
    assert stat.S_IMODE(log.stat().st_mode) == PRIVATE_FILE_MODE
    assert log.stat().st_uid == os.geteuid()  # opened by the supervisor, not by the pod
