"""A job's secrets on Kubernetes: Secrets of the attempt, owned by its anchor, that its pods
reference by envFrom, a secret volume and imagePullSecrets; each object valid."""

from __future__ import annotations

import base64
import json
from typing import Any

from phalanx.compute.base import AttemptSecrets, PodCredential
from phalanx.spec.resources import JobSpec
from tests.k8s_plane.conftest import RUNS, PlaneFactory
from tests.k8s_plane.fake_apiserver import FakeAPIServer
from tests.k8s_plane.helpers import IMAGE, admit, env_of, pods
from tests.k8s_plane.test_credentials import _validate

API_URL = "http://phalanx.phalanx-system.svc:7780"
KEY = "phj_" + "ab" * 32 + "_1_ddp"
MARKER = "value-6f1c2a9e"
DOCKER = json.dumps({"auths": {"registry.example": {"auth": "dTpw"}}}).encode()


def _job() -> JobSpec:
    return JobSpec.model_validate({
        "name": "ddp", "kind": "torch",
        "volumes": [{"name": "creds", "secret": {"secretName": "team-a/creds"}}],
        "podSets": [{
            "name": "worker", "replicas": 2, "image": IMAGE,
            "resources": {"cpu": "2", "memory": "4Gi"},
            "command": ["torchrun", "train.py"],
            "env": [{"name": "PLAIN", "value": "1"},
                    {"name": "TOKEN", "valueFrom": {"secretKeyRef": {"name": "hf",
                                                                     "key": "HF_TOKEN"}}}],
            "envFrom": [{"secretRef": {"name": "wandb"}}],
            "mounts": [{"name": "creds", "mountPath": "/etc/creds"}],
            "imagePullSecrets": ["registry"],
        }]})


def test_the_attempts_secrets_carry_the_values_and_the_pods_point_at_them(
        api: FakeAPIServer, make_plane: PlaneFactory) -> None:
    api.add_node("node-1", cpu="32", memory="256Gi")
    plane = make_plane()
    job = _job()
    assert job.pod_sets[0].env == {"PLAIN": "1"}  # the list form of env, split
    values = AttemptSecrets(env={"worker": {"TOKEN": MARKER, "WANDB_API_KEY": "w"}},
                            volumes={"creds": {"token.txt": MARKER.encode()}},
                            pull={"registry": DOCKER})
    plane.launch(job, 1, admit(job, ["node-1", "node-1"]),
                 credential=PodCredential(API_URL, KEY, values))

    [anchor] = api.list("configmaps", RUNS)
    name = anchor["metadata"]["name"]
    owner = {"apiVersion": "v1", "kind": "ConfigMap", "name": name,
             "uid": anchor["metadata"]["uid"], "controller": True, "blockOwnerDeletion": True}
    made: dict[str, dict[str, Any]] = {s["metadata"]["name"]: s
                                       for s in api.list("secrets", RUNS)}
    env_name, volume_name = f"{name}-env-worker", f"{name}-vol-creds"
    [pull_name] = [n for n in made if n.startswith(f"{name}-pull-")]
    assert set(made) == {f"{name}-api", env_name, volume_name, pull_name}
    for secret in made.values():
        assert secret["metadata"]["ownerReferences"] == [owner]  # gone with the attempt
        _validate(secret)
    decoded = {k: base64.b64decode(v).decode() for k, v in made[env_name]["data"].items()}
    assert decoded == {"TOKEN": MARKER, "WANDB_API_KEY": "w"}
    assert base64.b64decode(made[volume_name]["data"]["token.txt"]).decode() == MARKER
    assert made[pull_name]["type"] == "kubernetes.io/dockerconfigjson"
    assert base64.b64decode(made[pull_name]["data"][".dockerconfigjson"]) == DOCKER
    assert MARKER not in json.dumps(anchor)

    for pod in pods(api, "ddp"):
        _validate(pod)
        assert MARKER not in json.dumps(pod)  # references only, never a value
        container = pod["spec"]["containers"][0]
        assert container["envFrom"] == [{"secretRef": {"name": env_name}}]
        assert env_of(pod)["PLAIN"] == "1"
        assert {"name": "creds", "secret": {"secretName": volume_name, "defaultMode": 0o400}
                } in pod["spec"]["volumes"]
        assert {"name": "creds", "mountPath": "/etc/creds", "readOnly": True
                } in container["volumeMounts"]
        assert pod["spec"]["imagePullSecrets"] == [{"name": pull_name}]

    # The anchor's deletion takes every Secret of the attempt with it.
    api.remove("configmaps", name, RUNS)
    assert api.list("secrets", RUNS) == []
