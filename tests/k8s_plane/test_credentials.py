"""An attempt's credential on Kubernetes: one Secret, owned by the anchor, mounted read-only."""

from __future__ import annotations

import base64
import json
from typing import Any

import pytest

from phalanx.compute.base import PodCredential
from phalanx.compute.kubernetes.client import KubeError
from phalanx.compute.kubernetes.credentials import MOUNT_PATH
from tests.k8s_plane.conftest import RUNS, PlaneFactory
from tests.k8s_plane.fake_apiserver import FakeAPIServer
from tests.k8s_plane.helpers import admit, env_of, gang, pods

API_URL = "http://phalanx.phalanx-system.svc:7780"
KEY = "phj_" + "ab" * 32 + "_1_ddp"


def _secrets(api: FakeAPIServer) -> list[dict[str, Any]]:
    return api.list("secrets", RUNS)


def _validate(obj: dict[str, Any]) -> None:
    """What the schema of the newest Kubernetes says of the object as it was sent."""
    validate = pytest.importorskip("kubernetes_validate")
    request = {k: v for k, v in obj.items() if k != "status"}
    request["metadata"] = {k: v for k, v in obj["metadata"].items()
                           if k not in ("uid", "resourceVersion", "creationTimestamp")}
    validate.validate(request, validate.utils.latest_version(), strict=True)


def test_the_pods_mount_the_attempts_secret_and_find_the_api(
        api: FakeAPIServer, make_plane: PlaneFactory) -> None:
    api.add_node("gpu-1", cpu="32", memory="256Gi", gpus=8)
    plane = make_plane()
    job = gang(replicas=2)
    plane.launch(job, 1, admit(job, ["gpu-1", "gpu-1"]),
                 credential=PodCredential(API_URL, KEY))

    [anchor] = api.list("configmaps", RUNS)
    [secret] = _secrets(api)
    owner = {"apiVersion": "v1", "kind": "ConfigMap", "name": anchor["metadata"]["name"],
             "uid": anchor["metadata"]["uid"], "controller": True, "blockOwnerDeletion": True}
    assert secret["metadata"]["ownerReferences"] == [owner]  # collected with the attempt
    assert secret["metadata"]["name"] == f"{anchor['metadata']['name']}-api"
    assert base64.b64decode(secret["data"]["api-key"]).decode() == KEY
    assert KEY not in json.dumps(anchor)  # the anchor keeps the URL, never the key
    _validate(secret)
    for pod in pods(api, "ddp"):
        _validate(pod)
        assert KEY not in json.dumps(pod)
        [volume] = [v for v in pod["spec"]["volumes"] if v["name"] == "phalanx-api"]
        assert volume["secret"] == {"secretName": secret["metadata"]["name"]}
        mounts = pod["spec"]["containers"][0]["volumeMounts"]
        assert {"name": "phalanx-api", "mountPath": MOUNT_PATH, "readOnly": True} in mounts
        env = env_of(pod)
        assert env["PHALANX_URL"] == API_URL
        assert env["PHALANX_API_KEY_FILE"] == f"{MOUNT_PATH}/api-key"

    # Launching the attempt again, or from a restarted plane, mints nothing new.
    plane.launch(job, 1, admit(job, ["gpu-1", "gpu-1"]), credential=PodCredential(API_URL, KEY))
    plane.close()
    again = make_plane()
    again.launch(job, 1, admit(job, ["gpu-1", "gpu-1"]), credential=PodCredential(API_URL, KEY))
    assert [s["metadata"]["uid"] for s in _secrets(api)] == [secret["metadata"]["uid"]]
    assert len(pods(api, "ddp")) == 2

    # The anchor's deletion takes the Secret with it (the garbage collector's cascade).
    api.remove("configmaps", anchor["metadata"]["name"], RUNS)
    assert _secrets(api) == []


def test_a_launch_cut_short_before_its_secret_waits_for_the_key(
        api: FakeAPIServer, make_plane: PlaneFactory) -> None:
    """Interrupted after the anchor, before the Secret (so before any pod): a restarted
    plane creates no pod that would mount a missing Secret; the control loop's launch
    again, with the key, creates the Secret and then the pods."""
    api.add_node("gpu-1", cpu="32", memory="256Gi", gpus=8)
    job = gang(replicas=1)
    api.inject(f"/api/v1/namespaces/{RUNS}/services", 403, count=1, method="POST")
    plane = make_plane()
    with pytest.raises(KubeError):  # the Service could not be created: nothing after it was
        plane.launch(job, 1, admit(job, ["gpu-1"]), credential=PodCredential(API_URL, KEY))
    assert pods(api, "ddp") == [] and _secrets(api) == []
    plane.close()
    again = make_plane()
    assert pods(api, "ddp") == []  # it has no key to put in the Secret
    again.launch(job, 1, admit(job, ["gpu-1"]), credential=PodCredential(API_URL, KEY))
    [secret] = _secrets(api)
    assert base64.b64decode(secret["data"]["api-key"]).decode() == KEY
    [pod] = pods(api, "ddp")
    assert env_of(pod)["PHALANX_URL"] == API_URL


def test_a_launch_cut_short_after_its_secret_is_completed_by_a_restarted_plane(
        api: FakeAPIServer, make_plane: PlaneFactory) -> None:
    """Interrupted after the Secret: the restarted plane creates the pods itself (the
    control loop sees pods and launches nothing), and they mount the Secret there is."""
    api.add_node("gpu-1", cpu="32", memory="256Gi", gpus=8)
    job = gang(replicas=2)
    api.inject(f"/api/v1/namespaces/{RUNS}/pods", 403, count=1, method="POST")
    plane = make_plane()
    with pytest.raises(KubeError):
        plane.launch(job, 1, admit(job, ["gpu-1", "gpu-1"]),
                     credential=PodCredential(API_URL, KEY))
    [secret] = _secrets(api)
    plane.close()
    make_plane()
    assert len(pods(api, "ddp")) == 2
    for pod in pods(api, "ddp"):
        [volume] = [v for v in pod["spec"]["volumes"] if v["name"] == "phalanx-api"]
        assert volume["secret"]["secretName"] == secret["metadata"]["name"]
    assert [s["metadata"]["uid"] for s in _secrets(api)] == [secret["metadata"]["uid"]]


def test_without_a_credential_pods_get_none(api: FakeAPIServer,
                                            make_plane: PlaneFactory) -> None:
    api.add_node("gpu-1", cpu="32", memory="256Gi", gpus=8)
    job = gang(replicas=1)
    make_plane().launch(job, 1, admit(job, ["gpu-1"]))
    [pod] = pods(api, "ddp")
    assert _secrets(api) == []
    assert "PHALANX_API_KEY_FILE" not in env_of(pod)
    assert all(v["name"] != "phalanx-api" for v in pod["spec"].get("volumes", []))
