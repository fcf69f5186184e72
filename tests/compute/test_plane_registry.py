"""Adding a compute plane touches its own module only: the ``painted`` plane below declares
itself here (``register_plane``), with an option of its own and a provider that serves it,
and is then built by ``make_plane``, offered by ``phalanx up`` and ``phalanx worker`` (their
``--compute`` choices and flags), refused options meant for other planes, and offers its
provider. The built-in planes' table in docs/architecture.md is made from their
declarations, and reading them loads no optional extra."""

from __future__ import annotations

import builtins
import os
import subprocess
import sys
from pathlib import Path
from typing import cast

import pytest

from phalanx.compute.base import ComputePlane
from phalanx.compute.factory import make_plane
from phalanx.compute.simulated import SimulatedPlane
from phalanx.errors import SpecError
from phalanx.provisioning.base import PoolRequest, PoolState, PoolStatus, Provider
from phalanx.provisioning.registry import available_providers, make_provider
from phalanx.spec import providers as provider_declarations
from phalanx.spec.computeplanes import (
    BUILTIN,
    PlaneInfo,
    PlaneOption,
    PlaneRequest,
    plane_providers,
    plane_table,
    planes,
    register_plane,
)
from phalanx.spec.providers import ProviderInfo, register_provider
from phalanx.spec.resources import Node

REPO = Path(__file__).resolve().parents[2]
COLOURS = ("red", "blue")


class PaintedPlane(SimulatedPlane):
    """Simulated nodes, each labelled with a colour."""

    name = "painted"

    def __init__(self, colour: str) -> None:
        super().__init__([Node(name=f"{colour}-{i}", allocatable={"cpu": "1"},
                               labels={"colour": colour}) for i in range(2)])


def build(request: PlaneRequest) -> PaintedPlane:
    colour = cast(str, request.option("colour") or "red")
    if colour not in COLOURS:
        raise SpecError(f"{colour!r} is not a colour of the painted plane", field="--colour",
                        fix="write red or blue")
    return PaintedPlane(colour)


class PaintPools(Provider):
    """Pools that are Ready at once, kept in memory."""

    name = "paint-pools"

    def __init__(self) -> None:
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


def build_pools(plane: ComputePlane) -> Provider:
    return PaintPools()


COLOUR = PlaneOption("colour", "--colour", "Colour of the nodes: red or blue",
                     refusal="the {plane} compute plane paints nothing")
PAINTED = register_plane(PlaneInfo(
    "painted", what="paints simulated nodes", build=f"{__name__}:build", options=(COLOUR,)))
PAINT_POOLS = register_provider(ProviderInfo(
    "paint-pools", what="buys painted pools", serves="painted", build=f"{__name__}:build_pools"))


def test_a_plane_declared_in_its_own_module_is_built_with_its_options() -> None:
    plane = make_plane("painted", Path("/nonexistent"), colour="blue")
    try:
        assert isinstance(plane, PaintedPlane)
        assert {n.labels["colour"] for n in plane.inventory()} == {"blue"}
    finally:
        plane.close()
    with pytest.raises(SpecError) as bad:
        make_plane("painted", Path("/nonexistent"), colour="green")
    assert bad.value.field == "--colour" and "not a colour" in bad.value.message


def test_options_of_other_planes_are_refused_naming_the_flag_and_its_planes(
        tmp_path: Path) -> None:
    with pytest.raises(SpecError) as other:
        make_plane("painted", tmp_path, max_pods=4)
    assert other.value.field == "--max-pods"
    assert "painted compute plane's nodes say how many pods" in other.value.message
    assert other.value.fix == "use --max-pods with --compute local only"
    with pytest.raises(SpecError) as theirs:
        make_plane("simulated", tmp_path, colour="red")
    assert theirs.value.field == "--colour"
    assert theirs.value.message == "the simulated compute plane paints nothing"
    assert theirs.value.fix == "use --colour with --compute painted only"
    with pytest.raises(SpecError) as unknown:
        make_plane("cloud", tmp_path)
    assert unknown.value.field == "--compute"
    assert "'painted'" in (unknown.value.fix or "") and "'local'" in (unknown.value.fix or "")


def test_a_plane_offers_the_providers_that_serve_it() -> None:
    assert plane_providers("painted") == ["paint-pools"]
    assert plane_providers("local") == ["local"]
    assert plane_providers("kubernetes") == ["kubernetes-provisioningrequest"]
    plane = make_plane("painted", Path("/nonexistent"))
    try:
        assert available_providers(plane) == ["paint-pools"]
        assert isinstance(make_provider("paint-pools", plane), PaintPools)
    finally:
        plane.close()


def test_the_registry_lists_every_plane_in_the_order_declared() -> None:
    names = [p.name for p in planes()]
    assert names[:3] == ["local", "simulated", "kubernetes"]
    assert "painted" in names


# The CLI in a fresh interpreter that has imported this module: its verbs are made from the
# planes declared, the painted one included.
CLI = """
import sys
import tests.compute.test_plane_registry
from phalanx.cli.main import run
sys.argv = ["phalanx", *sys.argv[1:]]
run()
"""


def _phalanx(tmp_path: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PHALANX_HOME": str(tmp_path / "home"), "COLUMNS": "200"}
    return subprocess.run([sys.executable, "-c", CLI, *args], cwd=REPO, env=env,
                          capture_output=True, text=True, timeout=120)


def test_up_and_worker_offer_a_plane_declared_in_its_own_module(tmp_path: Path) -> None:
    for verb in ("up", "worker"):
        shown = _phalanx(tmp_path, verb, "--help")
        assert shown.returncode == 0, shown.stderr
        assert "local|simulated|kubernetes|painted" in shown.stdout
        assert "--colour" in shown.stdout and "(for --compute painted)" in shown.stdout
    refused = _phalanx(tmp_path, "up", "--compute", "local", "--colour", "red")
    assert refused.returncode != 0
    assert "--colour" in refused.stderr and "--compute painted" in refused.stderr
    # The option reaches the plane's own build, which refuses a colour it has not.
    unpainted = _phalanx(tmp_path, "up", "--compute", "painted", "--colour", "green",
                         "--port", "0")
    assert unpainted.returncode != 0
    assert "'green' is not a colour of the painted plane" in unpainted.stderr


def test_the_docs_table_of_planes_is_made_from_their_declarations() -> None:
    page = (REPO / "docs" / "architecture.md").read_text()
    table = plane_table(BUILTIN, provider_declarations.BUILTIN)
    assert f"-->\n{table}\n<!--" in page, table


# Listing planes and reading their options (the CLI's verbs included) in a fresh
# interpreter, and building the simulated plane: nothing of the Kubernetes plane loads.
NO_EXTRA = """
import sys
from pathlib import Path
import phalanx.cli.serve, phalanx.cli.worker
from phalanx.compute.factory import make_plane
from phalanx.spec.computeplanes import planes
nodes = Path(sys.argv[1])
nodes.write_text("- name: n1\\n  allocatable: {cpu: '1'}\\n")
plane = make_plane("simulated", nodes.parent, nodes_file=nodes)
print([p.name for p in planes()], [n.name for n in plane.inventory()])
plane.close()
print("loaded", sorted(m for m in sys.modules if m.split(".")[0] in ("kubernetes", "urllib3")
                       or m.startswith("phalanx.compute.kubernetes")))
"""


def test_choosing_a_plane_imports_no_plane_of_an_extra(tmp_path: Path) -> None:
    done = subprocess.run([sys.executable, "-c", NO_EXTRA, str(tmp_path / "nodes.yaml")],
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert lines[0] == "['local', 'simulated', 'kubernetes'] ['n1']"
    assert lines[1] == "loaded []", done.stdout


def test_a_cli_default_applies_to_its_own_verb_and_plane_only() -> None:
    from phalanx.cli.planeoptions import plane_args, read_plane_options

    # up's local plane checks this machine's health every minute unless told otherwise; a
    # worker's (no --health-interval there) and another plane's do not.
    assert read_plane_options("up", "local", {}) == {"health_interval": 60.0}
    assert read_plane_options("up", "local", {"health_interval": "5m"}) == {
        "health_interval": 300.0}
    assert read_plane_options("worker", "local", {}) == {}
    assert read_plane_options("up", "simulated", {}) == {}
    # `up -d` hands the options on as flags that read back the same.
    read = read_plane_options("up", "local", {"max_pods": 4, "health_interval": "90s"})
    assert plane_args(read) == ["--max-pods", "4", "--health-interval", "90s"]
    with pytest.raises(SpecError) as bad:
        read_plane_options("up", "local", {"health_interval": "often"})
    assert bad.value.field == "--health-interval"
