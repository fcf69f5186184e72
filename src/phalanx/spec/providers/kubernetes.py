"""The ``kubernetes-provisioningrequest`` provider: a cluster autoscaler's
ProvisioningRequests (``provisioning/kubernetes.py``, which alone loads the Kubernetes
client)."""

from __future__ import annotations

import re

from phalanx.spec.providers.base import ProviderInfo, register_provider
from phalanx.spec.providers.options import check_mapping

_DNS_SUBDOMAIN = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")


def _check_class_name(value: object) -> None:
    """A ProvisioningRequest's class: a free string the API takes as a DNS subdomain."""
    if not isinstance(value, str) or len(value) > 253 or not _DNS_SUBDOMAIN.match(value):
        raise ValueError(
            f"options.className is {value!r}; write a provisioning class such as "
            "best-effort-atomic-scale-up.autoscaling.x-k8s.io, "
            "check-capacity.autoscaling.x-k8s.io or queued-provisioning.gke.io "
            "(lowercase letters, digits, '-' and '.')")


# A ProvisioningRequest's spec.parameters: at most this many, each at most this long.
MAX_REQUEST_PARAMETERS, MAX_REQUEST_PARAMETER_LENGTH = 100, 255


def _check_parameters(value: object) -> None:
    check_mapping("parameters")(value)
    assert isinstance(value, dict)
    if len(value) > MAX_REQUEST_PARAMETERS:
        raise ValueError(f"options.parameters has {len(value)} entries; a "
                         f"ProvisioningRequest takes at most {MAX_REQUEST_PARAMETERS}")
    for key, text in value.items():
        if len(text) > MAX_REQUEST_PARAMETER_LENGTH:
            raise ValueError(f"options.parameters.{key} is {len(text)} characters long; "
                             f"a ProvisioningRequest takes at most "
                             f"{MAX_REQUEST_PARAMETER_LENGTH}")


# A ProvisioningRequest's spec.podSets takes at most this many.
MAX_POD_SETS = 32

PROVISIONING_REQUEST = register_provider(ProviderInfo(
    "kubernetes-provisioningrequest", what="asks a cluster's autoscaler for nodes",
    serves="kubernetes", build="phalanx.provisioning.kubernetes:build",
    options={"className": _check_class_name, "parameters": _check_parameters},
    max_pod_sets=MAX_POD_SETS,
))
