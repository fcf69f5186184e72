"""Building the simulated plane from its declaration's options
(``spec/computeplanes/simulated.py``)."""

from __future__ import annotations

from pathlib import Path
from typing import cast

from phalanx.compute.simulated.plane import SimulatedPlane
from phalanx.errors import SpecError
from phalanx.spec.computeplanes import PlaneRequest
from phalanx.store.logs import LogStore


def build(request: PlaneRequest) -> SimulatedPlane:
    nodes_file = cast(Path | None, request.option("nodes_file"))
    if nodes_file is None:
        raise SpecError(
            "the simulated compute plane needs its nodes", field="--nodes",
            fix="pass --nodes FILE (a YAML list of nodes)",
        )
    return SimulatedPlane.from_file(nodes_file, logs_root=LogStore.for_home(request.home).root)
