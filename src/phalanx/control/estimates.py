"""The live control plane's estimated starts: a forecast in the background, off the lock.

Every ``interval`` seconds (after a forecast that took long, ``pace`` times its cost) the
forecaster looks whether the stored state changed (the
state's ``generation``, bumped by every write) or ``refresh`` seconds went by (running
jobs age, which moves the estimates of those that outlive theirs). If so it copies the
scheduler under the state's lock (``Scheduler.snapshot``: references, no deep copy),
releases the lock, and runs the forecast (``control/forecast.py``) on the copy. The
result replaces ``state.estimates`` whole, which the routes read without the lock. So a
forecast never delays a cycle or a request, and never changes a decision.
"""

from __future__ import annotations

import logging
import time

from phalanx.control.forecast import (
    ESTIMATE_QUANTILE,
    RESERVE_QUANTILE,
    Limits,
    RunTime,
    forecast,
)
from phalanx.control.periodic import Periodic
from phalanx.control.state import ControlState
from phalanx.scheduler import JobView
from phalanx.spec.status import JobStatus, StartEstimate
from phalanx.store import Store

log = logging.getLogger("phalanx.estimates")
HISTORY_LOADED = 5000  # finished jobs read from the store at start
PACE = 3.0  # the pause after a forecast, in multiples of its cost: at most a quarter of a core


def load_history(state: ControlState, store: Store, limit: int = HISTORY_LOADED) -> None:
    """Run times of the latest succeeded jobs, so a restart keeps its estimates."""
    for record in store.list_jobs(statuses=[JobStatus.SUCCEEDED], limit=limit):
        if record.started_at is not None and record.finished_at is not None:
            state.history.add(record.user, record.queue, record.name,
                              record.finished_at - record.started_at)


class StartForecaster(Periodic):
    _thread_name = "phalanx-estimates"
    # estimates are advice: keep the last ones, try again
    _failure = "estimating start times failed"
    _log = log

    def __init__(self, state: ControlState, *, interval: float = 5.0, refresh: float = 30.0,
                 limits: Limits = Limits(), pace: float = PACE) -> None:
        super().__init__()
        self.state = state
        self.interval = interval
        self.refresh = refresh
        self.limits = limits
        self.pace = pace
        self.cost = 0.0  # wall seconds of the latest forecast
        self._generation = -1
        self._last = 0.0

    def _period(self) -> float:
        # A forecast of a long queue takes seconds: the next waits ``pace`` times as long, so
        # estimating never takes more than a share of the machine, however busy the queue.
        return max(self.interval, self.pace * self.cost)

    def _pass(self) -> None:
        self.update()

    def update(self, *, force: bool = False) -> bool:
        """Forecast again if the state changed or the last forecast is old; True if it did."""
        state = self.state
        with state.lock:
            stale = time.monotonic() - self._last >= self.refresh
            if not force and state.generation == self._generation and not stale:
                return False
            self._generation = state.generation
            snapshot = state.scheduler.snapshot()
            users = {name: record.user for name, record in state.jobs.items()}
            now = state.clock()
        history = state.history

        def expected(view: JobView, elapsed: float, quantile: float = ESTIMATE_QUANTILE
                     ) -> RunTime:
            spec = view.spec
            return history.expected(users.get(spec.name, ""), spec.name, spec.queue,
                                    spec.max_runtime, elapsed, quantile)

        def reserve(view: JobView, elapsed: float) -> RunTime:
            return expected(view, elapsed, RESERVE_QUANTILE)

        began = time.monotonic()
        estimates = forecast(snapshot, now, expected, self.limits, reserve=reserve)
        state.estimates = estimates
        self._last = time.monotonic()
        self.cost = self._last - began
        self._observe(estimates, list(snapshot.config.cluster_queues), now)
        return True

    def _observe(self, estimates: dict[str, StartEstimate], queues: list[str],
                 now: float) -> None:
        """The metric: per ClusterQueue, the estimated wait of its next and its last job."""
        head: dict[str, float] = {}
        tail: dict[str, float] = {}
        with self.state.lock:
            cluster_queue = {name: r.cluster_queue for name, r in self.state.jobs.items()}
        for name, estimate in estimates.items():
            cq = cluster_queue.get(name)
            if cq is None or estimate.starts_at is None:
                continue
            wait = max(0.0, estimate.starts_at - now)
            if estimate.position == 1:
                head[cq] = wait
            tail[cq] = max(tail.get(cq, 0.0), wait)
        self.state.metrics.observe_waits(head, tail, queues)
