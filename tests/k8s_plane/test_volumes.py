"""A job's volumes, mounts and shm on Kubernetes pods (over the API mock): as Kubernetes
has them, beside the plane's own mounts, and valid by the Kubernetes OpenAPI schema."""

from __future__ import annotations

import pytest

from phalanx.compute.base import PodCredential
from phalanx.errors import SpecError
from phalanx.spec.resources import JobSpec
from tests.k8s_plane.conftest import PlaneFactory
from tests.k8s_plane.fake_apiserver import FakeAPIServer
from tests.k8s_plane.helpers import IMAGE, admit, pods
from tests.k8s_plane.test_launch import _validate

CLAIM = {"persistentVolumeClaim": {"claimName": "ckpt"}}
VOLUMES = [
    {"name": "scratch", "emptyDir": {"medium": "Memory", "sizeLimit": "2Gi"}},
    {"name": "cache", "emptyDir": {}},
    {"name": "data", "hostPath": {"path": "/data/imagenet", "type": "Directory"}},
    {"name": "ckpt", "persistentVolumeClaim": {"claimName": "team-ckpt"}},
    {"name": "conf", "configMap": {"name": "train-conf", "items": [
        {"key": "a.yaml", "path": "conf/a.yaml", "mode": 0o644}], "defaultMode": 0o444}},
    {"name": "shared", "nfs": {"server": "nfs.example.com", "path": "/exports/team",
                               "readOnly": True}},
    {"name": "unused", "emptyDir": {}},
]
MOUNTS = [
    {"name": "scratch", "mountPath": "/scratch", "subPath": "run1"},
    {"name": "cache", "mountPath": "/root/.cache"},
    {"name": "data", "mountPath": "/mnt/data", "readOnly": True},
    {"name": "ckpt", "mountPath": "/ckpt"},
    {"name": "conf", "mountPath": "/etc/train", "readOnly": True},
    {"name": "shared", "mountPath": "/mnt/shared"},
]


def job(**pod_set: object) -> JobSpec:
    return JobSpec.model_validate({"name": "vols", "kind": "torch", "volumes": VOLUMES,
                                   "podSets": [{
                                       "name": "worker", "replicas": 2, "image": IMAGE,
                                       "resources": {"cpu": "2", "memory": "4Gi"},
                                       "command": ["torchrun", "train.py"], **pod_set}]})


def test_pods_get_every_kind_of_volume_and_shm(api: FakeAPIServer,
                                               make_plane: PlaneFactory) -> None:
    api.add_node("gpu-1", cpu="32", memory="256Gi", gpus=8)
    plane = make_plane(checkpoint_volume=CLAIM)
    spec = job(shm="16Gi", volumeMounts=MOUNTS)
    plane.check_job(spec)
    plane.launch(spec, 1, admit(spec, ["gpu-1", "gpu-1"]),
                 credential=PodCredential("http://phalanx:7780", "phj_" + "ab" * 32 + "_1_vols"))
    for pod in pods(api, "vols"):
        _validate(pod)
        volumes = {v["name"]: v for v in pod["spec"]["volumes"]}
        mounts = {m["name"]: m for m in pod["spec"]["containers"][0]["volumeMounts"]}
        for volume in VOLUMES[:-1]:  # as written, defaults left out; the unused one not at all
            assert volumes[volume["name"]] == volume
        assert "unused" not in volumes
        for mount in MOUNTS:
            assert mounts[mount["name"]] == mount
        assert volumes["phalanx-shm"] == {"name": "phalanx-shm", "emptyDir": {
            "medium": "Memory", "sizeLimit": "16Gi"}}
        assert mounts["phalanx-shm"] == {"name": "phalanx-shm", "mountPath": "/dev/shm"}
        # The plane's own volumes stay beside the job's.
        assert {"phalanx-checkpoints", "phalanx-api"} <= set(volumes)


def test_a_pod_set_without_mounts_gets_no_volumes(api: FakeAPIServer,
                                                  make_plane: PlaneFactory) -> None:
    api.add_node("gpu-1", cpu="32", memory="256Gi", gpus=8)
    plane = make_plane()
    spec = job()
    plane.launch(spec, 1, admit(spec, ["gpu-1"]))
    [pod] = pods(api, "vols")
    _validate(pod)
    assert "volumes" not in pod["spec"]
    assert "volumeMounts" not in pod["spec"]["containers"][0]


@pytest.mark.parametrize("path", ["/phalanx/checkpoints", "/phalanx", "/var/run/secrets",
                                  "/phalanx-fence/x"])
def test_a_mount_over_the_planes_own_is_refused_at_submit_and_launch(
        api: FakeAPIServer, make_plane: PlaneFactory, path: str) -> None:
    api.add_node("gpu-1", cpu="32", memory="256Gi", gpus=8)
    plane = make_plane()
    spec = job(mounts=[{"name": "cache", "mountPath": path}])
    for attempt in (lambda: plane.check_job(spec),
                    lambda: plane.launch(spec, 1, admit(spec, ["gpu-1"]))):
        with pytest.raises(SpecError) as caught:
            attempt()
        assert caught.value.field == "podSets[0].mounts[0].mountPath"
        assert "Phalanx's own mount" in str(caught.value)
    assert pods(api, "vols") == []
