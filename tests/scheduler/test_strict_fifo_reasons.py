"""StrictFIFO reasons stay right across cycles while a deep queue waits behind its head.

A blocked StrictFIFO queue gives its reason once, to the queue, and every job behind
its head reads it; these tests change what could leave a job with a stale reason
(a job joins or leaves, the head or its reason changes) between cycles and check
every job's reason afterwards.
"""

from __future__ import annotations

from phalanx.scheduler import PendingCode, Scheduler

from .strategies import cluster_queue, flavor, job, make_config, node

Q = PendingCode


def _scheduler() -> Scheduler:
    config = make_config(flavor("default"),
                         cluster_queue("q", {"default": {"cpu": 4}}, strategy="StrictFIFO"))
    return Scheduler(config, [node("n", pool="default")])


def _reasons(s: Scheduler, names: list[str]) -> dict[str, str]:
    s.cycle()
    return {n: s.pending_reason(n).code.value for n in names}  # type: ignore[union-attr]


def test_jobs_behind_a_blocked_head_keep_and_gain_the_strict_reason() -> None:
    s = _scheduler()
    s.submit(job("run", "q", cpu=3), priority=0, submitted_at=1)
    s.cycle()
    s.submit(job("head", "q", cpu=4), priority=0, submitted_at=2)
    behind = [f"b{i}" for i in range(5)]
    for i, name in enumerate(behind):
        s.submit(job(name, "q", cpu=1), priority=0, submitted_at=3 + i)
    for _ in range(3):  # the same blockage cycle after cycle
        reasons = _reasons(s, ["head", *behind])
        assert reasons["head"] == Q.QUOTA_EXHAUSTED.value
        assert all(reasons[b] == Q.STRICT_FIFO_BLOCKED.value for b in behind), reasons
    # a newcomer joins the blocked queue between cycles
    s.submit(job("late", "q", cpu=1), priority=0, submitted_at=20)
    assert _reasons(s, ["late"])["late"] == Q.STRICT_FIFO_BLOCKED.value
    reason = s.pending_reason("late")
    assert reason is not None and "behind head" in reason.message
    # a job behind leaves: the others still wait, with the same reason
    s.remove("b0")
    reasons = _reasons(s, behind[1:])
    assert all(r == Q.STRICT_FIFO_BLOCKED.value for r in reasons.values())
    # the head leaves: the next in line becomes the head and runs; the rest name it
    s.remove("head")
    s.cycle()
    reason = s.pending_reason("late")
    assert reason is None or "behind head" not in reason.message


def test_a_higher_priority_newcomer_becomes_the_head_everyone_waits_for() -> None:
    s = _scheduler()
    s.submit(job("run", "q", cpu=3), priority=0, submitted_at=1)
    s.cycle()
    s.submit(job("head", "q", cpu=4), priority=0, submitted_at=2)
    s.submit(job("b", "q", cpu=1), priority=0, submitted_at=3)
    s.cycle()
    s.cycle()
    s.submit(job("urgent", "q", cpu=4), priority=10, submitted_at=4)
    s.cycle()
    for name in ("head", "b"):
        reason = s.pending_reason(name)
        assert reason is not None and reason.code is Q.STRICT_FIFO_BLOCKED
        assert "behind urgent" in reason.message, reason.message
