"""Checkpoint directories and the job's termination grace on the Kubernetes plane (over
the API mock): pods mount the job's directory on the configured volume, get the job's
grace, and a job that ends has its directory removed by a cleanup pod."""

from __future__ import annotations

import pytest

from phalanx.compute.kubernetes.checkpoints import CLEANUP_LABEL, volume_source
from phalanx.errors import SpecError
from tests.k8s_plane.conftest import RUNS, PlaneFactory
from tests.k8s_plane.fake_apiserver import FakeAPIServer
from tests.k8s_plane.helpers import admit, env_of, gang, pods

CLAIM = {"persistentVolumeClaim": {"claimName": "ckpt"}}


def test_pods_mount_the_jobs_directory_and_get_its_grace(
        api: FakeAPIServer, make_plane: PlaneFactory) -> None:
    api.add_node("gpu-1", cpu="32", memory="256Gi", gpus=8)
    plane = make_plane(checkpoint_volume=CLAIM)
    job = gang(replicas=2).model_copy(update={"termination_grace": 90.0})
    plane.launch(job, 1, admit(job, ["gpu-1", "gpu-1"]))
    for pod in pods(api, "ddp"):
        spec = pod["spec"]
        assert spec["terminationGracePeriodSeconds"] == 90
        assert spec["volumes"] == [{"name": "phalanx-checkpoints", **CLAIM}]
        [mount] = spec["containers"][0]["volumeMounts"]
        assert mount == {"name": "phalanx-checkpoints", "mountPath": "/phalanx/checkpoints",
                         "subPath": "ddp"}
        assert env_of(pod)["PHALANX_CHECKPOINT_DIR"] == "/phalanx/checkpoints"


def test_without_a_volume_pods_get_no_checkpoint_directory(
        api: FakeAPIServer, make_plane: PlaneFactory) -> None:
    api.add_node("gpu-1", cpu="32", memory="256Gi", gpus=8)
    plane = make_plane()
    job = gang(replicas=1)
    plane.launch(job, 1, admit(job, ["gpu-1"]))
    [pod] = pods(api, "ddp")
    assert "volumes" not in pod["spec"] and "PHALANX_CHECKPOINT_DIR" not in env_of(pod)
    assert "terminationGracePeriodSeconds" not in pod["spec"]  # the cluster's default
    plane.release_checkpoints("ddp")
    assert not [p for p in api.list("pods", RUNS) if CLEANUP_LABEL in p["metadata"]["labels"]]


def test_a_finished_jobs_directory_is_removed_by_a_cleanup_pod(
        api: FakeAPIServer, make_plane: PlaneFactory) -> None:
    plane = make_plane(checkpoint_volume=CLAIM)
    plane.release_checkpoints("ddp")
    [cleanup] = [p for p in api.list("pods", RUNS) if CLEANUP_LABEL in p["metadata"]["labels"]]
    container = cleanup["spec"]["containers"][0]
    assert container["command"] == ["rm", "-rf", "--", "/phalanx/checkpoints/ddp"]
    assert container["volumeMounts"] == [{"name": "phalanx-checkpoints",
                                          "mountPath": "/phalanx/checkpoints"}]
    assert cleanup["spec"]["volumes"] == [{"name": "phalanx-checkpoints", **CLAIM}]
    api.finish_pod(RUNS, cleanup["metadata"]["name"])
    plane.release_checkpoints("other")  # the finished cleanup goes; the new one comes
    names = sorted(p["metadata"]["name"] for p in api.list("pods", RUNS))
    assert names == ["other-ckpt-cleanup"]


def test_a_bad_volume_setting_names_the_variable() -> None:
    with pytest.raises(SpecError) as raised:
        volume_source('{"emptyDir": {}}', "PHALANX_K8S_CHECKPOINT_VOLUME")
    assert raised.value.field == "PHALANX_K8S_CHECKPOINT_VOLUME"
    assert volume_source('{"hostPath": {"path": "/ckpt"}}', "x") == {"hostPath": {"path": "/ckpt"}}
