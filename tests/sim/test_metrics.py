"""The step-function arithmetic behind utilisation figures and plots."""

from __future__ import annotations

import random

import pytest

from phalanx.sim import Series, percentile, stats


def test_integrals_split_waiting_time() -> None:
    s = Series()
    s.record(0, 4, 8, 0, 1)
    s.record(10, 8, 8, 2, 2)
    s.record(10, 6, 8, 1, 2)  # a second cycle at one instant replaces the state
    s.record(30, 0, 8, 0, 0)
    assert s.t == [0, 10, 30]
    area = s.integrals(40)
    assert area == {"busy": 4 * 10 + 6 * 20, "capacity": 8 * 40, "wait_busy": 6 * 20,
                    "wait_capacity": 8 * 20, "wait_time": 20}


@pytest.mark.parametrize("bins", [1, 7, 600, 1000])
def test_binned_keeps_every_gpu_second(bins: int) -> None:
    rng = random.Random(bins)
    s = Series()
    t = 0.0
    for _ in range(500):
        s.record(t, rng.randrange(0, 64), 64, rng.randrange(0, 9), 0)
        t += rng.choice([0.001, 0.19, 1.0, 3.7, 60.0])
    end = t
    binned = s.binned(end, bins)
    width = end / bins
    assert len(binned["t"]) == bins
    assert sum(binned["busy"]) * width == pytest.approx(s.integrals(end)["busy"], rel=1e-4)
    assert sum(binned["capacity"]) * width == pytest.approx(64 * end, rel=1e-4)
    assert s.binned(0, bins)["t"] == []


def test_percentiles_nearest_rank() -> None:
    values = [float(v) for v in range(1, 101)]
    assert (percentile(values, 50), percentile(values, 99), percentile(values, 100)) == (
        50, 99, 100)
    assert stats([3.0, 1.0, 2.0]) == {"mean": 2.0, "p50": 2.0, "p95": 3.0, "p99": 3.0,
                                     "max": 3.0}
    assert stats([]) == {"mean": 0.0, "p50": 0.0, "p95": 0.0, "p99": 0.0, "max": 0.0}


def test_delays_by_gang_size_and_preemptions_per_job() -> None:
    from phalanx.sim.metrics import JobOutcome, by_gang_size, gang_class, preemptions_per_job

    assert [gang_class(g) for g in (0, 1, 2, 7, 8, 9, 31, 32, 512)] == [
        "1", "1", "2-7", "2-7", "8", "9-31", "9-31", "32+", "32+"]
    jobs = [JobOutcome("a", "t", "t", 1, 0.0, 10.0, first_admit=5.0),
            JobOutcome("b", "t", "t", 1, 0.0, 10.0, first_admit=15.0, preemptions=3),
            JobOutcome("c", "t", "t", 64, 0.0, 10.0, first_admit=100.0, preemptions=1),
            JobOutcome("d", "t", "t", 8, 0.0, 10.0),  # never admitted: no delay
            JobOutcome("e", "t", "t", 8, 0.0, 10.0, rejected="too big")]
    figures = by_gang_size(jobs)
    assert figures["1"] == {"jobs": 2, "mean": 10.0, "p99": 15.0, "max": 15.0}
    assert figures["32+"] == {"jobs": 1, "mean": 100.0, "p99": 100.0, "max": 100.0}
    assert figures["8"]["jobs"] == 0 and figures["2-7"]["jobs"] == 0
    # The rejected job was never submitted, so it is no job of the count.
    assert preemptions_per_job(jobs) == {"mean": 1.0, "p99": 3.0, "max": 3.0,
                                         "jobs_preempted": 2}
