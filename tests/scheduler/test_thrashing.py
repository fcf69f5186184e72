"""No thrashing: protection after each start, and a cap on preemptions per job."""

from __future__ import annotations

import pytest

from phalanx.errors import SpecError
from phalanx.scheduler import Scheduler
from phalanx.spec import QueueConfig, parse_config_documents
from phalanx.spec.resources import ClusterQueue

from .strategies import cluster_queue, flavor, job, make_config, node

HOUR = 3600.0


def _one_queue(**preemption: object) -> QueueConfig:
    """One queue of 2 cpu where a higher priority preempts a lower one."""
    cq = cluster_queue("q", {"default": {"cpu": 2}}, within="LowerPriority")
    cq = cq.model_copy(update={"preemption": cq.preemption.model_copy(update=preemption)})
    return make_config(flavor("default"), cq)


def _bump(s: Scheduler, name: str, now: float, priority: int = 100) -> list[str]:
    """A higher-priority job arrives for the whole queue: who it preempts at ``now``."""
    s.submit(job(name, "q", cpu=2), priority=priority, submitted_at=now)
    return [p.victim for p in s.cycle(now=now).preemptions]


def _thrash(s: Scheduler, rounds: int, start: float = 0.0) -> list[int]:
    """``low`` runs; a high job takes its place and ends; ``low`` starts again: per round,
    how many preemptions the high job made."""
    s.submit(job("low", "q", cpu=2), priority=0, submitted_at=start)
    assert [a.job for a in s.cycle(now=start).admissions] == ["low"]
    made = []
    now = start
    for i in range(rounds):
        now += HOUR
        victims = _bump(s, f"high-{i}", now)
        made.append(len(victims))
        if victims:
            s.requeue("low")
            assert [a.job for a in s.cycle(now=now).admissions] == [f"high-{i}"]
        s.remove(f"high-{i}")
        if victims:
            assert [a.job for a in s.cycle(now=now + 1).admissions] == ["low"]
            now += 1
    return made


def test_protect_after_start_holds_even_against_its_own_queue() -> None:
    s = Scheduler(_one_queue(protect_after_start=HOUR), [node("n", cpu=2)])
    s.submit(job("low", "q", cpu=2), priority=0, submitted_at=0)
    s.cycle(now=0.0)
    assert _bump(s, "high", HOUR / 2) == []  # (minRuntime would let its own queue in)
    assert s.protection_ends() == HOUR  # the driver knows when to look again
    assert [p.victim for p in s.cycle(now=HOUR).preemptions] == ["low"]


def test_by_default_a_restart_is_protected_for_its_checkpoint_interval() -> None:
    s = Scheduler(_one_queue(), [node("n", cpu=2)])
    s.submit(job("low", "q", cpu=2), priority=0, submitted_at=0)
    s.cycle(now=0.0)
    s.report_checkpoint("low", 600.0)  # it saves every 10 minutes
    s.report_checkpoint("low", 1200.0)
    assert _bump(s, "high", 1500.0) == ["low"]  # nothing protects a first run past its start
    s.requeue("low")
    s.cycle(now=1500.0)
    s.remove("high")
    assert [a.job for a in s.cycle(now=2000.0).admissions] == ["low"]
    assert _bump(s, "again", 2500.0) == []  # within 10 minutes of its restart
    assert [p.victim for p in s.cycle(now=2600.0).preemptions] == ["low"]


def test_without_checkpoints_or_a_setting_nothing_is_protected() -> None:
    s = Scheduler(_one_queue(), [node("n", cpu=2)])
    assert _thrash(s, 5) == [1, 1, 1, 1, 1]


def test_a_job_preempted_max_preemptions_times_is_no_victim_until_it_ends() -> None:
    s = Scheduler(_one_queue(max_preemptions=3), [node("n", cpu=2)])
    assert _thrash(s, 5) == [1, 1, 1, 0, 0]
    assert s.protection_ends() is None  # capped for good: no time to look again at
    s.remove("low")  # it ended; the same name submitted anew starts with a clean history
    assert _thrash(s, 2, start=100 * HOUR) == [1, 1]


def test_the_cap_counts_within_its_window_only() -> None:
    s = Scheduler(_one_queue(max_preemptions=3, max_preemptions_window=1.5 * HOUR),
                  [node("n", cpu=2)])
    # Preemptions an hour apart: never three within 1.5 hours.
    assert _thrash(s, 5) == [1, 1, 1, 1, 1]


def test_zero_turns_the_cap_off() -> None:
    s = Scheduler(_one_queue(max_preemptions=0), [node("n", cpu=2)])
    assert _thrash(s, 25) == [1] * 25


def test_the_default_cap_is_twenty_preemptions_in_seven_days() -> None:
    s = Scheduler(_one_queue(), [node("n", cpu=2)])
    assert _thrash(s, 22) == [1] * 20 + [0, 0]


def test_cycles_without_a_clock_count_and_protect_nothing() -> None:
    s = Scheduler(_one_queue(max_preemptions=1), [node("n", cpu=2)])
    s.submit(job("low", "q", cpu=2), priority=0, submitted_at=0)
    s.cycle()
    for i in range(3):
        s.submit(job(f"high-{i}", "q", cpu=2), priority=100, submitted_at=i + 1)
        assert [p.victim for p in s.cycle().preemptions] == ["low"]
        s.requeue("low")
        s.cycle()
        s.remove(f"high-{i}")
        s.cycle()


@pytest.mark.parametrize(("field", "value", "words"), [
    ("maxPreemptions", -1, "maxPreemptions"),
    ("maxPreemptions", "many", "maxPreemptions"),
    ("protectAfterStart", "soon", "protectAfterStart"),
    ("maxPreemptionsWindow", "-1h", "maxPreemptionsWindow"),
])
def test_bad_settings_are_refused_naming_the_field(field: str, value: object,
                                                  words: str) -> None:
    doc = {"kind": "ClusterQueue", "name": "q", "preemption": {field: value}}
    with pytest.raises(SpecError) as caught:
        parse_config_documents([doc])
    assert words in str(caught.value)


def test_settings_read_from_a_queues_file() -> None:
    (cq,) = parse_config_documents([{
        "kind": "ClusterQueue", "name": "q",
        "preemption": {"protectAfterStart": "30m", "maxPreemptions": 5,
                       "maxPreemptionsWindow": "1d"}}])
    assert isinstance(cq, ClusterQueue)
    p = cq.preemption
    assert (p.protect_after_start, p.max_preemptions, p.max_preemptions_window) == (
        1800.0, 5, 86400.0)
