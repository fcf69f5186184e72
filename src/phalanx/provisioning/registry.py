"""Providers by name, as ``ResourceFlavor.provisioning.provider`` names them.

Each factory takes the compute plane the control plane drives; one that cannot serve it
raises ConfigurationError, which fails the jobs that ask for its pools with that message.
A new provider adds its factory here (and its options to ``spec/provisioning.py``).
"""

from __future__ import annotations

from collections.abc import Callable

from phalanx.compute.base import ComputePlane
from phalanx.provisioning.base import ConfigurationError, Provider

ProviderFactory = Callable[[ComputePlane], Provider]


def _local(plane: ComputePlane) -> Provider:
    from phalanx.compute.local.plane import LocalPlane
    from phalanx.provisioning.local import LocalProvider

    if not isinstance(plane, LocalPlane):
        raise ConfigurationError(
            f"the local provider adds virtual nodes to the local compute plane, and this "
            f"control plane drives the {plane.name} plane; use a provider of that plane")
    return LocalProvider(plane, plane.home / "pools")


def _kubernetes(plane: ComputePlane) -> Provider:
    from phalanx.compute.kubernetes.plane import KubernetesPlane
    from phalanx.provisioning.kubernetes import ProvisioningRequestProvider

    if not isinstance(plane, KubernetesPlane):
        raise ConfigurationError(
            f"the kubernetes-provisioningrequest provider asks a cluster's autoscaler for "
            f"nodes, and this control plane drives the {plane.name} plane; start it with "
            "--compute kubernetes, or use a provider of that plane")
    return ProvisioningRequestProvider(plane.client, plane.namespace)


PROVIDERS: dict[str, ProviderFactory] = {"local": _local,
                                         "kubernetes-provisioningrequest": _kubernetes}


def in_process(plane: ComputePlane) -> ComputePlane:
    """The plane pools are bought for: the control plane's own (``phalanx up``'s in-process
    plane). Planes behind workers buy no pools yet: their nodes are the worker's to change."""
    from phalanx.compute.federation import PlaneSet
    from phalanx.spec.planes import LOCAL_PLANE

    if isinstance(plane, PlaneSet):
        member = plane.member(LOCAL_PLANE)
        if member is None:
            raise ConfigurationError(
                "node pools are bought for the control plane's own compute plane, and this one "
                "runs with --no-local-plane; planes behind workers buy no pools")
        return member
    return plane


def make_provider(name: str, plane: ComputePlane) -> Provider:
    plane = in_process(plane)
    factory = PROVIDERS.get(name)
    if factory is None:
        raise ConfigurationError(
            f"provider {name} is not available in this control plane (it has "
            f"{', '.join(sorted(PROVIDERS))})")
    return factory(plane)
