"""The simulator scores estimated starts: the control plane's forecast at submit against the
start that followed, without changing a decision."""

from __future__ import annotations

from phalanx.sim import simulate
from phalanx.spec import Node
from tests.sim.conftest import config, one_queue_yaml, trace

# One queue of 16 GPUs; each job takes both nodes for 1000 s, so each waits for the last.
#   a-1 runs 0..1000. a-2 arrives at 1 with nothing like it finished: a guess (the default
#   run time), wrong by far. a-3 arrives at 1100, when a-1 has finished: its history says
#   1000 s, so a-2 (started at 1000) ends at 2000, exactly when a-3 starts.
BACK_TO_BACK = """submit,duration,gpus,team,name
0,1000,16,team-a,a-1
1,1000,16,team-a,a-2
1100,1000,16,team-a,a-3
"""


def test_estimates_at_submit_are_scored_against_actual_starts(two_nodes: list[Node]) -> None:
    jobs = trace(BACK_TO_BACK)
    plain = simulate(config(one_queue_yaml()), two_nodes, jobs)
    scored = simulate(config(one_queue_yaml()), two_nodes, jobs, estimate_every=1)
    assert plain.summary["estimates"] is None  # off unless asked for
    # Estimating changes no decision.
    assert [(o.first_admit, o.finish) for o in scored.jobs] == [
        (o.first_admit, o.finish) for o in plain.jobs]
    assert [o.first_admit for o in scored.jobs] == [0.0, 1000.0, 2000.0]
    figures = scored.summary["estimates"]
    assert isinstance(figures, dict)
    assert figures["estimated_jobs"] == 3
    assert figures["scored_jobs"] == 2  # a-2 and a-3 waited over 10 minutes
    assert figures["guesses"] == 1  # a-2: nothing like it had finished
    assert figures["within_25_percent"] == 0.5  # a-3 exactly, a-2 not
    assert figures["within_factor_2"] == 0.5
    # a-3 on time; a-2 estimated after a-1's default run (an hour) for a start at 1000: late.
    assert figures["ratio_p25"] == 1.0
    assert 3.5 < figures["ratio_p75"] < 3.7
