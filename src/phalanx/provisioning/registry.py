"""Providers by name, as ``ResourceFlavor.provisioning.provider`` names them, built from
their declarations (``ProviderInfo``, ``spec/providers/``).

Each provider's ``build`` takes the compute plane the control plane drives; one that cannot
serve it raises ConfigurationError, which fails the jobs that ask for its pools with that
message. A new provider declares itself in its own module; nothing here changes.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Sequence
from typing import cast

from phalanx.compute.base import ComputePlane
from phalanx.errors import SpecError
from phalanx.provisioning.base import ConfigurationError, Provider
from phalanx.spec.providers import ProviderInfo, provider_info, providers
from phalanx.spec.resources import ConfigObject, ResourceFlavor

ProviderFactory = Callable[[ComputePlane], Provider]


def _buildable() -> dict[str, ProviderInfo]:
    """The providers a control plane may build, by name: those serving a plane kind."""
    return {p.name: p for p in providers() if p.serves is not None and p.build is not None}


def _factory(info: ProviderInfo) -> ProviderFactory:
    """The provider's ``build``, imported now (its module may load an optional extra)."""
    assert info.build is not None
    module, _, function = info.build.partition(":")
    return cast(ProviderFactory, getattr(importlib.import_module(module), function))


def _refusal(name: str, entry: ProviderInfo, plane: ComputePlane) -> str:
    start = f"start it with --compute {entry.serves}"
    return (f"the {name} provider {entry.what}, and this control plane drives the "
            f"{plane.name} plane; {start}, or use a provider of that plane")


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
    entry = _buildable().get(name)
    return entry is not None and entry.serves == plane.name


def available_providers(plane: ComputePlane) -> list[str]:
    """The providers this control plane can buy pools through: those of its in-process plane
    (none under --no-local-plane). ``simulated`` is ``phalanx sim``'s alone."""
    try:
        own = in_process(plane)
    except ConfigurationError:
        return []
    return [name for name in sorted(_buildable()) if _serves(name, own)]


def unavailable_reason(name: str, plane: ComputePlane) -> str:
    """Why provider ``name`` cannot serve this control plane, in a sentence."""
    declared = provider_info(name)
    if declared is not None and declared.serves is None:
        return f"provider {name} buys pools in `phalanx sim` only"
    try:
        own = in_process(plane)
    except ConfigurationError as exc:
        return str(exc)
    entry = _buildable().get(name)
    if entry is not None and not _serves(name, own):
        return _refusal(name, entry, own)
    return f"provider {name} is not available in this control plane"


def make_provider(name: str, plane: ComputePlane) -> Provider:
    plane = in_process(plane)
    entry = _buildable().get(name)
    if entry is None:
        raise ConfigurationError(
            f"provider {name} is not available in this control plane (it has "
            f"{', '.join(sorted(_buildable()))})")
    if not _serves(name, plane):
        raise ConfigurationError(_refusal(name, entry, plane))
    return _factory(entry)(plane)


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
        declared = provider_info(provider)
        if declared is not None and declared.serves is None:
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
