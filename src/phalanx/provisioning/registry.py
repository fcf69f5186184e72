"""Providers by name, as ``ResourceFlavor.provisioning.provider`` names them.

Each factory takes the compute plane the control plane drives; one that cannot serve it
raises ConfigurationError, which fails the jobs that ask for its pools with that message.
A new provider adds its factory here (and its options to ``spec/provisioning.py``).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

from phalanx.compute.base import ComputePlane
from phalanx.errors import SpecError
from phalanx.provisioning.base import ConfigurationError, Provider
from phalanx.spec.resources import ConfigObject, ResourceFlavor

ProviderFactory = Callable[[ComputePlane], Provider]


@dataclass(frozen=True, slots=True)
class ProviderEntry:
    """A provider as the registry knows it before building it: the plane it buys pools for,
    by ``ComputePlane.name``, so deciding which providers serve a plane imports no plane (the
    Kubernetes plane's client is an optional extra), and how to build it."""

    serves: str
    build: ProviderFactory
    what: str  # what it does, for the refusal on another plane


def _local(plane: ComputePlane) -> Provider:
    from phalanx.compute.local.plane import LocalPlane
    from phalanx.provisioning.local import LocalProvider

    assert isinstance(plane, LocalPlane)
    return LocalProvider(plane, plane.home / "pools")


def _kubernetes(plane: ComputePlane) -> Provider:
    from phalanx.compute.kubernetes.plane import KubernetesPlane
    from phalanx.provisioning.kubernetes import ProvisioningRequestProvider

    assert isinstance(plane, KubernetesPlane)
    return ProvisioningRequestProvider(plane.client, plane.namespace)


PROVIDERS: dict[str, ProviderEntry] = {
    "local": ProviderEntry(
        "local", _local, "adds virtual nodes to the local compute plane"),
    "kubernetes-provisioningrequest": ProviderEntry(
        "kubernetes", _kubernetes, "asks a cluster's autoscaler for nodes"),
}


def _refusal(name: str, entry: ProviderEntry, plane: ComputePlane) -> str:
    start = {"local": "start it with --compute local",
             "kubernetes": "start it with --compute kubernetes"}.get(entry.serves, "")
    return (f"the {name} provider {entry.what}, and this control plane drives the "
            f"{plane.name} plane; {start + ', or ' if start else ''}use a provider of that "
            "plane")


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


def _serves(name: str, plane: ComputePlane) -> bool:
    """Whether provider ``name`` can buy pools for ``plane`` (the in-process plane): compared
    by the plane's name, so no plane module (nor its extra) is imported to decide."""
    entry = PROVIDERS.get(name)
    return entry is not None and entry.serves == plane.name


def available_providers(plane: ComputePlane) -> list[str]:
    """The providers this control plane can buy pools through: those of its in-process plane
    (none under --no-local-plane). ``simulated`` is ``phalanx sim``'s alone."""
    try:
        own = in_process(plane)
    except ConfigurationError:
        return []
    return [name for name in sorted(PROVIDERS) if _serves(name, own)]


def unavailable_reason(name: str, plane: ComputePlane) -> str:
    """Why provider ``name`` cannot serve this control plane, in a sentence."""
    if name == "simulated":
        return "provider simulated buys pools in `phalanx sim` only"
    try:
        own = in_process(plane)
    except ConfigurationError as exc:
        return str(exc)
    entry = PROVIDERS.get(name)
    if entry is not None and not _serves(name, own):
        return _refusal(name, entry, own)
    return f"provider {name} is not available in this control plane"


def make_provider(name: str, plane: ComputePlane) -> Provider:
    plane = in_process(plane)
    entry = PROVIDERS.get(name)
    if entry is None:
        raise ConfigurationError(
            f"provider {name} is not available in this control plane (it has "
            f"{', '.join(sorted(PROVIDERS))})")
    if not _serves(name, plane):
        raise ConfigurationError(_refusal(name, entry, plane))
    return entry.build(plane)


def check_providers(objects: Sequence[ConfigObject], plane: ComputePlane) -> None:
    """Refuse a ResourceFlavor whose pools this control plane could not buy (the schema
    takes every provider; ``phalanx sim`` alone implements ``simulated``)."""
    available = available_providers(plane)
    for i, obj in enumerate(objects):
        if not isinstance(obj, ResourceFlavor) or obj.provisioning is None:
            continue
        provider = obj.provisioning.provider
        if provider in available:
            continue
        has = ", ".join(available) if available else "none"
        if provider == "simulated":
            fix = "replay the file with `phalanx sim`" + (
                f", or use provider {' or '.join(available)}" if available else
                ", or remove provisioning from the flavor")
        elif available:
            fix = f"use provider {' or '.join(available)}, or remove provisioning from the flavor"
        else:
            fix = ("remove provisioning from the flavor: this control plane buys no node pools "
                   "(pools are bought for its own compute plane: start it with --compute local "
                   "or kubernetes, without --no-local-plane)")
        raise SpecError(
            f"{unavailable_reason(provider, plane)}; the providers this control plane has: "
            f"{has}; nothing was applied",
            field=f"documents[{i}] (ResourceFlavor {obj.name}).provisioning.provider", fix=fix)
