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
