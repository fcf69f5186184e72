"""Node failures for the simulator: at a rate (seeded), or on a fixed schedule.

A failed node leaves the scheduler's pool (``remove_node``) and the jobs with
pods on it are evicted and queued again; after its repair time it comes back
(``upsert_node``) unchanged. With a rate, each node fails independently after
an exponentially distributed up-time (mean ``1 / rate``), drawn from a
``random.Random(seed)`` in a fixed order, so a run is reproducible. A
scheduled failure of a node that is already down is ignored.
"""

from __future__ import annotations

import random
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from phalanx.errors import SpecError

DAY = 86400.0


@dataclass(frozen=True, slots=True)
class NodeFailure:
    at: float  # seconds of simulated time
    node: str
    down_for: float  # seconds until the node is back


class FailureModel:
    """Where the next failures come from; the simulator asks as nodes come and go."""

    def __init__(self, *, rate_per_day: float = 0.0, repair_seconds: float = 3600.0,
                 schedule: Sequence[NodeFailure] = (), seed: int = 0) -> None:
        if rate_per_day < 0:
            raise SpecError(f"failure rate {rate_per_day:g} is negative",
                            field="failures.ratePerDay", fix="use 0 or more failures per day")
        if repair_seconds <= 0:
            raise SpecError(f"repair time {repair_seconds:g} s is not positive",
                            field="failures.repairSeconds", fix="use a positive number of seconds")
        for i, f in enumerate(schedule):
            if f.at < 0 or f.down_for <= 0:
                raise SpecError(f"failure of {f.node} at {f.at:g} s for {f.down_for:g} s",
                                field=f"failures.schedule[{i}]",
                                fix="use a time >= 0 and a positive down time")
        self.rate = rate_per_day / DAY
        self.repair_seconds = repair_seconds
        self.schedule = tuple(sorted(schedule, key=lambda f: (f.at, f.node)))
        self.seed = seed
        self._rng = random.Random(seed)

    @property
    def enabled(self) -> bool:
        return self.rate > 0 or bool(self.schedule)

    def start(self, nodes: Iterable[str]) -> list[NodeFailure]:
        """The failures known at time 0: the schedule, and each node's first random one."""
        names = sorted(nodes)
        known = set(names)
        for i, f in enumerate(self.schedule):
            if f.node not in known:
                raise SpecError(f"names node {f.node!r}, which is not in the nodes file",
                                field=f"failures.schedule[{i}].node",
                                fix="use the name of a simulated node")
        self._rng = random.Random(self.seed)
        out = list(self.schedule)
        if self.rate > 0:
            out.extend(self._draw(name, 0.0) for name in names)
        return out

    def after_repair(self, node: str, now: float) -> NodeFailure | None:
        """A repaired node's next random failure (None without a rate)."""
        return self._draw(node, now) if self.rate > 0 else None

    def _draw(self, node: str, now: float) -> NodeFailure:
        return NodeFailure(now + self._rng.expovariate(self.rate), node, self.repair_seconds)
