"""A secret volume on the local plane: the secret's keys as files at the mount's
mountPath, in the pod's own mount namespace, read-only, 0400 and the pod's uid's; a
subPath names one key; nothing is left once the plane forgets the attempt."""

from __future__ import annotations

import json
import os
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from phalanx.compute.base import AttemptSecrets, PodCredential
from phalanx.compute.local import LocalPlane
from phalanx.compute.local.volumes import LocalVolumes
from phalanx.errors import SpecError
from phalanx.spec.resources import JobSpec
from tests.compute.conftest import NODE, admit, all_done, wait_pods
from tests.compute.test_pod_uids import SYSTEM_PYTHON, free_uids

# The pod reports what it sees at the mountPaths given as its arguments.
POD = """
import errno, json, os, stat, sys
directory, single = sys.argv[1], sys.argv[2]
path = os.path.join(directory, "token.txt")
info = os.stat(path)
try:
    open(os.path.join(directory, "new"), "w")
    written = "yes"
except OSError as exc:
    written = errno.errorcode[exc.errno]
print("RESULT " + json.dumps({
    "files": sorted(os.listdir(directory)), "token": open(path).read(),
    "mode": oct(stat.S_IMODE(info.st_mode)), "mine": info.st_uid == os.getuid(),
    "uid": os.getuid(), "written": written, "single": open(single).read(),
}), flush=True)
"""


@pytest.fixture
def reachable_dir() -> Iterator[Path]:
    """A directory the pods' uids may enter (pytest's tmp_path is root's alone)."""
    path = Path(tempfile.mkdtemp(prefix="phalanx-secret-mounts-", dir="/var/tmp"))
    path.chmod(0o755)
    yield path
    shutil.rmtree(path, ignore_errors=True)


def secret_job(target: Path, single: Path) -> JobSpec:
    return JobSpec.model_validate({
        "name": "sv",
        "volumes": [{"name": "creds", "secret": {"secretName": "team-a/creds"}}],
        "podSets": [{"name": "w", "command": [SYSTEM_PYTHON, "-c", POD, str(target),
                                              str(single)],
                     "mounts": [{"name": "creds", "mountPath": str(target)},
                                {"name": "creds", "mountPath": str(single),
                                 "subPath": "user"}]}]})


@pytest.mark.skipif(os.geteuid() != 0, reason="mount namespaces and pod uids need root")
def test_a_secret_volume_is_at_its_mount_path_read_only_and_the_pods_own(
        tmp_path: Path, reachable_dir: Path) -> None:
    target, single = reachable_dir / "creds", reachable_dir / "user.txt"
    target.mkdir()
    single.write_text("the machine's own file\n")
    uids = free_uids(1)
    plane = LocalPlane(tmp_path / "home", node_name=NODE, gpus=[], pod_uids=uids,
                       control_plane="cp-secret-volumes")
    try:
        spec = secret_job(target, single)
        values = AttemptSecrets(volumes={"creds": {"token.txt": b"s3cr3t",
                                                   "user": b"alice"}})
        plane.launch(spec, 1, admit(spec), credential=PodCredential(
            "http://127.0.0.1:1", "phj_key", values))
        [pod] = wait_pods(plane, all_done)
        log = plane.logs.path("sv", pod.ref.name).read_text()
        assert pod.exit_code == 0, log
        [line] = [x for x in log.splitlines() if x.startswith("RESULT ")]
        assert json.loads(line.removeprefix("RESULT ")) == {
            "files": ["token.txt", "user"], "token": "s3cr3t", "mode": "0o400",
            "mine": True, "uid": uids.first, "written": "EROFS", "single": "alice"}
        # The mounts were the pod's alone: the machine's paths are as they were.
        assert list(target.iterdir()) == []
        assert single.read_text() == "the machine's own file\n"
        plane.forget("sv", 1)
        assert not plane.credentials.directory("sv", 1).exists()
    finally:
        for pod in plane.observe():
            plane.terminate(pod.ref.job, pod.ref.attempt, grace_seconds=0)
        wait_pods(plane, lambda pods: all(p.phase.done for p in pods))
        for pod in plane.observe():
            plane.forget(pod.ref.job, pod.ref.attempt)
        plane.release_checkpoints("sv")
        plane.close()


def test_a_secret_volume_without_its_values_or_with_an_unknown_key_is_refused(
        tmp_path: Path) -> None:
    target, single = tmp_path / "creds", tmp_path / "user.txt"
    target.mkdir()
    single.write_text("")
    volumes = LocalVolumes([tmp_path / "home"], namespaces=True)
    spec = secret_job(target, single)
    volumes.check(spec)  # a kind the local plane honours
    with pytest.raises(SpecError) as caught:
        volumes.plan(spec, 0, tmp_path / "pod", None)
    assert caught.value.field == "volumes[0].secret"
    with pytest.raises(SpecError) as caught:
        volumes.plan(spec, 0, tmp_path / "pod", None, secrets_dir=tmp_path / "s",
                     secret_keys={"creds": ["token.txt"]})
    assert caught.value.field == "podSets[0].mounts[1].subPath"
    assert "token.txt" in (caught.value.fix or "")
    plan = volumes.plan(spec, 0, tmp_path / "pod", None, secrets_dir=tmp_path / "s",
                        secret_keys={"creds": ["token.txt", "user"]})
    assert plan["mounts"] == [
        {"source": str(tmp_path / "s" / "creds"), "target": str(target), "readOnly": True,
         "create": False},
        {"source": str(tmp_path / "s" / "creds" / "user"), "target": str(single),
         "readOnly": True, "create": False}]


def test_a_git_key_travels_to_a_worker_and_is_never_printed() -> None:
    """What the desired state carries for a worker's plane: the git key among the values,
    which no repr shows (a plan or attempt may be logged)."""
    from phalanx.compute.base import AttemptSecrets

    key = b"-----BEGIN OPENSSH PRIVATE KEY-----\nsecret-bytes\n"
    values = AttemptSecrets(env={"w": {"T": "tv"}}, git={"ssh-privatekey": key})
    wire = values.to_wire()
    assert AttemptSecrets.from_wire(wire) == values
    assert AttemptSecrets.from_wire(wire).git == {"ssh-privatekey": key}
    assert "secret-bytes" not in repr(values) and "ssh-privatekey" in repr(values)
    assert AttemptSecrets(git={"ssh-privatekey": key})  # a key alone is something to send
