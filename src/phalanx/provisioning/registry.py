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


PROVIDERS: dict[str, ProviderFactory] = {"local": _local}


def make_provider(name: str, plane: ComputePlane) -> Provider:
    factory = PROVIDERS.get(name)
    if factory is None:
        raise ConfigurationError(
            f"provider {name} is not available in this control plane (it has "
            f"{', '.join(sorted(PROVIDERS))})")
    return factory(plane)
