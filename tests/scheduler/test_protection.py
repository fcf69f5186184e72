"""minRuntime preemption protection and least-work-lost victim order."""

from __future__ import annotations

import random

from phalanx.scheduler import Scheduler
from phalanx.spec import QueueConfig
from phalanx.spec.resources import PriorityClass

from .strategies import cluster_queue, cohort, flavor, job, make_config, node

HOUR = 3600.0


def _cohort_config(min_runtime: float | None = None) -> QueueConfig:
    """Two queues of 4 cpu each in one cohort: ``lender`` lends to ``borrower`` and
    reclaims what it lent."""
    lender = cluster_queue("lender", {"default": {"cpu": 4}}, cohort="c", reclaim="Any")
    borrower = cluster_queue("borrower", {"default": {"cpu": 4}}, cohort="c")
    if min_runtime is not None:
        borrower = borrower.model_copy(update={"min_runtime": min_runtime})
    return make_config(flavor("default"), cohort("c"), lender, borrower)


def _borrow_all(s: Scheduler, now: float) -> None:
    for i in range(8):
        s.submit(job(f"b{i}", "borrower", cpu=1), priority=0, submitted_at=i)
    admitted = s.cycle(now=now).admissions
    assert len(admitted) == 8  # the borrower holds the lender's quota too


def test_min_runtime_protects_a_young_job_from_reclaim_until_it_has_run_long_enough() -> None:
    s = Scheduler(_cohort_config(min_runtime=HOUR), [node("n", cpu=8)])
    _borrow_all(s, now=0.0)
    s.submit(job("owner", "lender", cpu=2), priority=0, submitted_at=10)
    young = s.cycle(now=HOUR / 2)
    assert not young.preemptions and not young.admissions  # every borrowed job is protected
    old = s.cycle(now=HOUR + 1)
    assert len(old.preemptions) == 2  # past minRuntime the lender reclaims as usual


def test_without_min_runtime_the_same_reclaim_happens_at_once() -> None:
    s = Scheduler(_cohort_config(), [node("n", cpu=8)])
    _borrow_all(s, now=0.0)
    s.submit(job("owner", "lender", cpu=2), priority=0, submitted_at=10)
    assert len(s.cycle(now=HOUR / 2).preemptions) == 2


def test_min_runtime_of_a_priority_class_protects_its_jobs() -> None:
    config = _cohort_config().merged([PriorityClass(name="protected", value=0,
                                                    min_runtime=HOUR)])
    s = Scheduler(config, [node("n", cpu=8)])
    for i in range(8):
        spec = job(f"b{i}", "borrower", cpu=1)
        if i < 6:  # six protected, two not
            spec = spec.model_copy(update={"priority": "protected"})
        s.submit(spec, priority=0, submitted_at=i)
    assert len(s.cycle(now=0.0).admissions) == 8
    s.submit(job("owner", "lender", cpu=2), priority=0, submitted_at=10)
    victims = {p.victim for p in s.cycle(now=60.0).preemptions}
    assert victims == {"b6", "b7"}


def test_min_runtime_never_shields_a_job_from_its_own_queue() -> None:
    config = make_config(flavor("default"), cluster_queue(
        "q", {"default": {"cpu": 2}}, within="LowerPriority"))
    config = config.merged([config.cluster_queues["q"].model_copy(
        update={"min_runtime": HOUR})])
    s = Scheduler(config, [node("n", cpu=2)])
    s.submit(job("low", "q", cpu=2), priority=0, submitted_at=1)
    s.cycle(now=0.0)
    s.submit(job("high", "q", cpu=2), priority=100, submitted_at=2)
    assert [p.victim for p in s.cycle(now=1.0).preemptions] == ["low"]


def test_equal_victims_go_in_order_of_least_work_lost() -> None:
    s = Scheduler(_cohort_config(), [node("n", cpu=8)])
    for i in range(8):
        s.submit(job(f"b{i}", "borrower", cpu=1), priority=0, submitted_at=i)
        s.cycle(now=float(i))  # b0 started first, b7 last
    # Without reports the newest runs lose least; b1 and b2 saved their work just now.
    s.report_checkpoint("b1", 100.0)
    s.report_checkpoint("b2", 99.0)
    s.submit(job("owner", "lender", cpu=2), priority=0, submitted_at=10)
    victims = {p.victim for p in s.cycle(now=101.0).preemptions}
    assert victims == {"b1", "b2"}


def test_without_checkpoints_the_most_recently_started_go_first() -> None:
    s = Scheduler(_cohort_config(), [node("n", cpu=8)])
    for i in range(8):
        s.submit(job(f"b{i}", "borrower", cpu=1), priority=0, submitted_at=i)
        s.cycle(now=float(i))
    s.submit(job("owner", "lender", cpu=2), priority=0, submitted_at=10)
    victims = {p.victim for p in s.cycle(now=101.0).preemptions}
    assert victims == {"b6", "b7"}


def test_classic_preemption_also_takes_least_work_lost_first() -> None:
    s = Scheduler(_cohort_config(), [node("n", cpu=8)])
    s.set_fair_sharing(False)
    for i in range(8):
        s.submit(job(f"b{i}", "borrower", cpu=1), priority=0, submitted_at=i)
        s.cycle(now=float(i))
    s.report_checkpoint("b0", 100.0)
    s.report_checkpoint("b3", 100.0)
    s.submit(job("owner", "lender", cpu=2), priority=0, submitted_at=10)
    victims = {p.victim for p in s.cycle(now=101.0).preemptions}
    assert victims == {"b0", "b3"}



def _contended(seed: int, min_runtime: float | None) -> tuple[list[tuple[str, float, float]],
                                                             list[object]]:
    """A seeded run of three queues in a cohort (reclaim Any, fair sharing) on one 24-cpu
    node, jobs of 1 to 4 cpu arriving at random: every preemption as (victim, its age,
    whether it was protected), and the decisions of each cycle."""
    rng = random.Random(seed)
    queues = [cluster_queue(f"q{i}", {"default": {"cpu": 8}}, cohort="c", reclaim="Any")
              for i in range(3)]
    if min_runtime is not None:
        queues = [q.model_copy(update={"min_runtime": min_runtime}) for q in queues]
    s = Scheduler(make_config(flavor("default"), cohort("c"), *queues), [node("n", cpu=24)])
    started: dict[str, float] = {}
    queue_of: dict[str, str] = {}
    victims: list[tuple[str, float, float]] = []
    decisions: list[object] = []
    now = 0.0
    for i in range(60):
        now += rng.choice((0.5, 1.0, 3.0))
        name, queue = f"j{i}", f"q{rng.randrange(3)}"
        s.submit(job(name, queue, cpu=rng.randint(1, 4)), priority=0, submitted_at=now)
        queue_of[name] = queue
        result = s.cycle(now=now)
        for admission in result.admissions:
            started[admission.job] = now
        for p in result.preemptions:
            age = now - started[p.victim]
            other = queue_of[p.victim] != queue_of[p.preemptor]
            protected = min_runtime is not None and other and age < min_runtime
            victims.append((p.victim, age, protected))
            s.requeue(p.victim)  # its pods end at once
        decisions.append(([a.job for a in result.admissions],
                          [(p.victim, p.preemptor) for p in result.preemptions]))
        for finished in [n for n in started if rng.random() < 0.08]:
            s.remove(finished)
            del started[finished]
    return victims, decisions


def test_seeded_contended_cohorts_never_take_a_protected_job() -> None:
    """120 seeded runs with and without a 4 s minRuntime: with it no victim of another
    queue is younger than that, and the runs replay identically. (Protection moves
    preemption onto older jobs: without checkpoints those lose more work, which is why
    minRuntime goes with checkpoints; see the Philly figures in the README.)"""
    young = {None: 0, 4.0: 0}
    changed = 0
    for seed in range(120):
        runs = {}
        for min_runtime in (None, 4.0):
            victims, decisions = _contended(seed, min_runtime)
            assert not [v for v in victims if v[2]], f"seed {seed}: a protected job was taken"
            assert _contended(seed, min_runtime)[1] == decisions, f"seed {seed}: replay"
            young[min_runtime] += sum(1 for _, age, _ in victims if age < 4.0)
            runs[min_runtime] = decisions
        changed += runs[None] != runs[4.0]
    assert young[None] > 0, "no young victims without protection: the sweep tests nothing"
    assert young[4.0] == 0 and changed > 0
