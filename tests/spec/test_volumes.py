"""Volumes, mounts and shm in a job document: Kubernetes' spelling, and every refusal names
the field and says what to do."""

from __future__ import annotations

from typing import Any

import pytest

from phalanx.errors import SpecError
from phalanx.spec import load_jobs_yaml, validate
from phalanx.spec.resources import JobSpec
from phalanx.spec.volumes import source_kinds

EVERY_KIND = """
name: train
volumes:
- {name: scratch, emptyDir: {medium: Memory, sizeLimit: 2Gi}}
- {name: data, hostPath: {path: /data/imagenet/, type: Directory}}
- {name: ckpt, persistentVolumeClaim: {claimName: ckpt, readOnly: false}}
- {name: conf, configMap: {name: train-conf, items: [{key: a.yaml, path: conf/a.yaml}]}}
- {name: token, secret: {secretName: team-a/creds}}
- {name: shared, nfs: {server: nfs.example.com, path: /exports/team, readOnly: true}}
podSets:
- command: [python, train.py]
  shm: 16Gi
  volumeMounts:
  - {name: data, mountPath: /mnt/data, readOnly: true}
  - {name: scratch, mountPath: /scratch, subPath: run1}
"""


def job(volumes: list[dict[str, Any]], **pod_set: Any) -> dict[str, Any]:
    return {"name": "j", "volumes": volumes, "podSets": [{"command": ["x"], **pod_set}]}


def refusal(document: dict[str, Any]) -> SpecError:
    with pytest.raises(SpecError) as caught:
        validate(JobSpec, document)
    return caught.value


def test_every_kind_reads_as_kubernetes_writes_it() -> None:
    [spec] = load_jobs_yaml(EVERY_KIND, "job.yaml")
    assert [v.kind for v in spec.volumes] == source_kinds()
    assert spec.volumes[1].host_path is not None
    assert spec.volumes[1].host_path.path == "/data/imagenet"  # normalised
    assert spec.volumes[0].to_kubernetes() == {
        "name": "scratch", "emptyDir": {"medium": "Memory", "sizeLimit": "2Gi"}}
    assert spec.volumes[4].secret is not None
    assert spec.volumes[4].secret.secret_name == "team-a/creds"  # a Phalanx secret's name
    assert spec.volumes[5].to_kubernetes() == {
        "name": "shared", "nfs": {"server": "nfs.example.com", "path": "/exports/team",
                                  "readOnly": True}}
    pod_set = spec.pod_sets[0]
    assert pod_set.shm == 16 * 2**30 * 1000
    # volumeMounts is read as mounts, and shown as mounts.
    shown = spec.to_dict()["podSets"][0]
    assert "volumeMounts" not in shown and shown["shm"] == "16Gi"
    assert [(m["name"], m["mountPath"]) for m in shown["mounts"]] == [
        ("data", "/mnt/data"), ("scratch", "/scratch")]
    assert validate(JobSpec, spec.to_dict()) == spec  # the stored form reads back the same


@pytest.mark.parametrize(("volume", "field", "words"), [
    ({"name": "v"}, "volumes[0]", "has none as its source (give exactly one of emptyDir"),
    ({"name": "v", "emptyDir": {}, "hostPath": {"path": "/x"}}, "volumes[0]",
     "has emptyDir and hostPath as its source"),
    ({"name": "phalanx-shm", "emptyDir": {}}, "volumes[0].name", "choose another name"),
    ({"name": "Data", "emptyDir": {}}, "volumes[0].name", "is not a volume name"),
    ({"name": "v", "hostPath": {"path": "data"}}, "volumes[0].hostPath.path",
     "is not an absolute path"),
    ({"name": "v", "hostPath": {"path": "/d", "type": "Folder"}}, "volumes[0].hostPath.type",
     ""),
    ({"name": "v", "emptyDir": {"medium": "Disk"}}, "volumes[0].emptyDir.medium", ""),
    ({"name": "v", "emptyDir": {"sizeLimit": "lots"}}, "volumes[0].emptyDir.sizeLimit", ""),
    ({"name": "v", "persistentVolumeClaim": {}}, "volumes[0].persistentVolumeClaim.claimName",
     ""),
    ({"name": "v", "configMap": {"name": "c", "items": [{"key": "k", "path": "../x"}]}},
     "volumes[0].configMap.items[0].path", "without '..'"),
    ({"name": "v", "nfs": {"server": "s", "path": "/e", "mountOptions": "hard"}},
     "volumes[0].nfs.mountOptions", ""),
])
def test_a_bad_volume_is_refused_naming_its_field(volume: dict[str, Any], field: str,
                                                  words: str) -> None:
    error = refusal(job([volume]))
    assert error.field == field
    assert words in str(error)


@pytest.mark.parametrize(("pod_set", "field", "words"), [
    ({"mounts": [{"name": "v", "mountPath": "data"}]}, "podSets[0].mounts[0].mountPath",
     "is not an absolute path"),
    ({"mounts": [{"name": "v", "mountPath": "/d", "subPath": "../up"}]},
     "podSets[0].mounts[0].subPath", "without '..'"),
    ({"mounts": [{"name": "v", "mountPath": "/d", "subPath": "/abs"}]},
     "podSets[0].mounts[0].subPath", "relative path"),
    ({"mounts": [{"name": "other", "mountPath": "/d"}]}, "volumes",
     "podSets[0].mounts[0] mounts volume 'other', which the job does not list (its volumes: "
     "v) (add it to volumes or fix the name)"),
    ({"mounts": [{"name": "v", "mountPath": "/d"}, {"name": "v", "mountPath": "/d/"}]},
     "podSets[0].mounts", "mounts[1] mounts a second volume at /d"),
    ({"shm": "1Gi", "mounts": [{"name": "v", "mountPath": "/dev/shm"}]}, "podSets[0].shm",
     "shm and mounts[0] both mount /dev/shm"),
    ({"shm": "0"}, "podSets[0].shm", ""),
    ({"mounts": [{"name": "v", "path": "/d"}]}, "podSets[0].mounts[0].mountPath", ""),
])
def test_a_bad_mount_is_refused_naming_its_field(pod_set: dict[str, Any], field: str,
                                                 words: str) -> None:
    error = refusal(job([{"name": "v", "emptyDir": {}}], **pod_set))
    assert error.field == field
    assert words in str(error)


def test_a_mount_without_volumes_is_refused() -> None:
    error = refusal({"name": "j", "podSets": [{"command": ["x"], "mounts": [
        {"name": "v", "mountPath": "/d"}]}]})
    assert error.field == "volumes" and "(its volumes: none)" in str(error)


def test_two_volumes_of_one_name_are_refused() -> None:
    error = refusal(job([{"name": "v", "emptyDir": {}}, {"name": "v", "emptyDir": {}}]))
    assert error.field == "volumes"
    assert "two volumes are named 'v' (give each volume its own name)" in str(error)
