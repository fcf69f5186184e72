"""The simulated compute plane: nodes declared in a file, pods that run for a set time."""

from phalanx.compute.simulated.plane import DURATION_ENV, EXIT_CODE_ENV, SimulatedPlane
from phalanx.spec.nodes import load_nodes, parse_nodes

__all__ = ["DURATION_ENV", "EXIT_CODE_ENV", "SimulatedPlane", "load_nodes", "parse_nodes"]
