"""Objects found in a cluster (Kubernetes-native admission), made into the jobs they run as.

A managed object was written by someone else and stored by the API server, which added what
it sets and defaults (a Job's ``selector``, its template's controller labels) and Phalanx
suspended it: those fields are no part of what its author asked, so they are dropped before
the object goes through the same translation ``submit`` uses. Each kind managed natively
names its fields in its adapter (``native_kinds``), which ``CLUSTER_SET`` gathers.
Pure: the control plane calls it, and so could a client.
"""

from __future__ import annotations

import copy
import hashlib
from collections.abc import Mapping
from typing import Any

from phalanx.spec.manifests import batch
from phalanx.spec.manifests.base import QUEUE_LABEL
from phalanx.spec.manifests.native_kinds import NATIVE_KINDS, kind_of

# (apiVersion, kind) -> fields of ``spec`` the API server sets or Phalanx wrote.
CLUSTER_SET: dict[tuple[str, str], tuple[str, ...]] = {
    key: adapter.cluster_set for key, adapter in NATIVE_KINDS.items()}
# Annotations Phalanx writes on a managed object.
JOB_ANNOTATION = "phalanx.dev/job"  # the Phalanx job the object runs as
ADMITTED_ANNOTATION = "phalanx.dev/admitted"  # the attempt Phalanx unsuspended it for
OWNER_ANNOTATION = "phalanx.dev/owner"  # who the job belongs to, when the author says
# On the Phalanx job of a managed object: found after a restart, its object gone or not.
NATIVE_LABEL = "phalanx.dev/native"
# A namespace's annotation naming the LocalQueue of its objects that name none
# (Kueue's manageJobsWithoutQueueName, per namespace).
DEFAULT_QUEUE_ANNOTATION = "phalanx.dev/default-queue"
MAX_NAME = 63
# Where the control plane answers the API server's admission webhook calls.
ADMISSION_PATH = "/admission/workloads"


def managed_resources() -> list[tuple[str, str, str]]:
    """(API group, version, resource) of each kind managed natively, as an admission
    webhook's rules name them."""
    return [(a.group, a.version, a.plural) for a in NATIVE_KINDS.values()]


def managed_kind(obj: Mapping[str, Any]) -> bool:
    return kind_of(obj) is not None


def job_name(namespace: str, name: str, kind: str = batch.KIND) -> str:
    """The Phalanx job a namespaced object runs as: ``NAMESPACE-NAME-HASH``, a DNS label
    (the hash of ``NAMESPACE/NAME``, and of the kind but for a Job, keeps ``a-b/c`` and
    ``a/b-c`` apart, and a JobSet from a Job of the same name)."""
    identity = f"{namespace}/{name}" if kind == batch.KIND else f"{kind}/{namespace}/{name}"
    digest = hashlib.sha256(identity.encode()).hexdigest()[:5]
    stem = f"{namespace}-{name}"[:MAX_NAME - 6].rstrip("-.")
    return f"{stem}-{digest}"


def queue_of(obj: Mapping[str, Any], default_queue: str | None) -> str | None:
    """The LocalQueue an object is submitted to: its Kueue label, else its namespace's."""
    labels = (obj.get("metadata") or {}).get("labels") or {}
    return labels.get(QUEUE_LABEL) or default_queue


def as_authored(obj: Mapping[str, Any], default_queue: str | None) -> dict[str, Any]:
    """The object as its author wrote it, under its Phalanx job's name, with its queue."""
    manifest = copy.deepcopy(dict(obj))
    meta = manifest.setdefault("metadata", {})
    namespace, name = str(meta.get("namespace") or ""), str(meta.get("name") or "")
    meta["name"] = job_name(namespace, name, str(manifest.get("kind") or batch.KIND))
    labels = {**(meta.get("labels") or {}), NATIVE_LABEL: "true"}
    queue = queue_of(obj, default_queue)
    if queue:
        labels[QUEUE_LABEL] = queue
    meta["labels"] = labels
    annotations = {k: v for k, v in (meta.get("annotations") or {}).items()
                   if k not in (JOB_ANNOTATION, ADMITTED_ANNOTATION, OWNER_ANNOTATION)}
    if annotations:
        meta["annotations"] = annotations
    else:
        meta.pop("annotations", None)
    spec = manifest.get("spec")
    adapter = kind_of(manifest)
    if isinstance(spec, dict) and adapter is not None:
        for key in adapter.cluster_set:
            spec.pop(key, None)
        adapter.strip(manifest)
    return manifest


def owner_of(obj: Mapping[str, Any]) -> str | None:
    """Who the object's job belongs to: its ``phalanx.dev/owner`` annotation, else None (the
    creating user is only known to an admission webhook, not to a watch)."""
    annotations = (obj.get("metadata") or {}).get("annotations") or {}
    owner = annotations.get(OWNER_ANNOTATION)
    return str(owner) if owner else None
