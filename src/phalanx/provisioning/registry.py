"""Providers by name, as ``ResourceFlavor.provisioning.provider`` names them, built from
their declarations (``ProviderInfo``, ``spec/providers/``).

A flavor's pools are bought for the compute plane its nodeLabels pin it to
(``phalanx.dev/plane``), the control plane's own by default. Each provider's ``build`` takes
the plane it serves: the control plane builds those of its in-process plane; a plane behind
a worker offers the providers its worker built (``worker/pools.py``), driven through a
proxy (``remote.py``). One that cannot serve the plane raises ConfigurationError, which
fails the jobs that ask for its pools with that message. A new provider declares itself in
its own module; nothing here changes.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import cast

from phalanx.compute.base import ComputePlane
from phalanx.errors import SpecError
from phalanx.lazy import imported
from phalanx.provisioning.base import ConfigurationError, Provider
from phalanx.spec.planes import LOCAL_PLANE, PLANE_LABEL
from phalanx.spec.providers import ProviderInfo, provider_info, providers
from phalanx.spec.resources import ConfigObject, ResourceFlavor

ProviderFactory = Callable[[ComputePlane], Provider]


def _buildable() -> dict[str, ProviderInfo]:
    """The providers a control plane may build, by name: those serving a plane kind."""
    return {p.name: p for p in providers() if p.serves is not None and p.build is not None}


def _factory(info: ProviderInfo) -> ProviderFactory:
    """The provider's ``build``, imported now (its module may load an optional extra)."""
    assert info.build is not None
    return cast(ProviderFactory, imported(info.build))


def _refusal(name: str, entry: ProviderInfo, plane: ComputePlane) -> str:
    start = f"start it with --compute {entry.serves}"
    return (f"the {name} provider {entry.what}, and this control plane drives the "
            f"{plane.name} plane; {start}, or use a provider of that plane")


def pool_plane(node_labels: Mapping[str, str]) -> str:
    """The compute plane a flavor's pools are bought for: the one its nodeLabels pin it to
    (``phalanx.dev/plane``), else the control plane's own."""
    return node_labels.get(PLANE_LABEL, LOCAL_PLANE)


def target_plane(plane: ComputePlane, where: str = LOCAL_PLANE) -> ComputePlane:
    """The member plane ``where`` pools are bought for: the in-process plane of ``phalanx
    up``, or a plane behind a worker (a ``RemotePlane``, which offers its worker's
    providers)."""
    from phalanx.compute.federation import PlaneSet

    if isinstance(plane, PlaneSet):
        member = plane.member(where)
        if member is None:
            if where == LOCAL_PLANE:
                raise ConfigurationError(
                    "node pools are bought for the control plane's own compute plane unless "
                    "the flavor's nodeLabels name another (phalanx.dev/plane), and this one "
                    "runs with --no-local-plane")
            raise ConfigurationError(f"there is no compute plane {where} to buy node pools "
                                     "for (phalanx plane list)")
        return member
    if where != LOCAL_PLANE:
        raise ConfigurationError(f"there is no compute plane {where} to buy node pools for")
    return plane


def _serves(name: str, plane: ComputePlane) -> bool:
    """Whether provider ``name`` can buy pools for ``plane``: one behind a worker by what
    the worker offers (any provider of a plane kind, until it says); the in-process one by
    the plane's name, so no plane module (nor its extra) is imported to decide."""
    from phalanx.compute.remote import RemotePlane

    entry = _buildable().get(name)
    if entry is None:
        return False
    if isinstance(plane, RemotePlane):
        offered = plane.pools.offered
        return offered is None or name in offered
    return entry.serves == plane.name


def available_providers(plane: ComputePlane, where: str = LOCAL_PLANE) -> list[str]:
    """The providers this control plane can buy pools through for plane ``where``: those of
    that plane (none under --no-local-plane for the in-process one). ``simulated`` is
    ``phalanx sim``'s alone."""
    try:
        member = target_plane(plane, where)
    except ConfigurationError:
        return []
    return [name for name in sorted(_buildable()) if _serves(name, member)]


def unavailable_reason(name: str, plane: ComputePlane, where: str = LOCAL_PLANE) -> str:
    """Why provider ``name`` cannot serve plane ``where`` of this control plane, in a
    sentence."""
    from phalanx.compute.remote import RemotePlane

    declared = provider_info(name)
    if declared is not None and declared.serves is None:
        return f"provider {name} buys pools in `phalanx sim` only"
    try:
        member = target_plane(plane, where)
    except ConfigurationError as exc:
        return str(exc)
    entry = _buildable().get(name)
    if entry is not None and isinstance(member, RemotePlane):
        return (f"the worker of compute plane {where} does not offer provider {name} (it "
                f"offers {', '.join(member.pools.offered or []) or 'none'})")
    if entry is not None and not _serves(name, member):
        return _refusal(name, entry, member)
    return f"provider {name} is not available in this control plane"


def make_provider(name: str, plane: ComputePlane, where: str = LOCAL_PLANE) -> Provider:
    """Provider ``name`` for plane ``where``: built here for the in-process plane, a proxy
    driving the worker's provider for a plane behind a worker."""
    from phalanx.compute.remote import RemotePlane

    member = target_plane(plane, where)
    entry = _buildable().get(name)
    if entry is None:
        raise ConfigurationError(
            f"provider {name} is not available in this control plane (it has "
            f"{', '.join(sorted(_buildable()))})")
    if isinstance(member, RemotePlane):
        from phalanx.provisioning.remote import RemoteProvider

        return RemoteProvider(name, member)  # (what the worker offers is checked at create)
    if not _serves(name, member):
        raise ConfigurationError(_refusal(name, entry, member))
    return _factory(entry)(member)


def build_provider(name: str, plane: ComputePlane) -> Provider:
    """Provider ``name`` built on ``plane`` itself (a worker builds those it offers)."""
    entry = _buildable().get(name)
    if entry is None or entry.serves != plane.name:
        raise ConfigurationError(f"provider {name} does not buy pools for a {plane.name} plane")
    return _factory(entry)(plane)


def check_providers(objects: Sequence[ConfigObject], plane: ComputePlane) -> None:
    """Refuse a ResourceFlavor whose pools this control plane could not buy (the schema
    takes every provider; ``phalanx sim`` alone implements ``simulated``)."""
    for i, obj in enumerate(objects):
        if not isinstance(obj, ResourceFlavor) or obj.provisioning is None:
            continue
        where = pool_plane(obj.node_labels)
        available = available_providers(plane, where)
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
            fix = ("remove provisioning from the flavor, or pin the flavor to a plane that buys "
                   "node pools (nodeLabels phalanx.dev/plane: a plane whose worker offers "
                   "them; unpinned: the control plane's own, started with --compute local or "
                   "kubernetes, without --no-local-plane)")
        raise SpecError(
            f"{unavailable_reason(provider, plane, where)}; the providers this control plane has: "
            f"{has}; nothing was applied",
            field=f"documents[{i}] (ResourceFlavor {obj.name}).provisioning.provider", fix=fix)
