"""Compute planes: where admitted jobs run. One interface, several implementations."""

from phalanx.compute.base import ComputePlane, PodPhase, PodRef, PodState

__all__ = ["ComputePlane", "PodPhase", "PodRef", "PodState"]
