"""The simulator applies the control plane's lifecycle rules: restart budgets, backoff and
deadlines, from ``phalanx.control.lifecycle``."""

from __future__ import annotations

import pytest

from phalanx.control.lifecycle import backoff_seconds
from phalanx.errors import SpecError
from phalanx.sim import FailureModel, NodeFailure, simulate
from phalanx.spec import Node
from phalanx.spec.resources import RestartPolicy
from tests.sim.conftest import config, one_queue_yaml, trace

ONE_JOB = "submit,duration,gpus,team,name\n0,100,8,team-a,j1\n"


def test_a_job_lost_with_its_node_waits_out_its_backoff(two_nodes: list[Node]) -> None:
    """gpu-0 fails at 30 for 5 s; gpu-1 is free at once, but the job waits its backoff (40 s,
    as the control plane would wait) before it runs again, from zero."""
    policy = RestartPolicy(backoff=40)
    result = simulate(config(one_queue_yaml()), two_nodes, trace(ONE_JOB),
                      failures=FailureModel(schedule=[NodeFailure(30, "gpu-0", 5)]),
                      restart_policy=policy)
    (job,) = result.jobs
    assert (job.evictions, job.system_restarts) == (1, 1)
    assert backoff_seconds(policy, 1) == 40
    assert job.finish == 30 + 40 + 100
    assert result.summary["failed"] == 0


def test_a_spent_system_budget_fails_the_job(two_nodes: list[Node]) -> None:
    result = simulate(config(one_queue_yaml()), two_nodes, trace(ONE_JOB),
                      failures=FailureModel(schedule=[NodeFailure(30, "gpu-0", 5)]),
                      restart_policy=RestartPolicy(max_system_restarts=0))
    (job,) = result.jobs
    assert job.finish is None
    assert "system failure budget spent" in job.failed
    s = result.summary
    assert (s["failed"], s["completed"], s["unfinished"]) == (1, 0, 0)


def test_max_runtime_fails_a_job_that_runs_longer(two_nodes: list[Node]) -> None:
    jobs = trace("submit,duration,gpus,team,name\n0,100,8,team-a,long\n0,20,8,team-a,short\n")
    result = simulate(config(one_queue_yaml()), two_nodes, jobs, max_runtime=50)
    by_name = {j.name: j for j in result.jobs}
    assert by_name["short"].finish == 20 and not by_name["short"].failed
    assert by_name["long"].finish is None
    assert by_name["long"].failed == "ran longer than maxRuntime (50s)"
    assert result.summary["failed"] == 1
    # Its GPUs came back at 50, when it was stopped.
    busy = dict(zip(result.series.t, result.series.busy, strict=True))
    assert busy[50] == 0


@pytest.mark.parametrize("bad", [0.0, -3.0, float("inf")])
def test_max_runtime_out_of_range_is_refused(two_nodes: list[Node], bad: float) -> None:
    with pytest.raises(SpecError) as err:
        simulate(config(one_queue_yaml()), two_nodes, trace(ONE_JOB), max_runtime=bad)
    assert err.value.field == "maxRuntime"
