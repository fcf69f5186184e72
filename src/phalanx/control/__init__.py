"""The control plane's core: job lifecycle rules, state, the API-facing service and the loop.

Below the HTTP server and above the scheduler and the compute planes; the
simulator shares its lifecycle rules.
"""

from phalanx.control.controller import Controller
from phalanx.control.loop import ControlLoop
from phalanx.control.service import JobService, NodeOverview, QueueOverview
from phalanx.control.state import ControlState

__all__ = ["ControlLoop", "ControlState", "Controller", "JobService", "NodeOverview",
           "QueueOverview"]
