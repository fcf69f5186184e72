"""A pod as every compute plane reports it: its identity, phase and how it ended."""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum
from typing import Literal


@dataclass(frozen=True, slots=True)
class PodRef:
    job: str
    attempt: int
    pod_set: str
    index: int  # index within its pod set
    rank: int  # index across the whole job, pod sets in spec order

    @property
    def name(self) -> str:
        return f"{self.job}-{self.pod_set}-{self.index}"


class PodPhase(StrEnum):
    PENDING = "Pending"
    RUNNING = "Running"
    SUCCEEDED = "Succeeded"
    FAILED = "Failed"

    @property
    def done(self) -> bool:
        return self in (PodPhase.SUCCEEDED, PodPhase.FAILED)


FailureKind = Literal["user", "system"]


@dataclass(frozen=True, slots=True)
class PodState:
    ref: PodRef
    node: str
    phase: PodPhase
    exit_code: int | None = None
    signal: int | None = None
    # "Completed", "Error", "Terminated" (stopped on request), "Signaled", "Lost", "OOMKilled", ...
    reason: str = ""
    # Set when phase is FAILED: "user" for a non-zero exit, "system" for anything the job did
    # not cause (killed by a signal nobody asked for, process lost, node gone).
    failure: FailureKind | None = None
    pid: int | None = None
    started_at: float | None = None
    finished_at: float | None = None
    cpus: tuple[int, ...] = ()  # the whole CPUs a pinned pod has to itself (cpuPinning)


# What a reason that comes with no exit code or signal means, for a job's message: the
# planes set these reasons (compute/local/outcome.py, compute/remote.py,
# compute/kubernetes/status.py) and the reason alone tells a user nothing.
REASON_MEANINGS = {
    "DiskFull": "disk full: no space was left for the pod's log or exit record",
    "Lost": "its process ended leaving no exit status; the machine or the pod's supervisor "
            "went away",
    "PlaneLost": "the compute plane that ran it stopped reporting for longer than the control "
                 "plane's --worker-lost-after, so its pods count as gone",
    "NodeLost": "its node stopped reporting, so its pods count as gone",
    "Fenced": "its plane's worker lost the control plane for longer than its --fence-after, "
              "and stopped it so that it cannot run twice",
    "Deleted": "its pod was deleted by something other than Phalanx",
    "OOMKilled": "it used more memory than it asked for and was killed",
    "PodsNotReady": "its pods did not all start in time",
}


def failure_text(pod: PodState) -> str:
    """How ``pod`` failed, for the job's message: ``Error: exit code 1``, or the reason and
    what it means (``PlaneLost: the compute plane ...``), never the reason twice."""
    if pod.exit_code is not None:
        return f"{pod.reason}: exit code {pod.exit_code}"
    if pod.signal is not None:
        return f"{pod.reason}: signal {pod.signal}"
    meaning = REASON_MEANINGS.get(pod.reason)
    return f"{pod.reason}: {meaning}" if meaning else pod.reason
