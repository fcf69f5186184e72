"""How an exit record maps to a pod's phase, reason and failure kind."""

from __future__ import annotations

import signal

import pytest

from phalanx.compute.base import PodPhase
from phalanx.compute.local.outcome import outcome_of


@pytest.mark.parametrize(
    ("record", "expected"),
    [
        ({"exitCode": 0}, (PodPhase.SUCCEEDED, "Completed", None, 0, None)),
        ({"exitCode": 3}, (PodPhase.FAILED, "Error", "user", 3, None)),
        ({"exitCode": 127, "errorKind": "user"}, (PodPhase.FAILED, "Error", "user", 127, None)),
        ({"signal": 9}, (PodPhase.FAILED, "Signaled", "system", None, 9)),
        ({"signal": 15}, (PodPhase.FAILED, "Signaled", "system", None, 15)),
        ({"signal": 9, "oomKilled": True}, (PodPhase.FAILED, "OOMKilled", "system", None, 9)),
        ({"signal": 11}, (PodPhase.FAILED, "Crashed", "user", None, 11)),
        ({"signal": 6}, (PodPhase.FAILED, "Crashed", "user", None, 6)),
        ({"errorKind": "system", "error": "log"}, (PodPhase.FAILED, "StartError", "system",
                                                   None, None)),
    ],
)
def test_unrequested_endings(record: dict[str, object], expected: tuple[object, ...]) -> None:
    out = outcome_of({"finishedAt": 10.0, **record}, terminate_requested_at=None, killed=False,
                     now=20.0)
    assert (out.phase, out.reason, out.failure, out.exit_code, out.signal) == expected
    assert out.finished_at == 10.0


@pytest.mark.parametrize("record", [{"signal": 15}, {"exitCode": 143}, {"exitCode": 0}])
def test_anything_ending_after_a_terminate_request_is_terminated(record: dict[str, int]) -> None:
    out = outcome_of({"finishedAt": 10.0, **record}, terminate_requested_at=9.0, killed=False,
                     now=20.0)
    assert (out.phase, out.reason, out.failure) == (PodPhase.FAILED, "Terminated", None)


def test_an_ending_before_the_request_keeps_its_own_meaning() -> None:
    out = outcome_of({"finishedAt": 8.0, "exitCode": 3}, terminate_requested_at=9.0,
                     killed=False, now=20.0)
    assert (out.reason, out.failure) == ("Error", "user")


def test_no_record_is_lost_unless_we_stopped_it() -> None:
    lost = outcome_of(None, terminate_requested_at=None, killed=False, now=5.0)
    assert (lost.phase, lost.reason, lost.failure, lost.finished_at) == (
        PodPhase.FAILED, "Lost", "system", 5.0)
    killed = outcome_of(None, terminate_requested_at=1.0, killed=True, now=5.0)
    assert (killed.reason, killed.failure, killed.signal) == ("Terminated", None, signal.SIGKILL)
