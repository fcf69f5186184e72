"""A job that waits to borrow keeps what the cohort frees from lower-priority borrowers.

Cohort ``co``: ``a`` and ``b`` lend 4 CPU each, ``c`` owns nothing and borrows. ``a``
runs its own 4 CPU; ``c`` borrows ``b``'s 4 with one-CPU jobs. A 4-CPU job of ``a``
would then borrow, so it can reclaim nothing and must wait for the cohort to free
4 CPU; without a reservation, every CPU freed goes to ``c``'s next small job first.
"""

from __future__ import annotations

from phalanx.scheduler import PendingCode, Scheduler

from .strategies import cluster_queue, cohort, flavor, job, make_config, node


def _world(a_borrowing_limit: int | None = None, *, fair_sharing: bool = False,
           big_priority: int = 200) -> Scheduler:
    a_quota = 4 if a_borrowing_limit is None else (4, a_borrowing_limit, None)
    config = make_config(
        flavor("default"),
        cohort("co"),
        cluster_queue("a", {"default": {"cpu": a_quota}}, cohort="co", reclaim="Any"),
        cluster_queue("b", {"default": {"cpu": 4}}, cohort="co", reclaim="Any"),
        cluster_queue("c", {"default": {"cpu": 0}}, cohort="co", reclaim="Any"),
    )
    s = Scheduler(config, [node("n", cpu=8, pool="default")])
    s.set_fair_sharing(fair_sharing)  # without it, jobs rank by priority across queues
    s.submit(job("a-own", "a", cpu=4), priority=100, submitted_at=1)
    for i in range(4):
        s.submit(job(f"c{i}", "c", cpu=1), priority=0, submitted_at=1 + i / 10)
    admitted = {a.job for a in s.cycle().admissions}
    assert admitted == {"a-own", "c0", "c1", "c2", "c3"}
    s.submit(job("big", "a", cpu=4), priority=big_priority, submitted_at=2)
    for i in range(4, 10):
        s.submit(job(f"c{i}", "c", cpu=1), priority=0, submitted_at=2 + i / 10)
    result = s.cycle()
    assert not result.admissions and not result.preemptions
    return s


def test_freed_capacity_gathers_for_the_job_that_waits_to_borrow() -> None:
    s = _world()
    for finished in ["c0", "c1", "c2"]:
        s.remove(finished)
        result = s.cycle()
        assert not result.admissions, f"after {finished} ended: {result.admissions}"
        held = s.pending_reason("c4")
        assert held is not None and held.code is PendingCode.COHORT_EXHAUSTED
        assert "big" in held.message and "keeps its free cpu of default" in held.message
    s.remove("c3")
    assert [a.job for a in s.cycle().admissions] == ["big"]
    s.remove("big")
    assert {a.job for a in s.cycle().admissions} == {"c4", "c5", "c6", "c7"}


def test_under_fair_sharing_a_queue_with_a_lower_share_goes_first() -> None:
    s = _world(fair_sharing=True)
    s.remove("c0")
    s.cycle()  # c still borrows the most: big ranks first and keeps the freed CPU
    assert s.pending_reason("c4") is not None
    s.remove("c1")
    # c now borrows 2, below a's share with big: c ranks first, and nothing holds it back.
    assert [a.job for a in s.cycle().admissions] == ["c4"]


def test_jobs_of_the_same_priority_are_not_held_back() -> None:
    s = _world(big_priority=0)
    s.remove("c0")
    assert [a.job for a in s.cycle().admissions] == ["c4"]


def test_a_queue_within_its_nominal_quota_is_not_held_back() -> None:
    s = _world()
    s.remove("c0")
    s.submit(job("b-own", "b", cpu=1), priority=0, submitted_at=3)
    # b uses 1 of its 4: its own quota, however the job that waits ranks.
    assert [a.job for a in s.cycle().admissions] == ["b-own"]


def test_nothing_is_kept_for_a_job_its_own_borrowing_limit_stops() -> None:
    s = _world(a_borrowing_limit=2)  # big would take a to 8 CPU, above 4 + 2
    s.remove("c0")
    assert [a.job for a in s.cycle().admissions] == ["c4"]


def test_the_hold_lasts_through_a_cycle_that_does_not_look_at_its_job() -> None:
    s = _world()
    s.remove("c0")
    assert not s.cycle().admissions
    # Nothing big waits for changed, so the cycle skips it; the hold must not lapse.
    s.submit(job("c-new", "c", cpu=1), priority=0, submitted_at=3.5)
    assert not s.cycle().admissions
    held = s.pending_reason("c4")
    assert held is not None and "big" in held.message


def test_a_bigger_job_that_fits_its_own_flavor_is_not_settled_by_a_held_one() -> None:
    config = make_config(
        flavor("f1"), flavor("f2"), cohort("co"),
        cluster_queue("a", {"f1": {"cpu": 4}}, cohort="co", reclaim="Any"),
        cluster_queue("b", {"f1": {"cpu": 4}}, cohort="co", reclaim="Any"),
        cluster_queue("c", {"f1": {"cpu": 0}, "f2": {"cpu": 3}}, cohort="co", reclaim="Any"),
    )
    s = Scheduler(config, [node("n1", cpu=8, pool="f1"), node("n2", cpu=8, pool="f2")])
    s.set_fair_sharing(False)
    s.submit(job("a-own", "a", cpu=4), priority=100, submitted_at=1)
    s.submit(job("b-own", "b", cpu=3), priority=100, submitted_at=1)
    s.cycle()
    s.submit(job("big", "a", cpu=2), priority=200, submitted_at=2)
    s.submit(job("c1", "c", cpu=1), priority=0, submitted_at=3)  # would borrow f1: held
    s.submit(job("c2", "c", cpu=3), priority=0, submitted_at=4)  # f2, within c's quota
    assert [a.job for a in s.cycle().admissions] == ["c2"]
    held = s.pending_reason("c1")
    assert held is not None and "big" in held.message


def test_a_job_that_could_never_fit_keeps_nothing() -> None:
    config = make_config(
        flavor("default"), cohort("co"),
        cluster_queue("a", {"default": {"cpu": 4, "memory": "8Gi"}}, cohort="co",
                      reclaim="Any"),
        cluster_queue("c", {"default": {"cpu": 0, "memory": "8Gi"}}, cohort="co",
                      reclaim="Any"),
    )
    s = Scheduler(config, [node("n", cpu=4, pool="default")])
    s.set_fair_sharing(False)
    s.submit(job("a-own", "a", cpu=3), priority=100, submitted_at=1)
    s.cycle()
    # 2 CPU would fit once a-own ends, but 100Gi of memory never will.
    s.submit(job("big", "a", cpu=2, memory="100Gi"), priority=200, submitted_at=2)
    s.submit(job("c1", "c", cpu=1), priority=0, submitted_at=3)
    assert [a.job for a in s.cycle().admissions] == ["c1"]
