"""The compute-plane interface the control plane drives.

Level-triggered: the control plane says what should run (``launch``) or stop
(``terminate``) and reads back what is (``observe``). Every call is
idempotent, so a restarted control plane can re-issue them safely.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum
from types import TracebackType
from typing import Literal, Protocol, Self

from phalanx.scheduler.types import Admission
from phalanx.spec.resources import JobSpec, Node


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


class ComputePlane(Protocol):
    name: str

    def inventory(self) -> list[Node]:
        """The nodes this plane offers, with allocatable capacity, labels, taints and health."""
        ...

    def check_job(self, job: JobSpec) -> None:
        """Raise SpecError, naming the field and the fix, if this plane could never run ``job``.

        Called at submit, so such a job is refused instead of failing at every launch.
        """
        ...

    def launch(self, job: JobSpec, attempt: int, admission: Admission) -> None:
        """Start every pod of ``job``'s ``attempt`` where ``admission`` places it (idempotent)."""
        ...

    def observe(self) -> list[PodState]:
        """Every pod the plane still knows, of every job and attempt not yet forgotten."""
        ...

    def terminate(self, job: str, attempt: int, grace_seconds: float = 10.0) -> None:
        """Stop the attempt's pods: SIGTERM now, SIGKILL after the grace (non-blocking)."""
        ...

    def forget(self, job: str, attempt: int) -> None:
        """Drop the bookkeeping of an attempt whose pods are all done."""
        ...

    def close(self) -> None:
        """Release the plane's own resources; running pods keep running."""
        ...


class ClosesOnExit:
    """``with plane:`` closes the plane on the way out; planes inherit this."""

    def close(self) -> None:
        raise NotImplementedError

    def __enter__(self) -> Self:
        return self

    def __exit__(
        self, kind: type[BaseException] | None, exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()
