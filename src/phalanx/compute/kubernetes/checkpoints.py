"""Jobs' checkpoint directories on Kubernetes: one directory per job on a volume the
deploy values name (``runs.checkpoints``: a PersistentVolumeClaim or a hostPath).

Each pod mounts the job's directory (``subPath: <job>``, which the kubelet creates; on a
plane a worker drives, ``<job>-<tag of its control plane>``, so that two control planes
sharing a volume never share a job's directory or remove each other's) at
``/phalanx/checkpoints`` and finds it as ``PHALANX_CHECKPOINT_DIR``; every attempt of
the job mounts the same one. When the job ends and keeps nothing, a small cleanup pod
mounts the volume and removes the directory; cleanup pods that finished are deleted at
the next cleanup. Without a volume, pods get no checkpoint directory.
"""

from __future__ import annotations

import json
from typing import Any

from phalanx.compute.base import CHECKPOINT_DIR_ENV
from phalanx.compute.kubernetes.client import KubeClient
from phalanx.errors import SpecError

Object = dict[str, Any]
MOUNT_PATH = "/phalanx/checkpoints"
VOLUME = "phalanx-checkpoints"
CLEANUP_LABEL = "phalanx.dev/checkpoint-cleanup"  # the job whose directory the pod removes
DEFAULT_CLEANUP_IMAGE = "busybox:1.36"


def directory(job: str, tag: str = "") -> str:
    """The job's directory on the volume; ``tag``: its control plane's, if a worker drives
    the plane (``objects.owner_tag``)."""
    return f"{job}{tag}"


def mount(spec: Object, container: Object, job: str, volume: Object, tag: str = "") -> None:
    """Give a job pod (``spec``, its ``container``) the job's checkpoint directory."""
    spec.setdefault("volumes", []).append({"name": VOLUME, **volume})
    container.setdefault("volumeMounts", []).append(
        {"name": VOLUME, "mountPath": MOUNT_PATH, "subPath": directory(job, tag)})
    if not any(e["name"] == CHECKPOINT_DIR_ENV for e in container["env"]):  # the user's wins
        container["env"].append({"name": CHECKPOINT_DIR_ENV, "value": MOUNT_PATH})


def cleanup_pod(job: str, namespace: str, volume: Object, image: str, tag: str = "",
                owner: dict[str, str] | None = None) -> Object:
    """The pod that removes ``job``'s directory, labelled with ``owner`` (the control plane
    a worker drives the plane for, whose ``tag`` the directory carries)."""
    return {
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": f"{job[:48 - len(tag)]}{tag}-ckpt-cleanup",
                     "namespace": namespace,
                     "labels": {CLEANUP_LABEL: job, **(owner or {})}},
        "spec": {
            "restartPolicy": "OnFailure",
            "volumes": [{"name": VOLUME, **volume}],
            "containers": [{
                "name": "cleanup", "image": image,
                "command": ["rm", "-rf", "--", f"{MOUNT_PATH}/{directory(job, tag)}"],
                "volumeMounts": [{"name": VOLUME, "mountPath": MOUNT_PATH}],
                "resources": {"requests": {"cpu": "10m", "memory": "16Mi"},
                              "limits": {"memory": "64Mi"}},
            }],
        },
    }


class CheckpointCleaner:
    def __init__(self, client: KubeClient, namespace: str, volume: Object | None,
                 image: str = DEFAULT_CLEANUP_IMAGE, *, tag: str = "",
                 owner: dict[str, str] | None = None) -> None:
        """``owner``: the labels of the control plane whose cleanups these are (it deletes
        no one else's), ``tag``: the tag its jobs' directories carry."""
        self.client = client
        self.namespace = namespace
        self.volume = volume
        self.image = image
        self.tag = tag
        self.owner = dict(owner or {})
        self._pods = f"/api/v1/namespaces/{namespace}/pods"

    def release(self, job: str) -> None:
        """Remove ``job``'s directory (by a cleanup pod); delete cleanups that are done."""
        if self.volume is None:
            return
        selector = ",".join([CLEANUP_LABEL, *(f"{k}={v}" for k, v in sorted(self.owner.items()))])
        done = self.client.get(self._pods, labelSelector=selector)
        for pod in done.get("items", []):
            if pod.get("status", {}).get("phase") == "Succeeded":
                self.client.delete(f"{self._pods}/{pod['metadata']['name']}")
        self.client.create_or_get(self._pods, cleanup_pod(
            job, self.namespace, self.volume, self.image, self.tag, self.owner))


def volume_source(text: str, field: str) -> Object:
    """The checkpoint volume's source from its JSON (as the deploy values render it)."""
    try:
        volume = json.loads(text)
    except ValueError:
        volume = None
    if not isinstance(volume, dict) or not (
        {"persistentVolumeClaim", "hostPath"} & volume.keys()
    ):
        raise SpecError(f"{text!r} is not a checkpoint volume", field=field,
                        fix='give JSON such as {"persistentVolumeClaim": {"claimName": "ckpt"}}'
                            ' or {"hostPath": {"path": "/data/checkpoints"}}')
    return volume
