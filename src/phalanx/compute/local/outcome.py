"""How a local pod ended, from its exit record: phase, reason and whose fault a failure was.

- exit 0: Succeeded, "Completed".
- non-zero exit: Failed, "Error", a user failure.
- a signal the program raised itself (SIGSEGV, SIGABRT, ...): "Crashed", user.
- any other signal nobody asked for (SIGKILL, SIGTERM from someone else): "Signaled",
  system; "OOMKilled" when a SIGKILL coincides with an OOM kill in the pod's memory cgroup.
- stopped after ``terminate()`` was asked for: "Terminated", no failure (it was wanted).
- stopped by the lease fence (its worker gone or cut off): "Fenced", system.
- the supervisor gone without an exit record: "Lost", system.
"""

from __future__ import annotations

import signal
from dataclasses import dataclass
from typing import Any

from phalanx.compute.base import FailureKind, PodPhase

# Signals a program brings on itself (faults, abort(), resource limits, a write to a
# closed pipe): its own failure, not the system's.
LOST = "Lost"
FENCED = "Fenced"

SELF_INFLICTED = frozenset({
    signal.SIGSEGV, signal.SIGBUS, signal.SIGFPE, signal.SIGILL, signal.SIGABRT,
    signal.SIGTRAP, signal.SIGSYS, signal.SIGXCPU, signal.SIGXFSZ, signal.SIGPIPE,
})


@dataclass(frozen=True, slots=True)
class Outcome:
    phase: PodPhase
    reason: str
    failure: FailureKind | None = None
    exit_code: int | None = None
    signal: int | None = None
    finished_at: float | None = None


def outcome_of(
    record: dict[str, Any] | None,
    *,
    terminate_requested_at: float | None,
    killed: bool,
    now: float,
) -> Outcome:
    """The final state of a pod whose supervisor has exited.

    ``record`` is the supervisor's exit record (None when it left none);
    ``killed`` says whether the plane escalated to SIGKILL.
    """
    if record is None:
        if terminate_requested_at is not None:
            return Outcome(PodPhase.FAILED, "Terminated",
                           signal=signal.SIGKILL if killed else None, finished_at=now)
        return Outcome(PodPhase.FAILED, LOST, "system", finished_at=now)
    finished = float(record.get("finishedAt") or now)
    code: int | None = record.get("exitCode")
    sig: int | None = record.get("signal")
    if terminate_requested_at is not None and finished >= terminate_requested_at:
        return Outcome(PodPhase.FAILED, "Terminated", None, code, sig, finished)
    if record.get("fenced"):
        return Outcome(PodPhase.FAILED, FENCED, "system", code, sig, finished)
    if record.get("errorKind") == "system":
        return Outcome(PodPhase.FAILED, "StartError", "system", code, sig, finished)
    if sig is not None:
        if sig == signal.SIGKILL and record.get("oomKilled"):
            return Outcome(PodPhase.FAILED, "OOMKilled", "system", None, sig, finished)
        if sig in SELF_INFLICTED:
            return Outcome(PodPhase.FAILED, "Crashed", "user", None, sig, finished)
        return Outcome(PodPhase.FAILED, "Signaled", "system", None, sig, finished)
    if code == 0:
        return Outcome(PodPhase.SUCCEEDED, "Completed", None, 0, None, finished)
    return Outcome(PodPhase.FAILED, "Error", "user", code, None, finished)
