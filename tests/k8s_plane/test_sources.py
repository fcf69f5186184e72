"""A job's code on Kubernetes: an init container fills the emptyDir each pod starts in."""

from __future__ import annotations

import base64
import hashlib
import json
import os
import subprocess
from pathlib import Path
from typing import Any

import pytest

from phalanx.compute.base import AttemptSecrets, PodCredential
from phalanx.compute.kubernetes.credentials import MOUNT_PATH
from phalanx.compute.kubernetes.sources import (
    GIT_KEY_MOUNT,
    GIT_KEY_VOLUME,
    INIT_CONTAINER,
    SOURCE_VOLUME,
)
from phalanx.errors import SpecError
from phalanx.spec.resources import JobSpec
from tests.gitssh import FAKE_KEY, bare_repo, calls, fake_ssh
from tests.k8s_plane.conftest import RUNS, PlaneFactory
from tests.k8s_plane.fake_apiserver import FakeAPIServer
from tests.k8s_plane.helpers import admit, gang, pods

API_URL = "http://phalanx.phalanx-system.svc:7780"
KEY = "phj_" + "cd" * 32 + "_1_src"
SHA = "ab" * 32
COMMIT = "0123456789abcdef0123456789abcdef01234567"


def _validate(obj: dict[str, Any]) -> None:
    """What the schema of the newest Kubernetes says of the pod as it was sent."""
    validate = pytest.importorskip("kubernetes_validate")
    request = {k: v for k, v in obj.items() if k != "status"}
    request["metadata"] = {k: v for k, v in obj["metadata"].items()
                           if k not in ("uid", "resourceVersion", "creationTimestamp")}
    validate.validate(request, validate.utils.latest_version(), strict=True)


def _with(job: JobSpec, **update: Any) -> JobSpec:
    return JobSpec.model_validate({**job.to_dict(), **update})


def _env(container: dict[str, Any]) -> dict[str, str]:
    return {e["name"]: e["value"] for e in container["env"]}


def test_a_workdir_is_fetched_by_an_init_container_with_the_attempts_credential(
        api: FakeAPIServer, make_plane: PlaneFactory) -> None:
    api.add_node("gpu-1", cpu="32", memory="256Gi", gpus=8)
    plane = make_plane()
    job = _with(gang(replicas=2, workingDir="src", cpuPinning="exclusive"),
                workdir={"sha256": SHA, "size": 10})
    plane.launch(job, 1, admit(job, ["gpu-1", "gpu-1"]), credential=PodCredential(API_URL, KEY))

    for pod in pods(api, "ddp"):
        _validate(pod)
        spec = pod["spec"]
        main = spec["containers"][0]
        [init] = [c for c in spec["initContainers"] if c["name"] == INIT_CONTAINER]
        assert {"name": SOURCE_VOLUME, "emptyDir": {}} in spec["volumes"]
        assert {"name": SOURCE_VOLUME, "mountPath": "/workdir"} in main["volumeMounts"]
        assert {"name": SOURCE_VOLUME, "mountPath": "/workdir"} in init["volumeMounts"]
        assert main["workingDir"] == "/workdir/src"  # a relative workingDir is inside it
        env = _env(init)
        assert env["PHALANX_WORKDIR_SHA256"] == SHA and env["PHALANX_URL"] == API_URL
        assert env["PHALANX_API_KEY_FILE"].startswith(MOUNT_PATH)
        assert {"name": "phalanx-api", "mountPath": MOUNT_PATH, "readOnly": True} \
            in init["volumeMounts"]
        assert KEY not in str(pod)  # the key stays in the attempt's Secret
        # A Guaranteed pod (pinned CPUs) stays Guaranteed with its init container.
        assert init["resources"]["requests"] == init["resources"]["limits"] \
            == {"cpu": "2", "memory": "4Gi"}


def test_a_git_commit_is_cloned_by_an_init_container(
        api: FakeAPIServer, make_plane: PlaneFactory) -> None:
    api.add_node("gpu-1", cpu="32", memory="256Gi", gpus=8)
    plane = make_plane(git_image="registry.example.com/git:2")
    job = _with(gang(name="from-git", replicas=1),
                git={"repo": "https://example.com/ml.git", "ref": "main", "commit": COMMIT})
    plane.launch(job, 1, admit(job, ["gpu-1"]), credential=PodCredential(API_URL, KEY))

    [pod] = pods(api, "from-git")
    _validate(pod)
    [init] = [c for c in pod["spec"]["initContainers"] if c["name"] == INIT_CONTAINER]
    assert init["image"] == "registry.example.com/git:2"
    assert _env(init)["GIT_COMMIT"] == COMMIT
    assert _env(init)["GIT_REPO"] == "https://example.com/ml.git"
    assert pod["spec"]["containers"][0]["workingDir"] == "/workdir"


def test_a_pod_without_a_source_has_no_init_container_of_it(
        api: FakeAPIServer, make_plane: PlaneFactory) -> None:
    api.add_node("gpu-1", cpu="32", memory="256Gi", gpus=8)
    plane = make_plane()
    job = gang(name="plain", replicas=1, workingDir="/opt/app")
    plane.launch(job, 1, admit(job, ["gpu-1"]), credential=PodCredential(API_URL, KEY))
    [pod] = pods(api, "plain")
    assert not [c for c in pod["spec"].get("initContainers", [])
                if c["name"] == INIT_CONTAINER]
    assert pod["spec"]["containers"][0]["workingDir"] == "/opt/app"


def test_a_workdir_without_a_credential_is_refused_naming_the_field(
        api: FakeAPIServer, make_plane: PlaneFactory) -> None:
    api.add_node("gpu-1", cpu="32", memory="256Gi", gpus=8)
    plane = make_plane()
    job = _with(gang(name="nokey", replicas=1), workdir={"sha256": SHA})
    with pytest.raises(SpecError) as caught:
        plane.launch(job, 1, admit(job, ["gpu-1"]))
    assert caught.value.field == "workdir"


def test_a_relative_working_dir_without_a_source_is_refused_at_submit(
        make_plane: PlaneFactory) -> None:
    plane = make_plane()
    with pytest.raises(SpecError) as caught:
        plane.check_job(gang(name="rel", replicas=1, workingDir="src"))
    assert caught.value.field == "podSets[0].workingDir"
    plane.check_job(_with(gang(name="rel", replicas=1, workingDir="src"),
                          workdir={"sha256": SHA}))  # inside the job's code: fine


def test_a_git_key_reaches_only_the_init_container_that_clones_and_it_clones_with_it(
        api: FakeAPIServer, make_plane: PlaneFactory, tmp_path: Path,
        monkeypatch: pytest.MonkeyPatch) -> None:
    """The key of git.sshKeySecret is a Secret of the attempt that only the init container
    mounts; its script, run here with the env the pod gets, clones over ssh with the key."""
    api.add_node("gpu-1", cpu="32", memory="256Gi", gpus=8)
    plane = make_plane()
    bin_dir, log = fake_ssh(tmp_path / "ssh")
    bare, commit = bare_repo(tmp_path, {"version.txt": "v1\n"})
    repo = f"ssh://git.example{bare}"
    key = FAKE_KEY % "k8s"
    job = _with(gang(name="private", replicas=1),
                git={"repo": repo, "ref": "main", "commit": commit,
                     "sshKeySecret": "team-a/deploy"})
    values = AttemptSecrets(git={"ssh-privatekey": key.encode()})
    plane.launch(job, 1, admit(job, ["gpu-1"]), credential=PodCredential(API_URL, KEY, values))

    [anchor] = api.list("configmaps", RUNS)
    name = anchor["metadata"]["name"]
    [secret] = [s for s in api.list("secrets", RUNS) if s["metadata"]["name"] == f"{name}-git"]
    _validate(secret)
    assert secret["type"] == "kubernetes.io/ssh-auth"
    assert base64.b64decode(secret["data"]["ssh-privatekey"]).decode() == key
    assert secret["metadata"]["ownerReferences"][0]["uid"] == anchor["metadata"]["uid"]
    [pod] = pods(api, "private")
    _validate(pod)
    assert key not in json.dumps(pod)
    [init] = [c for c in pod["spec"]["initContainers"] if c["name"] == INIT_CONTAINER]
    main = pod["spec"]["containers"][0]
    [volume] = [v for v in pod["spec"]["volumes"] if v["name"] == GIT_KEY_VOLUME]
    assert volume["secret"] == {"secretName": f"{name}-git", "defaultMode": 0o400}
    assert {"name": GIT_KEY_VOLUME, "mountPath": GIT_KEY_MOUNT, "readOnly": True} \
        in init["volumeMounts"]
    assert GIT_KEY_VOLUME not in json.dumps(main)  # the job's own container never sees it

    # The init container's script, with the pod's env but this machine's paths.
    mounted = tmp_path / "mounted"
    mounted.mkdir()
    (mounted / "ssh-privatekey").write_text(key)
    (mounted / "ssh-privatekey").chmod(0o400)
    workdir = tmp_path / "workdir"
    env = {**_env(init), "GIT_SSH_KEY_DIR": str(mounted), "WORKDIR": str(workdir),
           "PATH": f"{bin_dir}{os.pathsep}{os.environ['PATH']}", "HOME": str(tmp_path)}
    done = subprocess.run(init["command"], env=env, capture_output=True, text=True,
                          timeout=60, check=False)
    assert done.returncode == 0, done.stderr
    assert (workdir / "version.txt").read_text() == "v1\n"
    [call, *_] = calls(log)
    assert call["key"]["path"] == str(mounted / "ssh-privatekey")
    assert call["key"]["sha256"] == hashlib.sha256(key.encode()).hexdigest()
    assert "IdentitiesOnly=yes" in call["options"]
    assert "StrictHostKeyChecking=accept-new" in call["options"]


def test_a_git_key_without_a_credential_is_refused_naming_the_field(
        api: FakeAPIServer, make_plane: PlaneFactory) -> None:
    api.add_node("gpu-1", cpu="32", memory="256Gi", gpus=8)
    plane = make_plane()
    job = _with(gang(name="nokey", replicas=1), git={
        "repo": "ssh://git.example/x.git", "commit": COMMIT, "sshKeySecret": "deploy"})
    with pytest.raises(SpecError) as caught:
        plane.launch(job, 1, admit(job, ["gpu-1"]))
    assert caught.value.field == "git.sshKeySecret"
