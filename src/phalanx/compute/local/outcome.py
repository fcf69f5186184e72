"""How a local pod ended, from its exit record: phase, reason and whose fault a failure was.

- exit 0: Succeeded, "Completed".
- non-zero exit: Failed, "Error", a user failure.
- a signal the program raised itself (SIGSEGV, SIGABRT, ...): "Crashed", user.
- any other signal nobody asked for (SIGKILL, SIGTERM from someone else): "Signaled",
  system; "OOMKilled" when a SIGKILL coincides with an OOM kill in the pod's memory cgroup.
- stopped after ``terminate()`` was asked for: "Terminated", no failure (it was wanted).
- stopped by the lease fence (its worker gone or cut off): "Fenced", system.
- not started by its supervisor, the start coming from a replica that no longer leads
  (an older term): "Refused", system.
- the supervisor gone without an exit record: "Lost", system; "DiskFull" when the disk it
  writes the pod's log and exit record to has no space left (or the record says so).
"""

from __future__ import annotations

import errno
import signal
from dataclasses import dataclass
from typing import Any

from phalanx.compute.base import FailureKind, PodPhase

# Signals a program brings on itself (faults, abort(), resource limits, a write to a
# closed pipe): its own failure, not the system's.
LOST = "Lost"
FENCED = "Fenced"
REFUSED = "Refused"
DISK_FULL = "DiskFull"
# Below this many free bytes, the disk of a pod's log counts as full: a supervisor that
# left no exit record could not write it.
DISK_FULL_BYTES = 1024 * 1024

# How an OSError of ENOSPC reads in the supervisor's record ("[Errno 28] No space left...").
_NO_SPACE = f"[Errno {errno.ENOSPC}]"

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
    disk_full: bool = False,
) -> Outcome:
    """The final state of a pod whose supervisor has exited.

    ``record`` is the supervisor's exit record (None when it left none);
    ``killed`` says whether the plane escalated to SIGKILL; ``disk_full`` whether the disk
    of the pod's log and exit record has no space left now.
    """
    if record is None:
        if terminate_requested_at is not None:
            return Outcome(PodPhase.FAILED, "Terminated",
                           signal=signal.SIGKILL if killed else None, finished_at=now)
        return Outcome(PodPhase.FAILED, DISK_FULL if disk_full else LOST, "system",
                       finished_at=now)
    finished = float(record.get("finishedAt") or now)
    code: int | None = record.get("exitCode")
    sig: int | None = record.get("signal")
    if terminate_requested_at is not None and finished >= terminate_requested_at:
        return Outcome(PodPhase.FAILED, "Terminated", None, code, sig, finished)
    if record.get("fenced"):
        return Outcome(PodPhase.FAILED, FENCED, "system", code, sig, finished)
    if record.get("refused"):
        return Outcome(PodPhase.FAILED, REFUSED, "system", code, sig, finished)
    if record.get("errorKind") == "system":
        reason = DISK_FULL if _NO_SPACE in str(record.get("error", "")) else "StartError"
        return Outcome(PodPhase.FAILED, reason, "system", code, sig, finished)
    if sig is not None:
        if sig == signal.SIGKILL and record.get("oomKilled"):
            return Outcome(PodPhase.FAILED, "OOMKilled", "system", None, sig, finished)
        if sig in SELF_INFLICTED:
            return Outcome(PodPhase.FAILED, "Crashed", "user", None, sig, finished)
        return Outcome(PodPhase.FAILED, "Signaled", "system", None, sig, finished)
    if code == 0:
        return Outcome(PodPhase.SUCCEEDED, "Completed", None, 0, None, finished)
    return Outcome(PodPhase.FAILED, "Error", "user", code, None, finished)
