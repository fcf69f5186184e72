"""Adding a provider touches its own module only: this one declares itself here
(``register_provider``) and is then taken by validation (its options, its pod-set limit),
by apply's check of which providers a control plane has, and built by the registry from
its declaration, on a real simulated compute plane."""

from __future__ import annotations

import builtins

import pytest

from phalanx.compute.base import ComputePlane
from phalanx.compute.simulated import SimulatedPlane
from phalanx.errors import SpecError
from phalanx.provisioning.base import PoolRequest, PoolState, PoolStatus, Provider
from phalanx.provisioning.registry import available_providers, check_providers, make_provider
from phalanx.spec.config import load_config_yaml
from phalanx.spec.providers import ProviderInfo, register_provider
from phalanx.spec.provisioning import check_pod_sets
from phalanx.spec.resources import Node, ResourceFlavor


def _check_colour(value: object) -> None:
    if value not in ("red", "blue"):
        raise ValueError(f"options.colour is {value!r}; write red or blue")


class ColouredPools(Provider):
    """Pools that are Ready at once, kept in memory."""

    name = "coloured-pools"

    def __init__(self, plane: ComputePlane) -> None:
        self.plane = plane
        self.pools: dict[str, PoolStatus] = {}

    def create(self, request: PoolRequest) -> PoolStatus:
        return self.pools.setdefault(request.name, PoolStatus(
            request.name, PoolState.READY, ready_nodes=request.node_count,
            node_count=request.node_count))

    def status(self, name: str) -> PoolStatus | None:
        return self.pools.get(name)

    def list(self) -> builtins.list[PoolStatus]:
        return builtins.list(self.pools.values())

    def delete(self, name: str) -> None:
        self.pools.pop(name, None)


def build(plane: ComputePlane) -> Provider:
    return ColouredPools(plane)


COLOURED = register_provider(ProviderInfo(
    "coloured-pools", what="paints pools", serves="simulated", build=f"{__name__}:build",
    options={"colour": _check_colour}, max_pod_sets=2,
))

FLAVOR = """\
kind: ResourceFlavor
name: painted
nodeLabels: {pool: painted}
provisioning:
  provider: coloured-pools
  node: {cpu: "4"}
  options: {colour: %s}
"""


@pytest.fixture
def plane() -> SimulatedPlane:
    return SimulatedPlane([Node.model_validate({"name": "n1", "allocatable": {"cpu": "4"}})])


def test_its_options_are_checked_by_its_declaration() -> None:
    (flavor,) = load_config_yaml(FLAVOR % "red")
    assert isinstance(flavor, ResourceFlavor) and flavor.provisioning is not None
    assert flavor.provisioning.provider == "coloured-pools"
    with pytest.raises(SpecError, match=r"provisioning\.options\.colour: options\.colour is "
                       r"'green' \(write red or blue\)"):
        load_config_yaml(FLAVOR % "green")


def test_its_pod_set_limit_refuses_a_larger_gang() -> None:
    (flavor,) = load_config_yaml(FLAVOR % "blue")
    assert isinstance(flavor, ResourceFlavor) and flavor.provisioning is not None
    check_pod_sets(2, {"painted": flavor.provisioning})
    with pytest.raises(SpecError, match="carry at most 2") as refused:
        check_pod_sets(3, {"painted": flavor.provisioning})
    assert refused.value.field == "podSets"


def test_apply_takes_it_on_the_plane_it_serves_and_the_registry_builds_it(
        plane: SimulatedPlane) -> None:
    assert available_providers(plane) == ["coloured-pools"]
    check_providers(load_config_yaml(FLAVOR % "red"), plane)  # apply's check: no refusal
    provider = make_provider("coloured-pools", plane)
    assert isinstance(provider, ColouredPools) and provider.plane is plane


def test_an_unknown_provider_is_refused_naming_the_declared_ones() -> None:
    with pytest.raises(SpecError, match=r"'no-such' is no provider.*coloured-pools"):
        load_config_yaml(FLAVOR.replace("coloured-pools", "no-such") % "red")
