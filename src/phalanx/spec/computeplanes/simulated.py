"""The ``simulated`` compute plane: nodes read from a file, pods that run no code
(``compute/simulated/``)."""

from __future__ import annotations

from phalanx.spec.computeplanes.base import OptionKind, PlaneInfo, PlaneOption, register_plane

NODES = PlaneOption("nodes_file", "--nodes", "YAML file of nodes (a list of nodes)",
                    kind=OptionKind.FILE)

SIMULATED = register_plane(PlaneInfo(
    "simulated", what="simulates the nodes of a file; its pods run no code",
    build="phalanx.compute.simulated.build:build", options=(NODES,),
))
