"""The values of a job's secrets on Kubernetes: Secrets of one attempt, owned by its anchor.

Per attempt, made before its credential Secret (so a plane that restarts and finds that
one finds these too) and deleted with the anchor by the garbage collector:

- ``<attempt>-env-<pod set>``: the pod set's variables from secrets (``envFrom`` and
  ``secretEnv``), which its pods take whole with ``envFrom: [{secretRef}]``; the pod set's
  own ``env`` wins over it, as Kubernetes orders them;
- ``<attempt>-vol-<volume>``: a secret volume's files, which the pod's volume names
  (``volumes.py``, where every volume of the pod is rendered);
- ``<attempt>-pull-<hash>``: a ``kubernetes.io/dockerconfigjson`` Secret per registry
  secret the job names, in the pods' ``imagePullSecrets``;
- ``<attempt>-git``: a ``kubernetes.io/ssh-auth`` Secret, the key of ``git.sshKeySecret``,
  which only the init container that clones mounts (``sources.py``).

The pods' references follow from the spec alone, so a pod is rendered without any value.
"""

from __future__ import annotations

import base64
import hashlib
from typing import Any

from phalanx.compute.base import AttemptSecrets
from phalanx.compute.kubernetes.objects import attempt_labels
from phalanx.compute.kubernetes.sources import git_key_secret
from phalanx.compute.kubernetes.volumes import volume_secret
from phalanx.spec.resources import PodSet
from phalanx.spec.secrets import DOCKER_KEY

Object = dict[str, Any]


def env_secret(attempt_name: str, pod_set: str) -> str:
    return f"{attempt_name}-env-{pod_set}"


def pull_secret(attempt_name: str, ref: str) -> str:
    return f"{attempt_name}-pull-{hashlib.sha256(ref.encode()).hexdigest()[:10]}"


def _encoded(data: dict[str, bytes]) -> dict[str, str]:
    return {k: base64.b64encode(v).decode() for k, v in data.items()}


def secrets(attempt_name: str, namespace: str, job: str, attempt: int, owner: Object,
            values: AttemptSecrets, identity: dict[str, str] | None = None) -> list[Object]:
    """The attempt's Secrets that carry ``values``."""
    def secret(name: str, data: dict[str, bytes], kind: str = "Opaque") -> Object:
        return {"apiVersion": "v1", "kind": "Secret", "type": kind,
                "metadata": {"name": name, "namespace": namespace,
                             "labels": attempt_labels(job, attempt, "secret", identity),
                             "ownerReferences": [owner]},
                "data": _encoded(data)}

    made = [secret(env_secret(attempt_name, p), {k: v.encode() for k, v in env.items()})
            for p, env in sorted(values.env.items())]
    made += [secret(volume_secret(attempt_name, v), files)
             for v, files in sorted(values.volumes.items())]
    made += [secret(pull_secret(attempt_name, ref), {DOCKER_KEY: config},
                    "kubernetes.io/dockerconfigjson")
             for ref, config in sorted(values.pull.items())]
    if values.git:
        made.append(secret(git_key_secret(attempt_name), values.git, "kubernetes.io/ssh-auth"))
    return made


def attach(spec: Object, container: Object, attempt_name: str, pod_set: PodSet) -> None:
    """Point a pod of ``pod_set`` (``spec``, its ``container``) at the attempt's Secrets of
    variables and of registries (its secret volumes are among its volumes)."""
    if pod_set.env_from or pod_set.secret_env:
        container.setdefault("envFrom", []).append(
            {"secretRef": {"name": env_secret(attempt_name, pod_set.name)}})
    if pod_set.image_pull_secrets:
        spec["imagePullSecrets"] = [{"name": pull_secret(attempt_name, s.name)}
                                    for s in pod_set.image_pull_secrets]
