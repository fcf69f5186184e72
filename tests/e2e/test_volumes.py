"""Volumes on the local plane, end to end: a real ``phalanx up`` server, real pods, each
with a mount namespace of its own (which needs root: skipped otherwise).

A pod set's ``shm: 1Gi`` is a /dev/shm of 1Gi as ``df`` sees it in the pod; an emptyDir
is the pod's own (two pods of one set never see each other's files), writable, and gone
once the pod ends; a hostPath shows the machine's file at mountPath, read-only when asked;
the checkpoint directory keeps working beside the mounts; and what the plane cannot honour
is refused at submit, naming the field.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest

from tests.e2e.conftest import ControlPlane, py_job

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(os.geteuid() != 0, reason="a pod's own mount namespace needs root"),
]

GIB = 2**30

POD = """
import json, os, subprocess, sys
scratch, data, out = sys.argv[1], sys.argv[2], sys.argv[3]
rank = os.environ["PHALANX_RANK"]
df = subprocess.run(["df", "-B1", "--output=size", "/dev/shm"], capture_output=True,
                    text=True, check=True).stdout.split()
with open(os.path.join(scratch, f"rank-{rank}"), "w") as f:
    f.write(rank)
try:
    open(os.path.join(data, "new"), "w")
    read_only = False
except OSError:
    read_only = True
with open(os.path.join(os.environ["PHALANX_CHECKPOINT_DIR"], f"step-{rank}"), "w") as f:
    f.write("saved")
with open(os.path.join(out, f"pod-{rank}.json"), "w") as f:
    json.dump({"shm": int(df[-1]), "scratch": sorted(os.listdir(scratch)),
               "data": open(os.path.join(data, "hello.txt")).read(),
               "readOnly": read_only}, f)
"""


def volumes_job(name: str, scratch: Path, data: Path, host: Path, out: Path) -> dict[str, Any]:
    job = py_job(name, POD, replicas=2, checkpoint={"keep": True}, volumes=[
        {"name": "scratch", "emptyDir": {}},
        {"name": "data", "hostPath": {"path": str(host), "type": "Directory"}},
        {"name": "out", "hostPath": {"path": str(out)}},
    ], pod_set={"shm": "1Gi", "volumeMounts": [
        {"name": "scratch", "mountPath": str(scratch)},
        {"name": "data", "mountPath": str(data), "readOnly": True},
        {"name": "out", "mountPath": str(out)},
    ]})
    job["podSets"][0]["command"] += [str(scratch), str(data), str(out)]
    return job


def test_shm_emptydir_hostpath_and_checkpoints_in_the_pods(
        plane: ControlPlane, tmp_path: Path) -> None:
    host, out = tmp_path / "host", tmp_path / "out"
    scratch, data = tmp_path / "scratch", tmp_path / "data"  # mountPaths, empty on the host
    for path in (host, out, scratch, data):
        path.mkdir()
    (host / "hello.txt").write_text("from the host")
    plane.submit(volumes_job("vols", scratch, data, host, out))
    plane.wait_for("vols", "Succeeded")

    seen = {rank: json.loads((out / f"pod-{rank}.json").read_text()) for rank in ("0", "1")}
    for rank, pod in seen.items():
        assert pod["shm"] == GIB  # df in the pod
        assert pod["scratch"] == [f"rank-{rank}"]  # its own emptyDir, not its gang mate's
        assert pod["data"] == "from the host"
        assert pod["readOnly"] is True
    # The mounts were the pods' own: on the machine the mountPaths stayed empty, the
    # machine's /dev/shm kept its size, and the emptyDirs went with their pods.
    assert list(scratch.iterdir()) == [] and list(data.iterdir()) == []
    machine_shm = os.statvfs("/dev/shm")
    assert machine_shm.f_blocks * machine_shm.f_frsize != GIB
    assert sorted(p.name for p in host.iterdir()) == ["hello.txt"]
    assert not [p for p in (plane.home / "pods").rglob("rank-*")]
    # The checkpoint directory works beside the mounts.
    saved = plane.home / "checkpoints" / "vols"
    assert sorted(p.name for p in saved.iterdir()) == ["step-0", "step-1"]


@pytest.mark.parametrize(("volume", "mount_path", "field", "words"), [
    ({"name": "v", "configMap": {"name": "conf"}}, "/mnt", "volumes[0].configMap",
     "a ConfigMap is a Kubernetes object"),
    ({"name": "v", "persistentVolumeClaim": {"claimName": "data"}}, "/mnt",
     "volumes[0].persistentVolumeClaim", "give the data as a hostPath"),
    ({"name": "v", "nfs": {"server": "nfs.example.com", "path": "/exports"}}, "/mnt",
     "volumes[0].nfs", "mount the export on this machine"),
    ({"name": "v", "emptyDir": {}}, "/proc/x", "podSets[0].mounts[0].mountPath",
     "mount the volume at another path"),
    ({"name": "v", "emptyDir": {}}, "HOME", "podSets[0].mounts[0].mountPath",
     "the plane's directory"),
])
def test_what_the_plane_cannot_honour_is_refused_at_submit(
        refusing_plane: ControlPlane, volume: dict[str, Any], mount_path: str, field: str,
        words: str) -> None:
    plane = refusing_plane
    mount_path = str(plane.home) if mount_path == "HOME" else mount_path
    spec = py_job("refused", "print(1)", volumes=[volume],
                  pod_set={"mounts": [{"name": "v", "mountPath": mount_path}]})
    response = plane.api.post("/v1/jobs", json=spec)
    assert response.status_code == 400, response.text
    error = response.json()["error"]
    assert error["field"] == field
    assert words in error["message"] + error["fix"]
    assert plane.api.get("/v1/jobs").json()["items"] == []
