"""When each pending job should start: the scheduler core run forward in virtual time.

A forecast copies the scheduler (``Scheduler.snapshot``: configuration, nodes, every
job), builds a scheduler of its own from the copy and plays the cluster forward, as the
simulator does: every running job ends at its expected end, each end frees room, a
cycle admits what fits, and what it admits ends in turn. The time a pending job is
admitted in that run is its estimated start. The live scheduler is never touched, so
the forecast runs outside the state's lock and changes no decision.

Expected run times (``expected_run``): a job's ``maxRuntime`` when it has one; else a
percentile of the run times of similar jobs that finished (same user, same LocalQueue,
same name prefix: the name without trailing ``-<digits>`` or ``-<hash>`` parts) among
those that lasted longer than the run has lasted so far: what runs like it that got this
far went on to do. Estimated starts take the 60th percentile (``ESTIMATE_QUANTILE``:
about the typical run; a little above the median because a forecast cannot see the jobs
that will arrive and go first, so on the median it runs early); reservations take a high
percentile (``RESERVE_QUANTILE``: one counted on a run ending early keeps room too late).
A running job that outlived every similar run is expected to run as long again. With
no history, a default run time stands in and the estimate says it is a guess.

The cost is bounded: at most ``max_cycles`` cycles, ``max_starts`` admissions and
``max_seconds`` of the forecasting thread's CPU time (on a busy machine a forecast
takes longer, not less far), bounds a normal queue stays far below; ends close together
share a cycle (within ``RELATIVE_STEP`` of the time looked ahead), so the cycles grow
with the logarithm of the horizon, not with the number of jobs. Jobs the run did not
reach are "unknown".
"""

from __future__ import annotations

import bisect
import gc
import heapq
import math
import re
import threading
import time
from collections import deque
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from functools import lru_cache

from phalanx.scheduler import JobView, Scheduler, SchedulerSnapshot
from phalanx.spec.status import EstimateBasis, StartEstimate

DEFAULT_RUN = 3600.0  # seconds a run with no maxRuntime and no history is taken to last
RESERVE_QUANTILE = 0.9  # run times reservations and backfill count on
ESTIMATE_QUANTILE = 0.6  # run times estimated starts count on (benchmarks.philly: see README)
PERCENTILE = RESERVE_QUANTILE
HISTORY_KEPT = 50  # latest run times kept per kind of run
RELATIVE_STEP = 0.1  # ends within 10 % of the time looked ahead share one cycle
MIN_STEP = 60.0  # seconds: ends within a minute share one cycle
# Strongest first: a start is as sure as the weakest run end it waits for.
_STRENGTH = {EstimateBasis.FREE: 0, EstimateBasis.MAX_RUNTIME: 1, EstimateBasis.HISTORY: 2,
             EstimateBasis.OUTLIVED: 3, EstimateBasis.NO_HISTORY: 4}
_TAIL = re.compile(r"[-_.](?:\d+|(?=[0-9a-f]*\d)[0-9a-f]{5,})$")


@lru_cache(maxsize=1 << 16)  # a forecast asks once per job it admits, a replay per finish
def name_prefix(name: str) -> str:
    """The kind of run a job's name says: without trailing ``-<digits>`` or ``-<hash>``
    parts (``train-7b-0042`` -> ``train-7b``, ``sweep-3f9a2c1-12`` -> ``sweep``)."""
    prefix = name
    while (match := _TAIL.search(prefix)) is not None and match.start() > 0:
        prefix = prefix[:match.start()]
    return prefix


@dataclass(frozen=True, slots=True)
class RunTime:
    seconds: float  # the whole run, from its start
    basis: EstimateBasis


def expected_run(max_runtime: float | None, similar: float | None,
                 elapsed: float = 0.0) -> RunTime:
    """How long a run lasts in all, given its ``max_runtime``, the percentile of similar
    finished runs (``similar``, None: none finished) and how long it has run already."""
    if max_runtime:
        return RunTime(max(max_runtime, elapsed), EstimateBasis.MAX_RUNTIME)
    if similar is not None:
        if elapsed <= similar:
            return RunTime(similar, EstimateBasis.HISTORY)
        return RunTime(2 * elapsed, EstimateBasis.OUTLIVED)
    return RunTime(max(DEFAULT_RUN, 2 * elapsed), EstimateBasis.NO_HISTORY)


class RunHistory:
    """The latest run times of finished jobs by (user, queue, name prefix); thread-safe."""

    def __init__(self, kept: int = HISTORY_KEPT) -> None:
        self.kept = kept
        self._runs: dict[tuple[str, str, str], deque[float]] = {}
        # Each kind's run times in order, until its next run: a forecast asks for the same
        # few kinds once per job it admits.
        self._ordered: dict[tuple[str, str, str], list[float]] = {}
        self._lock = threading.Lock()

    def add(self, user: str, queue: str, name: str, seconds: float) -> None:
        if not (math.isfinite(seconds) and seconds >= 0):
            return
        key = (user, queue, name_prefix(name))
        with self._lock:
            runs = self._runs.get(key)
            if runs is None:
                runs = self._runs[key] = deque(maxlen=self.kept)
            runs.append(seconds)
            self._ordered.pop(key, None)

    def _sorted(self, user: str, queue: str, name: str) -> list[float] | None:
        """The kind's run times in order (shared: callers only read it); None: none."""
        key = (user, queue, name_prefix(name))
        with self._lock:
            ordered = self._ordered.get(key)
            if ordered is None:
                runs = self._runs.get(key)
                if not runs:
                    return None
                ordered = self._ordered[key] = sorted(runs)
            return ordered

    def percentile(self, user: str, queue: str, name: str,
                   quantile: float = PERCENTILE) -> float | None:
        """The ``quantile`` (p90 by default) run time of similar finished jobs; None when
        none finished."""
        ordered = self._sorted(user, queue, name)
        return None if ordered is None else _quantile(ordered, quantile)

    def beyond(self, user: str, queue: str, name: str, elapsed: float,
               quantile: float = PERCENTILE) -> float | None:
        """The ``quantile`` run time of the similar finished jobs that ran longer than
        ``elapsed``; when none did, their longest (at most ``elapsed``: outlived); None
        when none finished."""
        ordered = self._sorted(user, queue, name)
        if ordered is None:
            return None
        first = bisect.bisect_right(ordered, elapsed)  # the runs longer than elapsed
        if first == len(ordered):
            return ordered[-1]
        return ordered[first + _rank(len(ordered) - first, quantile)]

    def expected(self, user: str, spec_name: str, queue: str, max_runtime: float | None,
                 elapsed: float = 0.0, quantile: float = PERCENTILE) -> RunTime:
        return expected_run(max_runtime, None if max_runtime else
                            self.beyond(user, queue, spec_name, elapsed, quantile), elapsed)


def _quantile(ordered: list[float], quantile: float) -> float:
    return ordered[_rank(len(ordered), quantile)]


def _rank(count: int, quantile: float) -> int:
    """The index of the ``quantile`` of ``count`` ordered values (nearest rank)."""
    return min(count - 1, max(0, math.ceil(quantile * count) - 1))


@dataclass(frozen=True, slots=True)
class Limits:
    """A forecast's bounds, against a runaway, not for a normal queue: 10,000 pending jobs
    on 5,000 nodes take about 100 cycles (``benchmarks.estimate``)."""

    max_cycles: int = 5_000
    max_starts: int = 100_000
    max_seconds: float = 10.0  # of CPU time (the thread's)


# (job view, seconds it has run) -> its expected run in all
Expected = Callable[[JobView, float], RunTime]


@dataclass(slots=True)
class _Start:
    at: float
    basis: EstimateBasis


def forecast(snapshot: SchedulerSnapshot, now: float, expected: Expected,
             limits: Limits = Limits(), *, clock: Callable[[], float] = time.thread_time,
             reserve: Expected | None = None) -> dict[str, StartEstimate]:
    """Every pending job of ``snapshot``: its position and estimated start (epoch seconds,
    on the clock of ``now``). Runs end after ``expected``; reservations in the run forward
    count on ``reserve`` (the live scheduler's run times; default ``expected``)."""
    with collector_paused():
        return _forecast(snapshot, now, expected, limits, clock, reserve)


@contextmanager
def collector_paused() -> Iterator[None]:
    """The garbage collector waits until the block ends. A forecast (or a replay) builds a
    scheduler of every job and keeps what it allocates to the end or frees it by reference
    counts, so the collector's passes over that large state would free nothing and cost a
    tenth of a forecast, a third of a replay. (If another thread pauses it meanwhile, as a
    cycle does, whoever paused it first turns it back on.)"""
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()


def _forecast(snapshot: SchedulerSnapshot, now: float, expected: Expected, limits: Limits,
              clock: Callable[[], float], reserve: Expected | None
              ) -> dict[str, StartEstimate]:
    counted = expected if reserve is None else reserve
    deadline = clock() + limits.max_seconds
    scheduler = Scheduler(snapshot.config, snapshot.nodes)
    scheduler.set_fair_sharing(snapshot.fair_sharing)
    views: dict[str, JobView] = {}
    # Reservations (reserveAfter) in the run forward rest on the same run times as the live.
    scheduler.set_run_estimator(
        lambda spec, elapsed: counted(views[spec.name], elapsed).seconds
        if spec.name in views else None)
    ends: list[tuple[float, int, str, EstimateBasis]] = []
    seq = 0
    run_of: dict[str, int] = {}  # the seq of each job's current run in the forecast
    pending: set[str] = set()
    for view in snapshot.jobs:
        name = view.spec.name
        views[name] = view
        if view.admission is None:
            scheduler.submit(view.spec, priority=view.priority, submitted_at=view.submitted_at)
            pending.add(name)
            continue
        scheduler.restore(view.spec, priority=view.priority, submitted_at=view.submitted_at,
                          admission=view.admission, started_at=view.started_at)
        if view.terminating:  # its pods are being stopped: room soon
            end, basis = now, EstimateBasis.FREE
        else:
            began = view.started_at or now
            run = expected(view, max(0.0, now - began))
            end, basis = max(now, began + run.seconds), run.basis
        seq += 1
        run_of[name] = seq
        heapq.heappush(ends, (end, seq, name, basis))
    waiting = set(pending)
    starts: dict[str, _Start] = {}
    fresh: dict[str, RunTime] = {}  # per job admitted in the forecast, its expected run
    weakest = EstimateBasis.FREE
    t = now
    cycles = 0
    while waiting and cycles < limits.max_cycles and len(starts) < limits.max_starts:
        if clock() > deadline:
            break
        result = scheduler.cycle(t)
        cycles += 1
        for adm in result.admissions:
            name = adm.job
            waiting.discard(name)
            if name in pending and name not in starts:
                starts[name] = _Start(t, weakest)
            planned = fresh.get(name)
            if planned is None:  # (a run time from the start is the same at every admission)
                planned = fresh[name] = expected(views[name], 0.0)
            seq += 1
            run_of[name] = seq
            heapq.heappush(ends, (t + planned.seconds, seq, name, planned.basis))
        for p in result.preemptions:
            scheduler.requeue(p.victim)  # stopped at once, as the simulator does
            run_of.pop(p.victim, None)
            waiting.add(p.victim)
        if result.preemptions:
            continue
        protected = scheduler.protection_ends()
        upcoming = [e for e in (ends[0][0] if ends else None, protected)
                    if e is not None and e > t]
        if not upcoming:
            if ends:  # ends at this very instant
                upcoming = [t]
            else:
                break  # nothing ahead frees room: the rest wait beyond the forecast
        nxt = min(upcoming)
        horizon = max(MIN_STEP, (nxt - now) * RELATIVE_STEP)
        t = nxt
        while ends and ends[0][0] <= nxt + horizon:
            end, number, name, basis = heapq.heappop(ends)
            if run_of.get(name) != number:
                continue  # a run the forecast preempted
            del run_of[name]
            t = max(t, end)
            scheduler.remove(name)
            if _STRENGTH[basis] > _STRENGTH[weakest]:
                weakest = basis
    return _estimates(snapshot, views, pending, starts, now)


def _estimates(snapshot: SchedulerSnapshot, views: dict[str, JobView], pending: Iterable[str],
               starts: dict[str, _Start], now: float) -> dict[str, StartEstimate]:
    by_queue: dict[str, list[JobView]] = {}
    for name in pending:
        view = views[name]
        by_queue.setdefault(view.cluster_queue, []).append(view)
    cohort_of = {name: cq.cohort for name, cq in snapshot.config.cluster_queues.items()}
    position: dict[str, int] = {}
    by_cohort: dict[str, list[tuple[float, int, float, str]]] = {}
    for cq, views_of in by_queue.items():
        views_of.sort(key=lambda v: (-v.priority, v.submitted_at))
        cohort = cohort_of.get(cq)
        for i, view in enumerate(views_of, 1):
            name = view.spec.name
            position[name] = i
            if cohort:
                start = starts.get(name)
                by_cohort.setdefault(cohort, []).append(
                    (start.at if start else math.inf, -view.priority, view.submitted_at, name))
    cohort_position: dict[str, int] = {}
    for ranked in by_cohort.values():
        ranked.sort()
        for i, (_, _, _, name) in enumerate(ranked, 1):
            cohort_position[name] = i
    out: dict[str, StartEstimate] = {}
    unknown = (f"unknown: more than {len(starts)} jobs start before it" if starts
               else "unknown: nothing expected to end makes room for it")
    messages = {basis: basis_message(basis) for basis in _STRENGTH}
    for name, pos in position.items():
        start = starts.get(name)
        if start is None:
            out[name] = StartEstimate.model_construct(
                position=pos, cohort_position=cohort_position.get(name), starts_at=None,
                basis=EstimateBasis.UNKNOWN, guess=False, computed_at=now,
                message=unknown)
            continue
        # Built without validation (valid by construction): one per pending job.
        out[name] = StartEstimate.model_construct(
            position=pos, cohort_position=cohort_position.get(name), starts_at=start.at,
            basis=start.basis, guess=start.basis is EstimateBasis.NO_HISTORY,
            computed_at=now, message=messages[start.basis])
    return out


def basis_message(basis: EstimateBasis) -> str:
    """What an estimate rests on, naming no job (the runs ahead may be another team's)."""
    return {
        EstimateBasis.FREE: "room is free: it should start within the next cycles",
        EstimateBasis.MAX_RUNTIME: "the runs it waits for end by their maxRuntime",
        EstimateBasis.HISTORY: "from the run times of similar finished jobs (those that "
                               "ran as long) of the runs it waits for",
        EstimateBasis.OUTLIVED: "a guess: a run it waits for outlived its estimate and is "
                                "expected to run as long again",
        EstimateBasis.NO_HISTORY: "a guess: no history for the kind of run of a job it waits "
                                  "for (no maxRuntime, no similar finished job)",
    }[basis]
