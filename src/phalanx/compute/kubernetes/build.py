"""Building the Kubernetes plane from its declaration's options
(``spec/computeplanes/kubernetes.py``)."""

from __future__ import annotations

from pathlib import Path
from typing import cast

from phalanx.compute.kubernetes.plane import KubernetesPlane
from phalanx.spec.computeplanes import PlaneRequest


def build(request: PlaneRequest) -> KubernetesPlane:
    """A worker's plane (``plane_name``) runs its pods under the fence of its own Lease,
    scaled to the worker's ``fence_after`` and copied into each pod from ``fence_image``
    (default: ``$PHALANX_K8S_FENCE_IMAGE``), and its objects carry the plane's and the
    control plane's identity (the plane acts on no one else's). The control plane's own
    plane (no ``plane_name``) leaves its objects untagged, as it always has."""
    labelled = request.plane_name is not None
    return KubernetesPlane.connect(
        home=request.home, kubeconfig=cast(Path | None, request.option("kubeconfig")),
        namespace=cast(str | None, request.option("namespace")),
        default_image=cast(str | None, request.option("default_image")),
        node_lost_grace=cast(float | None, request.option("node_lost_grace")),
        plane=request.plane_name,
        control_plane=request.control_plane if labelled else None,
        fence_after=request.fence_after,
        fence_image=cast(str | None, request.option("fence_image")),
        allowed_service_accounts=cast(tuple[str, ...],
                                      request.option("allowed_service_accounts") or ()),
        manage_namespaces=cast(str | None, request.option("manage_namespaces")))
