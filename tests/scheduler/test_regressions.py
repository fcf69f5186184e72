"""Cases where remembered work must not outlive what it was about."""

from __future__ import annotations

from phalanx.scheduler import PendingCode, Scheduler
from phalanx.spec import LocalQueue

from .strategies import (
    Driver,
    RandomPicker,
    cluster_queue,
    flavor,
    job,
    make_config,
    node,
    random_scenario,
    replay,
)
from .test_properties import check_invariants


def test_a_job_resubmitted_with_a_higher_priority_preempts_at_once() -> None:
    config = make_config(flavor("default"),
                         cluster_queue("q", {"default": {"cpu": 4}}, within="LowerPriority"))
    s = Scheduler(config, [node("n", pool="default")])
    s.submit(job("low", "q", cpu=4), priority=0, submitted_at=1)
    assert [a.job for a in s.cycle(1).admissions] == ["low"]
    s.submit(job("x", "q", cpu=4), priority=0, submitted_at=2)
    assert not s.cycle(2).preemptions  # equal priority: nobody to take from
    # The same name again, higher: nothing was charged in between, yet this is another job.
    s.submit(job("x", "q", cpu=4), priority=100, submitted_at=3)
    assert [p.victim for p in s.cycle(3).preemptions] == ["low"]


def test_jobs_of_a_stopped_local_queue_say_so_in_a_blocked_strict_fifo_queue() -> None:
    base = make_config(flavor("default"),
                       cluster_queue("q", {"default": {"cpu": 4}}, strategy="StrictFIFO"))
    config = base.merged([LocalQueue(name="held", cluster_queue="q", stop_policy="Hold")])
    s = Scheduler(config, [node("n", pool="default")])
    s.submit(job("run", "q", cpu=3), priority=0, submitted_at=1)
    s.cycle(1)
    s.submit(job("head", "q", cpu=4), priority=0, submitted_at=2)
    s.submit(job("s", "held", cpu=1), priority=0, submitted_at=3)
    for t in (2, 3):
        s.cycle(t)
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
