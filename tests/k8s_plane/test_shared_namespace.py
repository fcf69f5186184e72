"""Two control planes' workers in one runs namespace: a job of the same name and attempt
on each gets objects of its own, and neither adopts the other's (a worker acts only on
objects labelled with its plane and control plane)."""

from __future__ import annotations

import pytest

from phalanx.compute.kubernetes import KubernetesPlane, objects
from phalanx.compute.kubernetes.attempts import check_owner
from phalanx.errors import Conflict
from tests.k8s_plane.conftest import PlaneFactory, wait_until
from tests.k8s_plane.fake_apiserver import FakeAPIServer
from tests.k8s_plane.helpers import admit, gang, pods

FENCE_IMAGE = "registry.example.com/phalanx:1"


def test_same_job_of_two_control_planes_runs_under_names_of_its_own(
        api: FakeAPIServer, make_plane: PlaneFactory) -> None:
    api.add_node("gpu-1", cpu="32", memory="256Gi", gpus=8)
    ours: KubernetesPlane = make_plane(plane="gke", control_plane="cp-ours",
                                       fence_image=FENCE_IMAGE)
    theirs: KubernetesPlane = make_plane(plane="gke", control_plane="cp-theirs",
                                         fence_image=FENCE_IMAGE)
    job = gang("train", replicas=2)
    ours.launch(job, 1, admit(job, ["gpu-1", "gpu-1"]))
    theirs.launch(job, 1, admit(job, ["gpu-1", "gpu-1"]))
    made = wait_until(lambda: len(pods(api, "train")) == 4 and pods(api, "train"),
                      what="both control planes' pods")
    by_owner: dict[str, set[str]] = {}
    for pod in made:
        labels = pod["metadata"]["labels"]
        by_owner.setdefault(labels[objects.CONTROL_PLANE], set()).add(pod["metadata"]["name"])
    assert set(by_owner) == {"cp-ours", "cp-theirs"}
    assert not by_owner["cp-ours"] & by_owner["cp-theirs"]
    assert all(len(names) == 2 for names in by_owner.values())
    # Each sees its own two pods only; stopping ours leaves theirs.
    assert len([p for p in ours.observe() if p.ref.job == "train"]) == 2
    ours.terminate("train", 1, 0)
    wait_until(lambda: {p["metadata"]["labels"][objects.CONTROL_PLANE]
                        for p in pods(api, "train")} == {"cp-theirs"},
               what="our pods to go and theirs to stay")


def test_an_object_of_another_control_plane_under_our_name_is_not_adopted() -> None:
    ours = objects.identity_labels("gke", "cp-ours")
    found = {"kind": "Pod", "metadata": {"name": "train-1-main-0", "labels": {
        objects.JOB: "train", objects.ATTEMPT: "1",
        **objects.identity_labels("gke", "cp-theirs")}}}
    with pytest.raises(Conflict, match="another plane or control plane"):
        check_owner(found, "train", 1, ours)
    check_owner(found, "train", 1, objects.identity_labels("gke", "cp-theirs"))
    # An in-process plane's objects carry no identity, and its names no tag.
    assert objects.owner_tag(None) == ""
    assert objects.pod_name(objects.PodRef("train", 1, "main", 0, 0)) == "train-1-main-0"


def test_two_control_planes_keep_apart_their_jobs_checkpoint_directories(
        api: FakeAPIServer, make_plane: PlaneFactory) -> None:
    from phalanx.compute.kubernetes.checkpoints import CLEANUP_LABEL

    claim = {"persistentVolumeClaim": {"claimName": "ckpt"}}
    api.add_node("gpu-1", cpu="32", memory="256Gi", gpus=8)
    planes = {cp: make_plane(plane="gke", control_plane=cp, fence_image=FENCE_IMAGE,
                             checkpoint_volume=claim) for cp in ("cp-ours", "cp-theirs")}
    job = gang("train", replicas=1)
    for plane in planes.values():
        plane.launch(job, 1, admit(job, ["gpu-1"]))
    made = wait_until(lambda: len(pods(api, "train")) == 2 and pods(api, "train"))
    paths = {p["metadata"]["labels"][objects.CONTROL_PLANE]: next(
        m["subPath"] for m in p["spec"]["containers"][0]["volumeMounts"]
        if m["name"] == "phalanx-checkpoints") for p in made}
    assert paths["cp-ours"] != paths["cp-theirs"]
    assert all(path.startswith("train-") for path in paths.values())
    # Our job ends: our cleanup removes our directory only, and theirs is left alone.
    planes["cp-ours"].release_checkpoints("train")
    planes["cp-theirs"].release_checkpoints("train")
    cleanups = {p["metadata"]["labels"][objects.CONTROL_PLANE]: p
                for p in api.list("pods", "runs") if CLEANUP_LABEL in p["metadata"]["labels"]}
    assert set(cleanups) == {"cp-ours", "cp-theirs"}
    for cp, cleanup in cleanups.items():
        assert cleanup["spec"]["containers"][0]["command"][-1] == \
            f"/phalanx/checkpoints/{paths[cp]}"
