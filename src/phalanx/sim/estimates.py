"""How good are estimated starts? The simulator asks the live estimator and keeps score.

With ``estimate_every`` > 0 the simulator forecasts (``phalanx.control.forecast``, the
control plane's own estimator) at the arrival of every ``estimate_every``-th job, on a
copy of its own scheduler, with run times from its own history of finished jobs (the
trace's team stands for the user), and records the estimated start of every job that
arrived at that instant. At the end it compares each estimate with the job's actual
first admission. The forecast reads no wall clock here (no time limit, only its caps on
cycles and starts), so a replay stays deterministic; estimating is optional because it
costs a forecast per sampled arrival.
"""

from __future__ import annotations

import math

from phalanx.control.forecast import (
    ESTIMATE_QUANTILE,
    RESERVE_QUANTILE,
    Limits,
    RunHistory,
    RunTime,
    forecast,
)
from phalanx.scheduler import JobView, Scheduler
from phalanx.sim.metrics import JobOutcome

LONG_WAIT = 600.0  # seconds: the jobs whose estimates are scored
LIMITS = Limits(max_seconds=math.inf)


class EstimateRecorder:
    def __init__(self, every: int, max_runtime: float | None) -> None:
        self.every = every
        self.max_runtime = max_runtime
        self.history = RunHistory()
        self.team: dict[str, str] = {}
        self.estimated: dict[str, float | None] = {}  # job -> estimated start (None: unknown)
        self.guesses: set[str] = set()
        self.forecasts = 0
        self._arrived = 0

    def arrived(self, outcome: JobOutcome) -> bool:
        """Count an arrival; True when this instant's arrivals are to be estimated."""
        self.team[outcome.name] = outcome.team
        self._arrived += 1
        return self._arrived % self.every == 0

    def estimate(self, scheduler: Scheduler, now: float, names: list[str]) -> None:
        """Forecast now and record the estimated start of ``names`` (this instant's arrivals)."""
        history, team = self.history, self.team
        max_runtime = self.max_runtime

        def expected(view: JobView, elapsed: float, quantile: float = ESTIMATE_QUANTILE
                     ) -> RunTime:
            name = view.spec.name
            who = team.get(name, "")
            return history.expected(who, name, who, max_runtime, elapsed, quantile)

        def reserve(view: JobView, elapsed: float) -> RunTime:
            return expected(view, elapsed, RESERVE_QUANTILE)

        estimates = forecast(scheduler.snapshot(), now, expected, LIMITS, reserve=reserve)
        self.forecasts += 1
        for name in names:
            found = estimates.get(name)
            if found is None:  # (admitted already? none is before the cycle)
                continue
            self.estimated[name] = found.starts_at
            if found.guess:
                self.guesses.add(name)

    def report(self, outcomes: list[JobOutcome]) -> dict[str, object]:
        """For jobs that waited over LONG_WAIT: the share of estimates within 25 % of the
        actual wait and within a factor of 2 (an unknown estimate counts as a miss)."""
        scored = within_quarter = within_double = unknown = guesses = 0
        ratios: list[float] = []  # estimated wait / actual wait
        for o in outcomes:
            if o.name not in self.estimated or o.delay is None or o.delay <= LONG_WAIT:
                continue
            scored += 1
            guesses += o.name in self.guesses
            at = self.estimated[o.name]
            if at is None:
                unknown += 1
                continue
            wait = max(0.0, at - o.submit)
            ratios.append(wait / o.delay)
            within_quarter += abs(wait - o.delay) <= 0.25 * o.delay
            within_double += o.delay / 2 <= wait <= 2 * o.delay
        return {
            "sampled_every": self.every,
            "forecasts": self.forecasts,
            "estimated_jobs": len(self.estimated),
            "scored_jobs": scored,  # estimated, and waited over LONG_WAIT
            "long_wait_seconds": LONG_WAIT,
            "within_25_percent": within_quarter / scored if scored else None,
            "within_factor_2": within_double / scored if scored else None,
            "unknown": unknown,
            "guesses": guesses,
            # Over 1: estimates late (the job started before its estimate); under 1: early.
            "ratio_p25": _quantile(ratios, 0.25),
            "ratio_median": _quantile(ratios, 0.5),
            "ratio_p75": _quantile(ratios, 0.75),
        }


def _quantile(values: list[float], q: float) -> float | None:
    if not values:
        return None
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]
