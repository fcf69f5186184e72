"""holdForLargeGangs: a big head that has waited long enough holds its ClusterQueue.

One ClusterQueue of 64 GPUs on eight 8-GPU nodes; ``run`` holds 40 of them. ``big`` (32
GPUs) arrives at 1 and cannot start; ``small`` (8 GPUs) arrives behind it and fits.
Under BestEffortFIFO ``small`` passes ``big``; with the setting, once ``big`` has waited
``after``, it does not.
"""

from __future__ import annotations

from phalanx.scheduler import PendingCode, Scheduler
from phalanx.spec import LocalQueue, QueueConfig
from phalanx.spec.resources import GPU, HoldForLargeGangs

from .strategies import cluster_queue, flavor, job, make_config, node

HOUR = 3600.0


def _config(hold: HoldForLargeGangs | None) -> QueueConfig:
    cq = cluster_queue("q", {"default": {GPU: 64, "cpu": 1000}})
    config = make_config(flavor("default"),
                         cq.model_copy(update={"hold_for_large_gangs": hold}))
    # A second team's LocalQueue on the same ClusterQueue.
    return config.merged([LocalQueue(name="other", cluster_queue="q")])


def _big_waits(hold: HoldForLargeGangs | None, big_gpus: int = 32) -> Scheduler:
    s = Scheduler(_config(hold), [node(f"n{i}", gpu=8) for i in range(8)])
    s.submit(job("run", "q", gpu=8, replicas=5), priority=0, submitted_at=0)
    assert [a.job for a in s.cycle(now=0.0).admissions] == ["run"]
    s.submit(job("big", "q", gpu=8, replicas=big_gpus // 8), priority=0, submitted_at=1)
    s.submit(job("small", "q", gpu=8), priority=0, submitted_at=2)
    s.submit(job("theirs", "other", gpu=8), priority=0, submitted_at=3)
    return s


def _admitted(s: Scheduler, now: float) -> list[str]:
    return sorted(a.job for a in s.cycle(now=now).admissions)


HOLD = HoldForLargeGangs(min_gpus=9, after=6 * HOUR)


def test_a_big_head_that_waited_past_after_holds_smaller_jobs_behind_it() -> None:
    s = _big_waits(HOLD)
    assert _admitted(s, 7 * HOUR) == []
    for name in ("small", "theirs"):
        reason = s.pending_reason(name)
        assert reason is not None and reason.code is PendingCode.STRICT_FIFO_BLOCKED
        assert "holdForLargeGangs" in reason.message
    # The head's own LocalQueue sees it named; another LocalQueue's job learns nothing of it.
    named = s.pending_reason("small")
    unnamed = s.pending_reason("theirs")
    assert named is not None and "behind big in ClusterQueue q" in named.message
    assert unnamed is not None and "big" not in unnamed.message
    assert "another LocalQueue" in unnamed.message
    # When the room frees, the head starts first, then the rest as they fit.
    s.remove("run")
    assert _admitted(s, 7 * HOUR + 60) == ["big", "small", "theirs"]


def test_before_after_the_queue_is_best_effort_fifo() -> None:
    s = _big_waits(HOLD)
    assert _admitted(s, 5 * HOUR) == ["small", "theirs"]


def test_without_the_setting_smaller_jobs_pass_the_big_head() -> None:
    s = _big_waits(None)
    assert _admitted(s, 7 * HOUR) == ["small", "theirs"]
    reason = s.pending_reason("big")
    assert reason is not None and reason.code is not PendingCode.STRICT_FIFO_BLOCKED


def test_a_head_under_min_gpus_holds_nothing() -> None:
    s = _big_waits(HoldForLargeGangs(min_gpus=33, after=6 * HOUR))
    assert _admitted(s, 7 * HOUR) == ["small", "theirs"]


def test_without_a_clock_nothing_is_held() -> None:
    s = _big_waits(HOLD)
    assert sorted(a.job for a in s.cycle().admissions) == ["small", "theirs"]


def test_the_settings_own_queue_info_stays_best_effort() -> None:
    """The hold is the cycle's: the ClusterQueue's setting is not turned into StrictFIFO,
    so once the head is gone the queue lets jobs pass again."""
    s = _big_waits(HOLD)
    assert _admitted(s, 7 * HOUR) == []
    s.remove("big")
    assert _admitted(s, 7 * HOUR + 60) == ["small", "theirs"]
    s.submit(job("big2", "q", gpu=8, replicas=4), priority=0, submitted_at=7 * HOUR + 100)
    s.submit(job("after", "q", gpu=8), priority=0, submitted_at=7 * HOUR + 101)
    # big2 has not waited 6 h: the 8-GPU job behind it takes the last 8 GPUs.
    assert _admitted(s, 7 * HOUR + 200) == ["after"]
