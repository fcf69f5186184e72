"""The local plane's volumes: what it checks at launch (the machine's paths), a Memory
emptyDir's tmpfs, and a plane without mount namespaces refusing mounts at submit."""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Any

import pytest

from phalanx.compute.local import LocalPlane
from phalanx.compute.local.users import PodUser
from phalanx.compute.local.volumes import LocalVolumes, reachable
from phalanx.errors import SpecError
from phalanx.spec.resources import JobSpec
from tests.compute.conftest import admit, all_done, wait_pods

needs_root = pytest.mark.skipif(os.geteuid() != 0, reason="mount namespaces need root")
NOBODY = PodUser(uid=65534, gid=65534, groups=(), name="nobody", home="/")


def job(code: str, volumes: list[dict[str, Any]], mounts: list[dict[str, Any]],
        **pod_set: Any) -> JobSpec:
    return JobSpec.model_validate({"name": "v", "volumes": volumes, "podSets": [
        {"name": "w", "command": [sys.executable, "-c", code], "mounts": mounts, **pod_set}]})


def launch_refusal(plane: LocalPlane, spec: JobSpec) -> SpecError:
    with pytest.raises(SpecError) as caught:
        plane.launch(spec, 1, admit(spec))
    assert plane.observe() == []  # nothing started
    return caught.value


@needs_root
def test_a_memory_emptydir_is_a_tmpfs_of_its_size_limit(plane: LocalPlane,
                                                        tmp_path: Path) -> None:
    target, out = tmp_path / "fast", tmp_path / "out"
    target.mkdir()
    out.mkdir()
    code = ("import os, sys; s = os.statvfs(sys.argv[1]); "
            "open(sys.argv[2] + '/size', 'w').write(str(s.f_blocks * s.f_frsize))")
    spec = job(code, [{"name": "fast", "emptyDir": {"medium": "Memory", "sizeLimit": "64Mi"}},
                      {"name": "out", "hostPath": {"path": str(out)}}],
               [{"name": "fast", "mountPath": str(target), "subPath": "a/b"},
                {"name": "out", "mountPath": str(out)}])
    spec.pod_sets[0].command += [str(target), str(out)]
    plane.launch(spec, 1, admit(spec))
    [pod] = wait_pods(plane, all_done)
    assert pod.exit_code == 0, plane.logs.path("v", pod.ref.name).read_text()
    assert int((out / "size").read_text()) == 64 * 2**20


@needs_root
@pytest.mark.parametrize(("case", "field", "words"), [
    ("missing host path", "volumes[0].hostPath.path", "does not exist on this machine"),
    ("missing mount path", "podSets[0].mounts[0].mountPath", "mkdir -p"),
    ("file over directory", "podSets[0].mounts[0].mountPath", "is a file and mountPath"),
    ("wrong type", "volumes[0].hostPath.path", "is no Directory"),
    ("subPath out", "volumes[0].hostPath.path", "leads out of hostPath"),
])
def test_what_the_machine_lacks_is_refused_at_launch(
        plane: LocalPlane, tmp_path: Path, case: str, field: str, words: str) -> None:
    host, target = tmp_path / "host", tmp_path / "target"
    host.mkdir()
    target.mkdir()
    (host / "file").write_text("x")
    (host / "out").symlink_to("/etc")
    source: dict[str, Any] = {"path": str(host)}
    mount: dict[str, Any] = {"name": "h", "mountPath": str(target)}
    if case == "missing host path":
        source["path"] = str(tmp_path / "nowhere")
    elif case == "missing mount path":
        mount["mountPath"] = str(tmp_path / "nowhere")
    elif case == "file over directory":
        mount["subPath"] = "file"
    elif case == "wrong type":
        source = {"path": str(host / "file"), "type": "Directory"}
    else:
        mount["subPath"] = "out"
    error = launch_refusal(plane, job("pass", [{"name": "h", "hostPath": source}], [mount]))
    assert error.field == field
    assert words in str(error)


@needs_root
def test_directory_or_create_makes_the_host_path(plane: LocalPlane, tmp_path: Path) -> None:
    target, made = tmp_path / "target", tmp_path / "made" / "here"
    target.mkdir()
    spec = job("import sys; open(sys.argv[1] + '/x', 'w').write('y')",
               [{"name": "h", "hostPath": {"path": str(made), "type": "DirectoryOrCreate"}}],
               [{"name": "h", "mountPath": str(target)}])
    spec.pod_sets[0].command.append(str(target))
    plane.launch(spec, 1, admit(spec))
    [pod] = wait_pods(plane, all_done)
    assert pod.exit_code == 0
    assert (made / "x").read_text() == "y" and list(target.iterdir()) == []


def test_a_host_path_behind_a_closed_directory_is_out_of_reach(tmp_path: Path) -> None:
    closed = tmp_path / "closed"
    (closed / "open").mkdir(parents=True)
    closed.chmod(0o700)
    assert reachable("/usr/bin", NOBODY)
    assert not reachable(str(closed / "open"), NOBODY)  # a bind would open a way around it
    assert reachable(str(closed / "open"), PodUser(uid=0, gid=0, groups=(), name="root",
                                                    home="/root"))


@pytest.mark.parametrize(("pod_set", "field"), [
    ({"shm": "1Gi"}, "podSets[0].shm"),
    ({"mounts": [{"name": "s", "mountPath": "/mnt"}]}, "podSets[0].mounts[0]"),
])
def test_without_namespaces_mounts_and_shm_are_refused_naming_the_field(
        tmp_path: Path, pod_set: dict[str, Any], field: str) -> None:
    volumes = LocalVolumes([tmp_path], namespaces=False)
    spec = JobSpec.model_validate({"name": "v", "volumes": [{"name": "s", "emptyDir": {}}],
                                   "podSets": [{"command": ["x"], **pod_set}]})
    with pytest.raises(SpecError) as caught:
        volumes.check(spec)
    assert caught.value.field == field
    assert "needs a control plane running as root" in str(caught.value)
    assert "Kubernetes plane" in (caught.value.fix or "")
    # A job without mounts runs there as before.
    volumes.check(JobSpec.model_validate({"name": "v", "podSets": [{"command": ["x"]}]}))


@needs_root
def test_a_job_points_its_checkpoint_directory_at_a_volume(plane: LocalPlane,
                                                           tmp_path: Path) -> None:
    disk, target = tmp_path / "disk", tmp_path / "ckpt"
    disk.mkdir()
    target.mkdir()
    code = ("import os; d = os.environ['PHALANX_CHECKPOINT_DIR']; os.makedirs(d); "
            "open(os.path.join(d, 'epoch-1.pt'), 'w').write('weights')")
    spec = job(code, [{"name": "ckpt", "hostPath": {"path": str(disk)}}],
               [{"name": "ckpt", "mountPath": str(target)}],
               env={"PHALANX_CHECKPOINT_DIR": f"{target}/train"})
    plane.launch(spec, 1, admit(spec))
    [pod] = wait_pods(plane, all_done)
    assert pod.exit_code == 0, plane.logs.path("v", pod.ref.name).read_text()
    assert (disk / "train" / "epoch-1.pt").read_text() == "weights"  # on the volume
    assert plane.last_checkpoint("v") is None  # the plane's own directory holds none


def test_a_disk_emptydir_with_a_size_limit_is_refused_naming_the_field(tmp_path: Path) -> None:
    volumes = LocalVolumes([tmp_path], namespaces=True)
    disk = {"name": "scratch", "emptyDir": {"sizeLimit": "1Gi"}}
    with pytest.raises(SpecError) as caught:
        volumes.check(job("pass", [disk], [{"name": "scratch", "mountPath": "/mnt"}]))
    assert caught.value.field == "volumes[0].emptyDir.sizeLimit"
    assert "medium: Memory" in (caught.value.fix or "")
    # A tmpfs of that size, or a disk directory with no limit, is taken.
    for source in ({"medium": "Memory", "sizeLimit": "1Gi"}, {}):
        volumes.check(job("pass", [{"name": "scratch", "emptyDir": source}],
                          [{"name": "scratch", "mountPath": "/mnt"}]))
