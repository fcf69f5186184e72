import pytest

from phalanx.compute.base import PodPhase, PodRef, PodState
from phalanx.control.lifecycle import backoff_seconds, restart_decision
from phalanx.kinds import GangPhase, gang_status
from phalanx.spec import RestartPolicy


def pod(rank: int, phase: PodPhase, failure: str | None = None, **kw: object) -> PodState:
    ref = PodRef(job="j", attempt=1, pod_set="worker", index=rank, rank=rank)
    return PodState(ref=ref, node="n", phase=phase, failure=failure, **kw)  # type: ignore[arg-type]


R, S, F, P = PodPhase.RUNNING, PodPhase.SUCCEEDED, PodPhase.FAILED, PodPhase.PENDING


@pytest.mark.parametrize(
    ("pods", "expected", "phase", "done"),
    [
        ([pod(0, R), pod(1, P)], 2, GangPhase.STARTING, False),
        ([pod(0, R)], 2, GangPhase.STARTING, False),  # a pod not even seen yet
        ([pod(0, R), pod(1, R)], 2, GangPhase.RUNNING, False),
        ([pod(0, S), pod(1, R)], 2, GangPhase.RUNNING, False),
        ([pod(0, S), pod(1, S)], 2, GangPhase.SUCCEEDED, True),
        ([pod(0, F, "user", exit_code=3), pod(1, R)], 2, GangPhase.FAILED, False),
        ([pod(0, F, reason="Terminated"), pod(1, F, reason="Terminated")], 2, GangPhase.STOPPED, True),
    ],
)
def test_gang_status(pods: list[PodState], expected: int, phase: GangPhase, done: bool) -> None:
    status = gang_status(pods, expected)
    assert status.phase is phase
    assert status.all_done is done


def test_system_failure_wins_over_user_failure() -> None:
    status = gang_status(
        [pod(0, F, "user", exit_code=1, reason="Error"), pod(1, F, "system", signal=9, reason="Signaled")], 2
    )
    assert status.failure == "system"
    assert "j-worker-1" in status.message and "signal 9" in status.message


def test_backoff_is_exponential_and_capped() -> None:
    policy = RestartPolicy(backoff=10, max_backoff=35)
    assert [backoff_seconds(policy, n) for n in range(5)] == [0, 10, 20, 35, 35]


def test_budgets_are_separate() -> None:
    policy = RestartPolicy(max_restarts=1, max_system_restarts=2)
    first = restart_decision(policy, "user", 0, 0)
    assert first.restart and first.user_restarts == 1 and first.system_restarts == 0
    assert not restart_decision(policy, "user", 1, 0).restart
    # user budget spent, system budget still there
    sys1 = restart_decision(policy, "system", 1, 0)
    assert sys1.restart and sys1.system_restarts == 1
    assert not restart_decision(policy, "system", 1, 2).restart
    assert "maxRestarts is 0" in restart_decision(RestartPolicy(), "user", 0, 0).message


@pytest.mark.parametrize("reason", ["PlaneLost", "Lost", "NodeLost", "Fenced"])
def test_a_failure_with_no_exit_says_the_reason_once_and_what_it_means(reason: str) -> None:
    status = gang_status([pod(0, F, "system", reason=reason), pod(1, R)], 2)
    assert f"{reason}: {reason}" not in status.message
    said = status.message.removeprefix(f"pod j-worker-0 failed ({reason}: ")
    assert said != status.message and len(said.split()) > 5, status.message


def test_an_exit_code_is_shown_with_its_reason() -> None:
    status = gang_status([pod(0, F, "user", exit_code=3, reason="Error"), pod(1, R)], 2)
    assert status.message == "pod j-worker-0 failed (Error: exit code 3)"
