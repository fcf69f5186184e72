"""The ProvisioningRequest API (``autoscaling.x-k8s.io/v1``) as Phalanx speaks it: names,
classes, annotations, the conditions a request reports, and what a pod placed on a node
claimed for a request carries to consume it (read by the plane when it makes pods)."""

from __future__ import annotations

import json
from dataclasses import dataclass

from phalanx.compute.kubernetes.client import Object
from phalanx.spec.providers.kubernetes import MAX_POD_SETS as MAX_POD_SETS  # the API's limit
from phalanx.spec.providers.kubernetes import PROVISIONING_REQUEST

NAME = PROVISIONING_REQUEST.name
GROUP_VERSION = "autoscaling.x-k8s.io/v1"
KIND = "ProvisioningRequest"
CHECK_CAPACITY = "check-capacity.autoscaling.x-k8s.io"
BEST_EFFORT_ATOMIC = "best-effort-atomic-scale-up.autoscaling.x-k8s.io"
QUEUED_PROVISIONING = "queued-provisioning.gke.io"
DEFAULT_CLASS = BEST_EFFORT_ATOMIC
CONSUME_ANNOTATION = "autoscaling.x-k8s.io/consume-provisioning-request"
CLASS_ANNOTATION = "autoscaling.x-k8s.io/provisioning-class-name"
SAFE_TO_EVICT = "cluster-autoscaler.kubernetes.io/safe-to-evict"
# On a claimed node: the request its pods consume, its class, and the templates' selector.
NODE_REQUEST = "phalanx.dev/provisioning-request"
NODE_CLASS = "phalanx.dev/provisioning-class"
NODE_SELECTOR = "phalanx.dev/provisioning-node-selector"
CONFIG_HASH = "phalanx.dev/pool-config-hash"
NODE_COUNT = "phalanx.dev/pool-nodes"
POOL = "phalanx.dev/pool-name"  # on the request and its templates
# The container of a template: never run, the autoscaler only simulates the pod.
TEMPLATE_IMAGE = "registry.k8s.io/pause:3.10"
PODS_API_FIX = ("install the cluster autoscaler with ProvisioningRequests enabled "
                "(--enable-provisioning-requests) or use GKE, or give the flavor another "
                "provider")


@dataclass(frozen=True, slots=True)
class Conditions:
    """The request's conditions that are True, and the Provisioned one's reason."""

    true: dict[str, str]  # type -> message
    provisioned_reason: str = ""
    provisioned_message: str = ""

    @classmethod
    def of(cls, request: Object) -> Conditions:
        true: dict[str, str] = {}
        reason = message = ""
        for condition in (request.get("status") or {}).get("conditions") or []:
            kind = str(condition.get("type") or "")
            text = str(condition.get("message") or condition.get("reason") or kind)
            if condition.get("status") == "True":
                true[kind] = text
            if kind == "Provisioned":
                reason = str(condition.get("reason") or "")
                message = str(condition.get("message") or "")
        return cls(true, reason, message)


def consumes(node: Object | None) -> tuple[dict[str, str], dict[str, str]]:
    """The annotations and node selector a pod placed on ``node`` takes from the request
    that node was claimed for (nothing for a node no request claimed)."""
    annotations = ((node or {}).get("metadata") or {}).get("annotations") or {}
    request = annotations.get(NODE_REQUEST)
    if not request:
        return {}, {}
    selector = json.loads(annotations.get(NODE_SELECTOR) or "{}")
    return ({CONSUME_ANNOTATION: str(request),
             CLASS_ANNOTATION: str(annotations.get(NODE_CLASS) or ""),
             SAFE_TO_EVICT: "false"},
            {str(k): str(v) for k, v in selector.items()})


