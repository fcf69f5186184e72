"""What a simulated cluster's nodes cost: node-hours paid, idle node-hours, spend.

A node is paid from the moment it exists (a fixed node from the start, a provisioned one
from the moment its pool is created, while it boots) until it is gone, at its price per
node-hour. It is idle while it is paid and holds no pod: a booting node is idle, and so
is a node kept by an idle TTL. The same meter serves a fixed cluster and an autoscaled
one, so the two compare on one definition.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass


@dataclass(slots=True)
class _Up:
    since: float  # when it started being paid
    price: float  # per node-hour
    pods: int = 0
    idle_since: float | None = None  # when it last became empty (None while it holds pods)


class NodeMeter:
    """Node-seconds paid and idle, and spend, integrated over virtual time."""

    def __init__(self) -> None:
        self._up: dict[str, _Up] = {}
        self.paid_seconds = 0.0
        self.idle_seconds = 0.0
        self.spend = 0.0  # in the unit of pricePerNodeHour
        self.peak_nodes = 0

    def add(self, node: str, now: float, price: float = 0.0) -> None:
        if node in self._up:
            raise ValueError(f"node {node} is already metered")
        self._up[node] = _Up(now, price, idle_since=now)
        self.peak_nodes = max(self.peak_nodes, len(self._up))

    def remove(self, node: str, now: float) -> None:
        up = self._up.pop(node)
        self._close(up, now)

    def place(self, nodes: Iterable[str], now: float) -> None:
        """One pod per name in ``nodes`` starts (a name may repeat)."""
        for node in nodes:
            up = self._up.get(node)
            if up is None:
                continue  # a node this meter does not pay for
            if up.pods == 0 and up.idle_since is not None:
                self.idle_seconds += now - up.idle_since
                up.idle_since = None
            up.pods += 1

    def free(self, nodes: Iterable[str], now: float) -> None:
        """One pod per name in ``nodes`` ends."""
        for node in nodes:
            up = self._up.get(node)
            if up is None:
                continue
            up.pods -= 1
            if up.pods == 0:
                up.idle_since = now

    def nodes(self) -> int:
        return len(self._up)

    def is_idle(self, node: str) -> bool:
        up = self._up.get(node)
        return up is not None and up.pods == 0

    def close(self, end: float) -> None:
        """Charge every node still up until ``end`` (the end of the run)."""
        for up in self._up.values():
            self._close(up, end)
        self._up.clear()

    def _close(self, up: _Up, now: float) -> None:
        paid = max(0.0, now - up.since)
        self.paid_seconds += paid
        self.spend += paid / 3600 * up.price
        if up.idle_since is not None:
            self.idle_seconds += max(0.0, now - up.idle_since)

    def figures(self) -> dict[str, float]:
        return {"node_hours": self.paid_seconds / 3600, "idle_node_hours": self.idle_seconds / 3600,
                "spend": self.spend, "peak_nodes": float(self.peak_nodes)}
