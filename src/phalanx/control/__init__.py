"""The control plane's core: job lifecycle rules, state, the API-facing service and the loop.

Below the HTTP server and above the scheduler and the compute planes. The names
below load on first use, so the simulator, which shares only ``lifecycle``, loads
no compute plane or store through this package.
"""

from __future__ import annotations

from importlib import import_module
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from phalanx.control.controller import Controller
    from phalanx.control.loop import ControlLoop
    from phalanx.control.service import JobService, NodeOverview, QueueOverview
    from phalanx.control.state import ControlState

_HOMES = {
    "Controller": "phalanx.control.controller",
    "ControlLoop": "phalanx.control.loop",
    "ControlState": "phalanx.control.state",
    "JobService": "phalanx.control.service",
    "NodeOverview": "phalanx.control.service",
    "QueueOverview": "phalanx.control.service",
}

__all__ = ["ControlLoop", "ControlState", "Controller", "JobService", "NodeOverview",
           "QueueOverview"]

if not TYPE_CHECKING:

    def __getattr__(name: str) -> Any:
        home = _HOMES.get(name)
        if home is None:
            raise AttributeError(f"module 'phalanx.control' has no attribute {name!r}")
        value = getattr(import_module(home), name)
        globals()[name] = value
        return value
