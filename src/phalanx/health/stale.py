"""A doctor that stopped reporting: its node's last answers are no longer news.

A node whose doctor last reported longer ago than ``stale_after`` seconds is at least
degraded (WARN: shown, avoided by queues that avoid degraded nodes, but not fenced),
with a reason saying since when; an unhealthy node stays unhealthy. Both planes apply
it: the local plane to its in-process doctor, the Kubernetes plane to the heartbeat
the node's doctor writes in its condition.
"""

from __future__ import annotations

from phalanx.spec.resources import NodeHealth

DEFAULT_STALE_AFTER = 300.0  # five missed reports at the doctor's default 60 s interval
STALE_CHECK = "DoctorSilent"


def stale_after_for(interval: float) -> float:
    """The default for a doctor reporting every ``interval`` seconds: five missed reports,
    and never under the default."""
    return max(DEFAULT_STALE_AFTER, 5 * interval)


def is_stale(last_report: float | None, now: float, stale_after: float) -> bool:
    return last_report is not None and now - last_report > stale_after


def mark_stale(health: NodeHealth, reasons: list[str], last_report: float, now: float,
               stale_after: float) -> tuple[NodeHealth, list[str]]:
    """The node's health and reasons once its doctor is silent."""
    reason = (f"{STALE_CHECK}: the node doctor last reported {now - last_report:.0f}s ago "
              f"(stale after {stale_after:g}s); its checks' answers are out of date")
    if health is NodeHealth.HEALTHY:
        health = NodeHealth.DEGRADED
    return health, [reason, *reasons]


class DoctorWatch:
    """When an in-process doctor last reported, and whether its node is marked silent."""

    def __init__(self) -> None:
        self.stale_after = DEFAULT_STALE_AFTER
        self.heard: float | None = None
        self.silent = False

    def start(self, now: float, stale_after: float) -> None:
        self.heard, self.stale_after, self.silent = now, stale_after, False

    def report(self, now: float) -> None:
        self.heard, self.silent = now, False

    def falls_silent(self, now: float) -> bool:
        """True once, when the doctor has just been silent for too long."""
        if self.heard is None or self.silent or not is_stale(self.heard, now, self.stale_after):
            return False
        self.silent = True
        return True
