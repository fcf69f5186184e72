"""Reservations and backfill: a head that waited past reserveAfter keeps its room."""

from __future__ import annotations

from phalanx.scheduler import Scheduler
from phalanx.spec import QueueConfig
from phalanx.spec.resources import JobSpec

from .strategies import cluster_queue, flavor, job, make_config, node


def _config(reserve_after: float | None) -> QueueConfig:
    cq = cluster_queue("q", {"default": {"cpu": 8}})
    return make_config(flavor("default"), cq.model_copy(update={"reserve_after": reserve_after}))


def _runs(spec: JobSpec, seconds: float) -> JobSpec:
    return spec.model_copy(update={"max_runtime": seconds})


def _big_behind_running(reserve_after: float | None) -> Scheduler:
    """Two 4-cpu nodes; ``r2`` holds b until 1000. At 100 ``big`` (both nodes) waits, and
    behind it ``long`` (4 cpu until 5100) and ``short`` (2 cpu until 600) arrive."""
    s = Scheduler(_config(reserve_after), [node("a", cpu=4), node("b", cpu=4)])
    s.submit(_runs(job("r1", "q", cpu=4), 100), priority=0, submitted_at=0)
    s.submit(_runs(job("r2", "q", cpu=4), 1000), priority=0, submitted_at=0)
    assert len(s.cycle(now=0.0).admissions) == 2
    s.remove("r1")
    s.submit(_runs(job("big", "q", cpu=4, replicas=2), 500), priority=0, submitted_at=1)
    s.submit(_runs(job("long", "q", cpu=4), 5000), priority=0, submitted_at=2)
    s.submit(_runs(job("short", "q", cpu=2), 500), priority=0, submitted_at=3)
    return s


def test_without_reserve_after_the_long_job_takes_the_big_ones_room() -> None:
    s = _big_behind_running(None)
    assert [a.job for a in s.cycle(now=100.0).admissions] == ["long"]
    s.remove("r2")
    # short takes half of b, and big waits until long ends at 5100 at least.
    assert [a.job for a in s.cycle(now=1000.0).admissions] == ["short"]


def test_a_reservation_keeps_the_room_and_lets_a_job_that_ends_before_it_through() -> None:
    s = _big_behind_running(0.0)
    # big starts at 1000 at the earliest (r2's end): long would hold a past it, short not.
    assert [a.job for a in s.cycle(now=100.0).admissions] == ["short"]
    assert [a.job for a in s.cycle(now=200.0).admissions] == []
    s.remove("short")
    s.remove("r2")
    assert [a.job for a in s.cycle(now=1000.0).admissions] == ["big"]


def test_no_reservation_before_the_head_has_waited_reserve_after() -> None:
    s = _big_behind_running(3600.0)
    assert [a.job for a in s.cycle(now=100.0).admissions] == ["long"]


def test_a_job_of_unknown_run_time_never_backfills() -> None:
    s = Scheduler(_config(0.0), [node("a", cpu=4), node("b", cpu=4)])
    s.submit(_runs(job("r2", "q", cpu=4), 1000), priority=0, submitted_at=0)
    s.cycle(now=0.0)
    s.submit(_runs(job("big", "q", cpu=4, replicas=2), 500), priority=0, submitted_at=1)
    s.submit(job("unknown", "q", cpu=2), priority=0, submitted_at=2)  # no maxRuntime
    assert s.cycle(now=100.0).admissions == []


def test_the_drivers_estimator_gives_run_times_without_max_runtime() -> None:
    s = Scheduler(_config(0.0), [node("a", cpu=4), node("b", cpu=4)])
    s.set_run_estimator(lambda spec, elapsed: {"r2": 1000.0, "quick": 100.0}.get(spec.name))
    s.submit(job("r2", "q", cpu=4), priority=0, submitted_at=0)
    s.cycle(now=0.0)
    s.submit(job("big", "q", cpu=4, replicas=2), priority=0, submitted_at=1)
    s.submit(job("slow", "q", cpu=2), priority=0, submitted_at=2)  # unknown: held back
    s.submit(job("quick", "q", cpu=1), priority=0, submitted_at=3)  # ends at 200 < 1000
    assert [a.job for a in s.cycle(now=100.0).admissions] == ["quick"]


def test_when_no_running_job_has_a_known_end_nothing_is_kept() -> None:
    s = Scheduler(_config(0.0), [node("a", cpu=4), node("b", cpu=4)])
    s.submit(job("r2", "q", cpu=4), priority=0, submitted_at=0)  # runs for ever, as known
    s.cycle(now=0.0)
    s.submit(job("big", "q", cpu=4, replicas=2), priority=0, submitted_at=1)
    s.submit(job("other", "q", cpu=4), priority=0, submitted_at=2)
    assert [a.job for a in s.cycle(now=100.0).admissions] == ["other"]


def test_the_reservation_ends_when_its_holder_is_admitted() -> None:
    s = _big_behind_running(0.0)
    s.cycle(now=100.0)
    s.remove("short")
    s.remove("r2")
    assert [a.job for a in s.cycle(now=1000.0).admissions] == ["big"]
    s.submit(_runs(job("after", "q", cpu=1), 10), priority=0, submitted_at=1001)
    s.remove("big")
    assert {a.job for a in s.cycle(now=1100.0).admissions} == {"long", "after"}
