"""Cases where remembered work must not outlive what it was about."""

from __future__ import annotations

from phalanx.scheduler import PendingCode, Scheduler
from phalanx.spec import LocalQueue, Node, QueueConfig

from .strategies import (
    Driver,
    RandomPicker,
    cluster_queue,
    cohort,
    flavor,
    job,
    make_config,
    node,
    random_scenario,
    replay,
)
from .test_properties import check_cycle, check_invariants


def test_a_job_resubmitted_with_a_higher_priority_preempts_at_once() -> None:
    config = make_config(flavor("default"),
                         cluster_queue("q", {"default": {"cpu": 4}}, within="LowerPriority"))
    s = Scheduler(config, [node("n", pool="default")])
    s.submit(job("low", "q", cpu=4), priority=0, submitted_at=1)
    assert [a.job for a in s.cycle().admissions] == ["low"]
    s.submit(job("x", "q", cpu=4), priority=0, submitted_at=2)
    assert not s.cycle().preemptions  # equal priority: nobody to take from
    # The same name again, higher: nothing was charged in between, yet this is another job.
    s.submit(job("x", "q", cpu=4), priority=100, submitted_at=3)
    assert [p.victim for p in s.cycle().preemptions] == ["low"]


def test_jobs_of_a_stopped_local_queue_say_so_in_a_blocked_strict_fifo_queue() -> None:
    base = make_config(flavor("default"),
                       cluster_queue("q", {"default": {"cpu": 4}}, strategy="StrictFIFO"))
    config = base.merged([LocalQueue(name="held", cluster_queue="q", stop_policy="Hold")])
    s = Scheduler(config, [node("n", pool="default")])
    s.submit(job("run", "q", cpu=3), priority=0, submitted_at=1)
    s.cycle()
    s.submit(job("head", "q", cpu=4), priority=0, submitted_at=2)
    s.submit(job("s", "held", cpu=1), priority=0, submitted_at=3)
    for _ in range(2):
        s.cycle()
        stopped = s.pending_reason("s")
        assert stopped is not None and stopped.code is PendingCode.QUEUE_STOPPED, stopped
        head = s.pending_reason("head")
        assert head is not None and head.code is not PendingCode.STRICT_FIFO_BLOCKED, head


def test_a_job_is_never_preempted_in_the_cycle_that_admitted_it() -> None:
    # Found by a wider sweep of random scenarios: j6 (priority 0) was admitted and then, in
    # the same cycle, preempted by j7 (priority 100) of its own queue. The control plane
    # would have started its pods only to stop them. The Driver's bookkeeping asserts it.
    scenario = random_scenario(RandomPicker(1355))
    driver = Driver.start(scenario.config, scenario.nodes)
    replay(driver, scenario.events)
    assert driver.preemptions, "the scenario no longer preempts anything"


def test_a_preemptor_is_admitted_on_what_it_preempted_for_once_its_victims_leave() -> None:
    # Longer random scenarios that looped before: the preemptor, judged afresh once its
    # victims had gone, landed on a flavor whose nodes were full (seed 630), or a preemptor
    # admitted first took what another had held (seed 443 at 200 events). Its victims came
    # back and were preempted again, cycle after cycle, or a second victim was taken.
    # check_invariants asserts that every preemptor is admitted once its victims are gone
    # and that the scheduler goes quiet.
    for seed, events in ((630, 80), (270, 80), (2736, 80), (3828, 80), (208, 200),
                         (443, 200), (1047, 200)):
        scenario = random_scenario(RandomPicker(seed), max_events=events)
        driver = Driver.start(scenario.config, scenario.nodes)
        replay(driver, scenario.events)
        assert driver.preemptions, f"seed {seed} no longer preempts anything"
        check_invariants(scenario)


def _preempt_then_reconfigure(new_config: QueueConfig, config: QueueConfig,
                              nodes: list[Node]) -> Driver:
    """``high`` preempts ``low``; the configuration changes before low's pods are gone."""
    driver = Driver.start(config, nodes)
    driver.on_cycle.append(check_cycle)
    driver.submit(job("low", "a", cpu=4), 0)
    driver.cycle()
    driver.submit(job("high", "a", cpu=4), 100)
    driver.cycle()
    assert driver.preempted() == ["low"]
    driver.config = new_config
    driver.scheduler.set_config(new_config)
    driver.requeue("low", outside=False)
    driver.cycle()  # check_cycle: every admission is valid under the new configuration
    return driver


def test_a_preemptor_is_not_admitted_on_a_hold_made_under_another_configuration() -> None:
    base = make_config(flavor("f0"), cluster_queue("a", {"f0": {"cpu": 4}}, within="LowerPriority"))
    # Flavor f0 now means the nodes labelled pool=x: the held node n0 is no f0 node any more.
    relabelled = base.merged([flavor("f0", labels={"pool": "x"})])
    driver = _preempt_then_reconfigure(
        relabelled, base, [node("n0", pool="f0", cpu=4), node("n1", pool="x", cpu=4)])
    assert driver.admitted["high"].pod_sets[0].nodes == ("n1",)
    # The queue now covers pods: the hold charged none.
    with_pods = base.merged([cluster_queue("a", {"f0": {"cpu": 4, "pods": 8}},
                                           within="LowerPriority")])
    driver = _preempt_then_reconfigure(with_pods, base, [node("n0", pool="f0", cpu=4)])
    assert driver.admitted["high"].pod_sets[0].flavors == {"cpu": "f0", "pods": "f0"}


def _borrower_preempted_then_owner_arrives() -> Driver:
    """p (priority 0, queue qa) preempts v, which borrowed all of qb's quota; then j (priority
    100) arrives in qb, within qb's own quota, while v's pods are still there."""
    config = make_config(
        flavor("f0"), cohort("co"),
        cluster_queue("qa", {"f0": {"cpu": 0}}, cohort="co", within="LowerPriority"),
        cluster_queue("qb", {"f0": {"cpu": 8}}, cohort="co", reclaim="LowerPriority"),
    )
    driver = Driver.start(config, [node("n0", pool="f0", cpu=64)])
    driver.on_cycle.append(check_cycle)
    driver.submit(job("v", "qa", cpu=8), -100)
    driver.cycle()
    driver.submit(job("p", "qa", cpu=8), 0)
    driver.cycle()
    driver.submit(job("j", "qb", cpu=8), 100)
    return driver


def test_a_preemptor_admitted_on_its_hold_respects_a_higher_priority_cohort_reservation() -> None:
    # j fails while v terminates and the cohort keeps that capacity for it. Once v is gone,
    # p's hold would borrow it: p waits, j goes, and nobody is preempted twice.
    driver = _borrower_preempted_then_owner_arrives()
    driver.cycle()
    driver.terminate_victims()
    driver.settle()
    assert "j" in driver.admitted and "p" not in driver.admitted
    assert driver.preempted() == ["v"]


def test_a_job_that_failed_because_this_cycles_admissions_were_no_candidates_is_looked_at_again(
) -> None:
    # v is gone before j is first looked at: p is admitted (on its hold) at the start of the
    # cycle, and j could reclaim it but not in the cycle that admitted it. Stamped with the
    # versions after p's admission, j was never looked at again and waited for ever.
    driver = _borrower_preempted_then_owner_arrives()
    driver.terminate_victims()
    assert [a.job for a in driver.cycle().admissions] == ["p"]
    driver.settle()
    assert "j" in driver.admitted
    assert driver.preempted() == ["v", "p"]
