"""A node-pool provider as the control plane knows it before loading it: its name (what
``ResourceFlavor.provisioning.provider`` says), what it does, the compute plane kind it buys
pools for, its options and limits, and where its implementation is. Declarations import
nothing of the implementation (which may need an optional extra): the provisioning registry
imports it only to build the provider."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

from phalanx.errors import InternalError

OptionCheck = Callable[[object], None]  # raises ValueError naming options.<key> and the fix


@dataclass(frozen=True, slots=True)
class ProviderInfo:
    name: str
    what: str  # what it does, in a sentence's middle ("adds virtual nodes to ...")
    # The compute plane kind it buys pools for, by ``ComputePlane.name``; None: the
    # simulator's alone (``phalanx sim`` builds it itself).
    serves: str | None
    # ``module:function`` that builds it from the plane it serves; imported only to build.
    build: str | None
    options: Mapping[str, OptionCheck] = field(default_factory=dict)
    max_pod_sets: int | None = None  # the most pod sets one pool's request may carry


_PROVIDERS: dict[str, ProviderInfo] = {}


def register_provider(info: ProviderInfo) -> ProviderInfo:
    """Make ``info`` known by its name (a module declares its provider once, at import)."""
    known = _PROVIDERS.get(info.name)
    if known is not None and known != info:
        raise InternalError(f"two providers are named {info.name}",
                            fix="give the new provider a name of its own")
    _PROVIDERS[info.name] = info
    return info


def provider_info(name: str) -> ProviderInfo | None:
    return _PROVIDERS.get(name)


def providers() -> list[ProviderInfo]:
    """Every provider declared so far, in the order declared."""
    return list(_PROVIDERS.values())
