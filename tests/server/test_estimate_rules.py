"""The rules of estimated starts: expected run times, kinds of run, and the forward run."""

from __future__ import annotations

from pathlib import Path

import pytest

from phalanx.control.forecast import (
    DEFAULT_RUN,
    ESTIMATE_QUANTILE,
    RESERVE_QUANTILE,
    RunHistory,
    RunTime,
    expected_run,
    forecast,
    name_prefix,
)
from phalanx.scheduler import JobView, Scheduler
from phalanx.spec import GPU, JobSpec, Node, QueueConfig
from phalanx.spec.status import EstimateBasis, JobStatus

H = 3600.0
MaxR, Hist, Out, NoH = (EstimateBasis.MAX_RUNTIME, EstimateBasis.HISTORY,
                        EstimateBasis.OUTLIVED, EstimateBasis.NO_HISTORY)


@pytest.mark.parametrize(
    ("max_runtime", "similar", "elapsed", "seconds", "basis"),
    [
        (2 * H, None, 0.0, 2 * H, MaxR),  # maxRuntime, nothing finished like it
        (2 * H, 5 * H, 0.0, 2 * H, MaxR),  # maxRuntime wins over history
        (2 * H, None, 1.5 * H, 2 * H, MaxR),  # the deadline ends it: no outliving
        (None, 3 * H, 0.0, 3 * H, Hist),  # history's percentile
        (None, 3 * H, 2 * H, 3 * H, Hist),  # still within it
        (None, 3 * H, 4 * H, 8 * H, Out),  # outlived: as long again
        (None, None, 0.0, DEFAULT_RUN, NoH),  # a guess
        (None, None, 3 * H, 6 * H, NoH),  # a guess that outlived the default too
    ],
)
def test_expected_run(max_runtime: float | None, similar: float | None, elapsed: float,
                      seconds: float, basis: EstimateBasis) -> None:
    assert expected_run(max_runtime, similar, elapsed) == RunTime(seconds, basis)


@pytest.mark.parametrize(
    ("name", "prefix"),
    [
        ("train-7b-0042", "train-7b"),
        ("sweep-3f9a2c1-12", "sweep"),
        ("eval_17", "eval"),
        ("resnet", "resnet"),
        ("decade-final", "decade-final"),  # no digit: not a hash
        ("12345", "12345"),  # never stripped to nothing
    ],
)
def test_name_prefix(name: str, prefix: str) -> None:
    assert name_prefix(name) == prefix


def test_history_is_a_high_percentile_of_similar_runs_only() -> None:
    history = RunHistory()
    for minutes in range(1, 11):  # 1..10 minutes
        history.add("ada", "team-a", f"train-{minutes:04d}", minutes * 60.0)
    history.add("bob", "team-a", "train-0099", 99 * H)  # another user: not similar
    history.add("ada", "team-b", "train-0099", 99 * H)  # another queue: not similar
    history.add("ada", "team-a", "eval-0001", 99 * H)  # another kind of run
    assert history.percentile("ada", "team-a", "train-0500") == 9 * 60.0  # p90 of 1..10
    assert history.percentile("ada", "team-a", "infer-1") is None
    assert history.expected("ada", "train-0500", "team-a", None) == RunTime(540.0, Hist)
    assert history.expected("ada", "train-0500", "team-a", 60.0) == RunTime(60.0, MaxR)
    assert history.expected("ada", "infer-1", "team-a", None).basis is NoH


def test_history_counts_only_the_similar_runs_that_lasted_as_long() -> None:
    history = RunHistory()
    for minutes in range(1, 11):  # 1..10 minutes
        history.add("ada", "team-a", f"train-{minutes:04d}", minutes * 60.0)
    median, high = 0.5, RESERVE_QUANTILE
    assert median < ESTIMATE_QUANTILE < high  # estimates: about the typical run
    assert history.expected("ada", "train-1", "team-a", None) == RunTime(540.0, Hist)  # p90
    # Not started: the median of all ten, or their p90.
    assert history.expected("ada", "train-1", "team-a", None, 0.0, median) == RunTime(300.0, Hist)
    assert history.expected("ada", "train-1", "team-a", None, 0.0, high) == RunTime(540.0, Hist)
    # Six and a half minutes in, only the runs of 7..10 minutes are like it.
    assert history.expected("ada", "train-1", "team-a", None, 390.0, median) == RunTime(
        480.0, Hist)
    assert history.expected("ada", "train-1", "team-a", None, 390.0, high) == RunTime(
        600.0, Hist)
    # Past the longest: outlived, as long again.
    assert history.expected("ada", "train-1", "team-a", None, 660.0, median) == RunTime(
        1320.0, Out)
    # maxRuntime still wins.
    assert history.expected("ada", "train-1", "team-a", 120.0, 390.0, median) == RunTime(
        390.0, MaxR)


def _config() -> QueueConfig:
    return QueueConfig.default_for([_node()])


def _node() -> Node:
    return Node.model_validate({"name": "n1", "allocatable": {"cpu": 8, GPU: 4}})


def _job(name: str, gpus: int, max_runtime: str | None = None) -> JobSpec:
    return JobSpec.model_validate({
        "name": name, "queue": "default", "maxRuntime": max_runtime,
        "podSets": [{"name": "w", "replicas": 1, "resources": {GPU: gpus},
                     "command": ["true"]}]})


def test_forecast_orders_the_queue_and_dates_each_start_by_the_ends_ahead() -> None:
    config = _config()
    scheduler = Scheduler(config, [_node()])
    t0 = 1000.0  # (a start at 0 reads as "not given")
    scheduler.submit(_job("running", 4, "1h"), priority=0, submitted_at=t0)
    assert [a.job for a in scheduler.cycle(t0).admissions] == ["running"]
    scheduler.submit(_job("next", 4, "30m"), priority=0, submitted_at=t0 + 10)
    scheduler.submit(_job("after", 2), priority=0, submitted_at=t0 + 20)
    scheduler.cycle(t0 + 600)  # nothing fits: both wait

    def expected(view: JobView, elapsed: float) -> RunTime:
        return expected_run(view.spec.max_runtime, None, elapsed)

    estimates = forecast(scheduler.snapshot(), t0 + 600, expected)
    assert estimates["next"].position == 1 and estimates["after"].position == 2
    assert estimates["next"].starts_at == pytest.approx(t0 + H)  # "running" hits maxRuntime
    assert estimates["next"].basis is MaxR and not estimates["next"].guess
    assert estimates["after"].starts_at == pytest.approx(t0 + 1.5 * H)
    assert estimates["after"].basis is MaxR
    # The live scheduler is untouched: the same jobs still wait, the same one runs.
    assert scheduler.admitted_jobs() == {"running"}
    assert scheduler.pending_count("default") == 2


def test_a_start_behind_a_run_without_history_is_marked_a_guess() -> None:
    scheduler = Scheduler(_config(), [_node()])
    scheduler.submit(_job("mystery", 4), priority=0, submitted_at=1000.0)
    scheduler.cycle(1000.0)
    scheduler.submit(_job("waiting", 4), priority=0, submitted_at=1001.0)
    estimates = forecast(scheduler.snapshot(), 1060.0,
                         lambda v, e: expected_run(v.spec.max_runtime, None, e))
    estimate = estimates["waiting"]
    assert estimate.guess and estimate.basis is NoH
    assert estimate.starts_at == pytest.approx(1000.0 + DEFAULT_RUN)
    assert "no history" in estimate.message
    assert "mystery" not in estimate.message  # the runs ahead may be another team's


def test_jobs_beyond_the_cap_are_unknown() -> None:
    from phalanx.control.forecast import Limits

    scheduler = Scheduler(_config(), [_node()])
    scheduler.submit(_job("running", 4, "1h"), priority=0, submitted_at=0.0)
    scheduler.cycle(0.0)
    for i in range(5):
        scheduler.submit(_job(f"w-{i}", 4, "1h"), priority=0, submitted_at=1.0 + i)
    estimates = forecast(scheduler.snapshot(), 0.0,
                         lambda v, e: expected_run(v.spec.max_runtime, None, e),
                         Limits(max_starts=2))
    assert [estimates[f"w-{i}"].starts_at is not None for i in range(5)] == [
        True, True, False, False, False]
    assert estimates["w-4"].basis is EstimateBasis.UNKNOWN
    assert estimates["w-4"].position == 5
    assert "more than 2 jobs" in estimates["w-4"].message


def test_the_benchmark_runs_at_a_small_scale() -> None:
    from benchmarks.estimate import run

    result = run(nodes=100, pending=200, queues=10, cohorts=2, seed=1)
    assert result["pending"] == 200
    full = result["full"]
    assert full["estimated"] == 200 and full["unknown"] == 0  # no caps: every job
    assert result["capped"]["estimated"] + result["capped"]["unknown"] == 200


@pytest.mark.parametrize(
    ("status", "starts_in", "basis", "shown"),
    [
        (JobStatus.QUEUED, 12 * 60.0, MaxR, "~12m"),
        (JobStatus.QUEUED, 3 * H + 100, Hist, "~3h"),
        (JobStatus.QUEUED, 2.2 * 86400, Hist, "~2d"),
        (JobStatus.QUEUED, 20.0, EstimateBasis.FREE, "<1m"),
        (JobStatus.QUEUED, 40 * 60.0, NoH, "~40m*"),  # a guess is marked
        (JobStatus.QUEUED, None, EstimateBasis.UNKNOWN, "?"),
        (JobStatus.RUNNING, None, None, "-"),  # only queued jobs start
    ],
)
def test_starts_column(status: JobStatus, starts_in: float | None, basis: EstimateBasis | None,
                       shown: str) -> None:
    from phalanx.cli.render import estimate_text, starts_text
    from phalanx.spec.status import JobRecord, StartEstimate

    now = 1_000_000.0
    estimate = None if basis is None else StartEstimate(
        position=3, cohort_position=7, basis=basis, guess=basis is NoH, computed_at=now,
        starts_at=None if starts_in is None else now + starts_in)
    record = JobRecord(name="j", spec=_job("j", 1), status=status, queue="default",
                       cluster_queue="default", submitted_at=now, queued_at=now,
                       estimate=estimate)
    assert starts_text(record, now) == shown
    if status is JobStatus.QUEUED:
        assert estimate_text(record, now) == f"#3 in default (#7 in its cohort), starts {shown}"
    else:
        assert estimate_text(record, now) == ""


def test_reservations_in_the_forecast_count_on_the_reserve_run_times() -> None:
    """A job that backfills only if it ends before a reservation: the forecast judges that
    with ``reserve``'s (the live scheduler's) run times, and dates ends with ``expected``'s."""
    base = _config()
    name, cq = next(iter(base.cluster_queues.items()))
    config = base.model_copy(update={"cluster_queues": {
        name: cq.model_copy(update={"reserve_after": 0.0})}})
    scheduler = Scheduler(config, [_node()])
    t0 = 1000.0
    scheduler.submit(_job("running", 2, "1h"), priority=0, submitted_at=t0)
    scheduler.cycle(t0)
    scheduler.submit(_job("big", 4), priority=0, submitted_at=t0 + 1)
    scheduler.submit(_job("small", 2), priority=0, submitted_at=t0 + 2)
    # Live, big holds a reservation at running's end, and small (no known run time) waits.
    assert scheduler.cycle(t0 + 60).admissions == []

    def typical(view: JobView, elapsed: float) -> RunTime:
        return expected_run(view.spec.max_runtime, 600.0, elapsed)

    def cautious(view: JobView, elapsed: float) -> RunTime:
        return expected_run(view.spec.max_runtime, 2 * H, elapsed)

    # Counting on the typical 10 minutes, small would end before big's start: it backfills.
    alike = forecast(scheduler.snapshot(), t0 + 60, typical)
    assert alike["small"].starts_at == pytest.approx(t0 + 60)
    # Counting on 2 hours for reservations it does not; it starts when big's 10 minutes end.
    apart = forecast(scheduler.snapshot(), t0 + 60, typical, reserve=cautious)
    assert apart["big"].starts_at == pytest.approx(t0 + H)
    assert apart["small"].starts_at == pytest.approx(t0 + H + 600)


def test_history_answers_from_the_latest_runs_after_each_new_one() -> None:
    history = RunHistory(kept=3)
    for seconds in (100.0, 200.0, 300.0):
        history.add("ann", "default", "train-1", seconds)
    assert history.percentile("ann", "default", "train-9", 1.0) == 300.0
    assert history.beyond("ann", "default", "train-9", 150.0, 0.5) == 200.0
    history.add("ann", "default", "train-4", 50.0)  # pushes out 100 s; asked again at once
    assert history.percentile("ann", "default", "train-9", 0.0) == 50.0
    assert history.beyond("ann", "default", "train-9", 250.0, 0.5) == 300.0
    assert history.beyond("ann", "default", "train-9", 400.0) == 300.0  # all outlived


@pytest.mark.parametrize("enabled", [True, False])
def test_a_forecast_leaves_the_garbage_collector_as_it_found_it(enabled: bool) -> None:
    import gc

    scheduler = Scheduler(_config(), [_node()])
    scheduler.submit(_job("running", 4, "1h"), priority=0, submitted_at=1000.0)
    scheduler.cycle(1000.0)
    scheduler.submit(_job("waiting", 4, "1h"), priority=0, submitted_at=1001.0)
    was = gc.isenabled()
    try:
        (gc.enable if enabled else gc.disable)()
        estimates = forecast(scheduler.snapshot(), 1060.0,
                             lambda v, e: expected_run(v.spec.max_runtime, None, e))
        assert gc.isenabled() is enabled
    finally:
        (gc.enable if was else gc.disable)()
    assert estimates["waiting"].starts_at == pytest.approx(1000.0 + H)


def test_a_long_forecast_spaces_out_the_next(tmp_path: Path) -> None:
    from phalanx.control.estimates import StartForecaster
    from phalanx.control.state import ControlState
    from phalanx.store import Store

    config, nodes = _config(), [_node()]
    scheduler = Scheduler(config, nodes)
    for i in range(3):
        scheduler.submit(_job(f"w-{i}", 4, "1h"), priority=0, submitted_at=1000.0 + i)
    state = ControlState(Store(f"sqlite:///{tmp_path / 'jobs.db'}"), scheduler, config, nodes)
    forecaster = StartForecaster(state, interval=0.001, pace=1e6)
    assert forecaster._period() == 0.001  # nothing forecast yet
    assert forecaster.update(force=True)
    assert set(state.estimates) == {"w-0", "w-1", "w-2"}
    assert forecaster.cost > 0
    assert forecaster._period() == 1e6 * forecaster.cost  # the pace, not the interval
