"""What the API server checks of a ProvisioningRequest, as the cluster autoscaler's CRD
declares it (autoscaling.x-k8s.io/v1): its schema on create, its immutable spec on
update, and writes to ``status`` only through the status subresource."""

from __future__ import annotations

import re
from typing import Any

from tests.k8s_plane.fake_apiserver import merge_patch

Object = dict[str, Any]
GROUP_VERSION = "autoscaling.x-k8s.io/v1"
PATH = f"/apis/{GROUP_VERSION}"
MAX_POD_SETS = 32
MAX_PARAMETERS = 100
MAX_PARAMETER_LENGTH = 255
_DNS_SUBDOMAIN = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")

DISCOVERY: Object = {
    "kind": "APIResourceList", "groupVersion": GROUP_VERSION,
    "resources": [
        {"name": "provisioningrequests", "namespaced": True, "kind": "ProvisioningRequest",
         "shortNames": ["provreq", "provreqs"]},
        {"name": "provisioningrequests/status", "namespaced": True,
         "kind": "ProvisioningRequest"},
    ],
}


def invalid(body: Object) -> str | None:
    """Why the API server refuses to create ``body`` (None: it accepts it)."""
    spec = body.get("spec")
    if not isinstance(spec, dict):
        return "spec: Required value"
    name = spec.get("provisioningClassName")
    if not isinstance(name, str) or not name:
        return "spec.provisioningClassName: Required value"
    if len(name) > 253 or not _DNS_SUBDOMAIN.match(name):
        return f"spec.provisioningClassName: Invalid value: {name!r}"
    pod_sets = spec.get("podSets")
    if not isinstance(pod_sets, list) or not pod_sets:
        return "spec.podSets: Required value"
    if len(pod_sets) > MAX_POD_SETS:
        return f"spec.podSets: Too many: {len(pod_sets)}: must have at most {MAX_POD_SETS} items"
    for i, pod_set in enumerate(pod_sets):
        ref = (pod_set or {}).get("podTemplateRef") or {}
        if not _DNS_SUBDOMAIN.match(str(ref.get("name") or "")):
            return f"spec.podSets[{i}].podTemplateRef.name: Invalid value"
        count = pod_set.get("count")
        if not isinstance(count, int) or count < 1:
            return f"spec.podSets[{i}].count: Invalid value: {count!r}: should be >= 1"
    parameters = spec.get("parameters") or {}
    if not isinstance(parameters, dict):
        return "spec.parameters: Invalid value: must be an object"
    if len(parameters) > MAX_PARAMETERS:
        return f"spec.parameters: Too many: must have at most {MAX_PARAMETERS} items"
    for key, value in parameters.items():
        if not isinstance(value, str) or len(value) > MAX_PARAMETER_LENGTH:
            return f"spec.parameters.{key}: Invalid value: a string of at most 255 characters"
    return None


def for_create(body: Object) -> Object:
    """The object as stored: the status subresource ignores ``status`` on create."""
    out = {k: v for k, v in body.items() if k != "status"}
    out.setdefault("apiVersion", GROUP_VERSION)
    return out


def spec_change(old: Object, patch: Object) -> str | None:
    """Why a patch of the main resource is refused: the whole spec is immutable."""
    if "spec" not in patch:
        return None
    if merge_patch(old.get("spec"), patch["spec"]) != old.get("spec"):
        return "spec: Invalid value: Value is immutable"
    return None
