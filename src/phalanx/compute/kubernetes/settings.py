"""The Kubernetes plane's settings, and how the control plane's environment sets them
(the Deployment the deploy values render passes them as ``PHALANX_K8S_*``)."""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from phalanx.compute.kubernetes import checkpoints, sources
from phalanx.compute.kubernetes.kuberay import UseKubeRay, check_mode
from phalanx.errors import SpecError
from phalanx.health.stale import DEFAULT_STALE_AFTER
from phalanx.spec.labels import selector_text
from phalanx.spec.quantity import parse_duration

DEFAULT_NAMESPACE = "phalanx-runs"
NAMESPACE_ENV = "PHALANX_K8S_NAMESPACE"
SERVICE_ACCOUNT_ENV = "PHALANX_RUNS_SERVICE_ACCOUNT"
START_TIMEOUT_ENV = "PHALANX_K8S_START_TIMEOUT"
NODE_LOST_GRACE_ENV = "PHALANX_K8S_NODE_LOST_GRACE"
DOCTOR_STALE_AFTER_ENV = "PHALANX_K8S_DOCTOR_STALE_AFTER"
CHECKPOINT_VOLUME_ENV = "PHALANX_K8S_CHECKPOINT_VOLUME"  # JSON: a volume source
CHECKPOINT_CLEANUP_IMAGE_ENV = "PHALANX_K8S_CHECKPOINT_CLEANUP_IMAGE"
PRIORITY_CLASSES_ENV = "PHALANX_K8S_PRIORITY_CLASSES"
NODE_WRITES_ENV = "PHALANX_K8S_NODE_WRITES"  # "true": worker.rbac.allowNodeWrites
USE_KUBERAY_ENV = "PHALANX_K8S_RAY_USE_KUBERAY"  # ray.useKubeRay: auto | always | never
FENCE_IMAGE_ENV = "PHALANX_K8S_FENCE_IMAGE"  # the image the pods' fence is copied from
FETCH_IMAGE_ENV = "PHALANX_K8S_WORKDIR_IMAGE"  # a Python 3.12+ image: fetches a workdir
GIT_IMAGE_ENV = "PHALANX_K8S_GIT_IMAGE"  # an image with git and sh: clones a git source
# A label selector: the namespaces whose Jobs Phalanx admits natively (--manage-namespaces).
MANAGE_NAMESPACES_ENV = "PHALANX_K8S_MANAGE_NAMESPACES"
# NAME,NAME: the ServiceAccounts a pod set may name (serviceAccountName); none by default.
ALLOWED_SERVICE_ACCOUNTS_ENV = "PHALANX_K8S_ALLOWED_SERVICE_ACCOUNTS"


@dataclass(slots=True)
class Settings:
    namespace: str = DEFAULT_NAMESPACE
    service_account: str | None = None
    priority_classes: Mapping[str, str] = field(default_factory=dict)
    start_timeout: float = 300.0
    image_pull_timeout: float = 120.0
    sync_timeout: float = 30.0
    read_timeout: float = 60.0
    # The image of pod sets that name none; without one such jobs are refused at submit.
    default_image: str | None = None
    # How long a node may stop reporting before it is lost (its gangs requeued elsewhere).
    node_lost_grace: float = 60.0
    # How long a node's doctor may stay silent before its node counts as degraded.
    doctor_stale_after: float = DEFAULT_STALE_AFTER
    # The volume (a Kubernetes volume source) holding jobs' checkpoint directories, and the
    # image of the pods that remove them; no volume, no checkpoint directories.
    checkpoint_volume: dict[str, Any] | None = None
    checkpoint_cleanup_image: str = checkpoints.DEFAULT_CLEANUP_IMAGE
    # Whether the control plane may patch nodes (the health taint); without it nothing
    # is written to nodes by the plane itself.
    node_writes: bool = False
    # Whether Ray jobs run as KubeRay RayClusters: where its CRDs are served (auto), or
    # always (refusing to start without them), or never (Phalanx's own pods).
    use_kuberay: UseKubeRay = "never"
    # The compute plane's name when a worker drives it: its pods then run under the fence,
    # watching the Lease the worker renews (fencing.py). None: driven in-process.
    plane: str | None = None
    fence_image: str | None = None
    fence_after: float | None = None  # the worker's --fence-after (scales the pods' fence)
    # The control plane's identity when a worker drives the plane: labels its objects.
    control_plane: str | None = None
    # The images of the init containers that fill a pod's working directory.
    fetch_image: str = sources.DEFAULT_FETCH_IMAGE
    git_image: str = sources.DEFAULT_GIT_IMAGE
    # Kubernetes-native admission: a label selector of the namespaces whose Jobs created
    # with kubectl Phalanx queues and admits (native.py); None: none.
    manage_namespaces: str | None = None
    # The ServiceAccounts a pod set may run as instead of service_account (the install's
    # choice: an account may hold rights the runs account does not).
    allowed_service_accounts: frozenset[str] = frozenset()


def settings_from_env() -> Settings:
    """Settings from the environment (the Deployment sets the runs ServiceAccount)."""
    settings = Settings(service_account=os.environ.get(SERVICE_ACCOUNT_ENV) or None)
    if os.environ.get(START_TIMEOUT_ENV):
        settings.start_timeout = parse_duration(os.environ[START_TIMEOUT_ENV],
                                                field=START_TIMEOUT_ENV)
    if os.environ.get(NODE_LOST_GRACE_ENV):
        settings.node_lost_grace = parse_duration(os.environ[NODE_LOST_GRACE_ENV],
                                                  field=NODE_LOST_GRACE_ENV)
    if os.environ.get(DOCTOR_STALE_AFTER_ENV):
        settings.doctor_stale_after = parse_duration(os.environ[DOCTOR_STALE_AFTER_ENV],
                                                     field=DOCTOR_STALE_AFTER_ENV)
    if os.environ.get(CHECKPOINT_VOLUME_ENV):
        settings.checkpoint_volume = checkpoints.volume_source(os.environ[CHECKPOINT_VOLUME_ENV],
                                                               CHECKPOINT_VOLUME_ENV)
    settings.fence_image = os.environ.get(FENCE_IMAGE_ENV) or None
    settings.fetch_image = os.environ.get(FETCH_IMAGE_ENV) or settings.fetch_image
    settings.git_image = os.environ.get(GIT_IMAGE_ENV) or settings.git_image
    if os.environ.get(MANAGE_NAMESPACES_ENV, "").strip():
        settings.manage_namespaces = selector_text(os.environ[MANAGE_NAMESPACES_ENV],
                                                   MANAGE_NAMESPACES_ENV)
    settings.allowed_service_accounts = frozenset(
        name.strip() for name in os.environ.get(ALLOWED_SERVICE_ACCOUNTS_ENV, "").split(",")
        if name.strip())
    if os.environ.get(CHECKPOINT_CLEANUP_IMAGE_ENV):
        settings.checkpoint_cleanup_image = os.environ[CHECKPOINT_CLEANUP_IMAGE_ENV]
    writes = os.environ.get(NODE_WRITES_ENV, "").strip().lower()
    if writes not in ("", "true", "false"):
        raise SpecError(f"{writes!r} is not true or false", field=NODE_WRITES_ENV,
                        fix="write true (the role may patch nodes) or false")
    settings.node_writes = writes == "true"
    if os.environ.get(USE_KUBERAY_ENV):
        settings.use_kuberay = check_mode(os.environ[USE_KUBERAY_ENV], USE_KUBERAY_ENV)
    mapping = os.environ.get(PRIORITY_CLASSES_ENV, "")
    classes = {}
    for pair in filter(None, (p.strip() for p in mapping.split(","))):
        name, sep, value = pair.partition("=")
        if not sep or not name.strip() or not value.strip():
            raise SpecError(f"{pair!r} is not NAME=PRIORITYCLASS", field=PRIORITY_CLASSES_ENV,
                            fix="write e.g. high=ml-high,low=ml-low")
        classes[name.strip()] = value.strip()
    settings.priority_classes = classes
    return settings


