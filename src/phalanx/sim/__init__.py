"""Discrete-event simulation: job traces replayed in virtual time through the scheduler core.

``simulate(config, nodes, trace, policy)`` runs the same ``phalanx.scheduler.Scheduler``
the control plane drives, against simulated nodes, and returns utilisation, queueing
delay, completion times and per-team share (see ``metrics``).
"""

from phalanx.sim.engine import Simulator, simulate
from phalanx.sim.failures import FailureModel, NodeFailure
from phalanx.sim.metrics import JobOutcome, Series, SimResult, TeamShare, percentile, stats
from phalanx.sim.nodes import load_nodes, parse_nodes, racked_nodes
from phalanx.sim.policy import POLICIES, Policy, policy_named
from phalanx.sim.trace import TraceFormat, TraceJob, parse_trace, read_trace

__all__ = [
    "POLICIES",
    "FailureModel",
    "JobOutcome",
    "NodeFailure",
    "Policy",
    "Series",
    "SimResult",
    "Simulator",
    "TeamShare",
    "TraceFormat",
    "TraceJob",
    "load_nodes",
    "parse_nodes",
    "parse_trace",
    "percentile",
    "policy_named",
    "racked_nodes",
    "read_trace",
    "simulate",
    "stats",
]
