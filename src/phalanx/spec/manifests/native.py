"""Objects found in a cluster (Kubernetes-native admission), made into the jobs they run as.

A managed object was written by someone else and stored by the API server, which added what
it sets and defaults (a Job's ``selector``, its template's controller labels) and Phalanx
suspended it: those fields are no part of what its author asked, so they are dropped before
the object goes through the same translation ``submit`` uses. Each kind managed natively
names its fields here; the other kinds plug in by adding theirs to ``CLUSTER_SET``.
Pure: the control plane calls it, and so could a client.
"""

from __future__ import annotations

import copy
import hashlib
from collections.abc import Mapping
from typing import Any

from phalanx.spec.manifests import batch
from phalanx.spec.manifests.base import QUEUE_LABEL

# The Job's own labels the API server puts on its pod template and selector.
_JOB_TEMPLATE_LABELS = ("batch.kubernetes.io/controller-uid", "controller-uid",
                        "batch.kubernetes.io/job-name", "job-name")

# (apiVersion, kind) -> fields of ``spec`` the API server sets or Phalanx wrote.
CLUSTER_SET: dict[tuple[str, str], tuple[str, ...]] = {
    (batch.API_VERSION, batch.KIND): ("suspend", "selector", "manualSelector",
                                      "podReplacementPolicy"),
}
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
ADMISSION_PATH = "/admission/batch-jobs"


def managed_resources() -> list[tuple[str, str, str]]:
    """(API group, version, resource) of each kind managed natively, as an admission
    webhook's rules and RBAC name them (a kind's resource is its lower-cased plural, as
    for every kind managed here)."""
    out = []
    for api_version, kind in CLUSTER_SET:
        group, _, version = api_version.rpartition("/")
        out.append((group, version, kind.lower() + "s"))
    return out


def managed_kind(obj: Mapping[str, Any]) -> bool:
    return (str(obj.get("apiVersion") or ""), str(obj.get("kind") or "")) in CLUSTER_SET


def job_name(namespace: str, name: str) -> str:
    """The Phalanx job a namespaced object runs as: ``NAMESPACE-NAME-HASH``, a DNS label
    (the hash of ``NAMESPACE/NAME`` keeps ``a-b/c`` and ``a/b-c`` apart)."""
    digest = hashlib.sha256(f"{namespace}/{name}".encode()).hexdigest()[:5]
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
    meta["name"] = job_name(namespace, name)
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
    if isinstance(spec, dict):
        for key in CLUSTER_SET.get((str(manifest.get("apiVersion")),
                                    str(manifest.get("kind"))), ()):
            spec.pop(key, None)
        template_meta = (spec.get("template") or {}).get("metadata")
        if isinstance(template_meta, dict) and isinstance(template_meta.get("labels"), dict):
            for key in _JOB_TEMPLATE_LABELS:
                template_meta["labels"].pop(key, None)
            if not template_meta["labels"]:
                template_meta.pop("labels")
    return manifest


def owner_of(obj: Mapping[str, Any]) -> str | None:
    """Who the object's job belongs to: its ``phalanx.dev/owner`` annotation, else None (the
    creating user is only known to an admission webhook, not to a watch)."""
    annotations = (obj.get("metadata") or {}).get("annotations") or {}
    owner = annotations.get(OWNER_ANNOTATION)
    return str(owner) if owner else None
