"""An attempt's API credential on Kubernetes: a Secret its pods mount read-only.

The Secret ``<attempt>-api`` holds the key; the anchor ConfigMap owns it, like the
attempt's other objects, so the garbage collector deletes it with the attempt. The anchor
records the API's URL (never the key) under ``apiUrl``. The Secret is created before any
pod, so a plane that restarts mid-launch finds either the Secret (and completes the pods,
which mount it) or no pod at all (and waits for the control loop to launch the attempt
again with the key, which it derives the same every time).

Each pod mounts it at ``/var/run/secrets/phalanx`` and finds the file as
``PHALANX_API_KEY_FILE`` and the API as ``PHALANX_URL``; the SDK and CLI read both.
"""

from __future__ import annotations

import base64
from typing import Any

from phalanx.compute.base import PodCredential
from phalanx.compute.kubernetes.objects import attempt_labels

Object = dict[str, Any]
MOUNT_PATH = "/var/run/secrets/phalanx"
KEY = "api-key"
VOLUME = "phalanx-api"
ANCHOR_URL = "apiUrl"  # the anchor's data: the URL the attempt's pods call


def secret_name(attempt_name: str) -> str:
    return f"{attempt_name}-api"  # attempt names are at most 63 characters


def secret(attempt_name: str, namespace: str, job: str, attempt: int, owner: Object,
           credential: PodCredential, identity: dict[str, str] | None = None) -> Object:
    return {
        "apiVersion": "v1", "kind": "Secret", "type": "Opaque",
        "metadata": {"name": secret_name(attempt_name), "namespace": namespace,
                     "labels": attempt_labels(job, attempt, "credential", identity),
                     "ownerReferences": [owner]},
        "data": {KEY: base64.b64encode(credential.key.encode()).decode()},
    }


def mount(spec: Object, container: Object, attempt_name: str, api_url: str) -> None:
    """Give a job pod (``spec``, its ``container``) the attempt's credential, read-only."""
    spec.setdefault("volumes", []).append(
        {"name": VOLUME, "secret": {"secretName": secret_name(attempt_name)}})
    container.setdefault("volumeMounts", []).append(
        {"name": VOLUME, "mountPath": MOUNT_PATH, "readOnly": True})
    names = {e["name"] for e in container["env"]}
    for name, value in PodCredential(api_url, "").environment(f"{MOUNT_PATH}/{KEY}").items():
        if name not in names:  # a pod set's own setting wins, as for the checkpoint directory
            container["env"].append({"name": name, "value": value})
