"""The local compute plane: runs admitted jobs' pods as process groups on this machine."""

from phalanx.compute.local.gpus import GPUInfo, discover_gpus
from phalanx.compute.local.plane import LocalPlane

__all__ = ["GPUInfo", "LocalPlane", "discover_gpus"]
