"""Records the control plane keeps and serves: jobs with their status, and job events."""

from __future__ import annotations

from enum import StrEnum
from typing import Any, Literal

from pydantic import Field, model_validator

from phalanx.spec.base import Model

# A job's status lives apart, free of the models; imported from here too, beside the records.
from phalanx.spec.jobstatus import TERMINAL_STATUSES as TERMINAL_STATUSES
from phalanx.spec.jobstatus import JobStatus as JobStatus
from phalanx.spec.resources import JobSpec


class PodSetPlacement(Model):
    """Where one pod set of an admitted job goes."""

    name: str
    count: int = Field(ge=0, description="Pods placed; below replicas under partial admission")
    flavors: dict[str, str] = Field(default_factory=dict, description="resource -> flavor")
    nodes: list[str] = Field(
        default_factory=list, description="One node per pod, in pod-index order"
    )


class JobAdmission(Model):
    """The placement the scheduler gave the job's current attempt.

    The same JSON as the scheduler's ``Admission.to_dict()``, which is what stores written
    before this model hold; the control loop converts between the two.
    """

    job: str | None = None
    cluster_queue: str
    borrowing: bool = False
    pod_sets: list[PodSetPlacement]

    @property
    def pod_count(self) -> int:
        return sum(p.count for p in self.pod_sets)


StopReason = Literal[
    "Cancelled", "Preempted", "Failed", "DeadlineExceeded", "PodsLost", "NodeUnhealthy", "Drained",
]


class StopRequest(Model):
    """Why the current attempt's pods are being stopped, and whom a failure is charged to."""

    reason: StopReason
    failure: Literal["user", "system"] | None = None

    @model_validator(mode="before")
    @classmethod
    def _from_stored_string(cls, value: Any) -> Any:
        # Stores written before this model hold "Reason" or "Reason:failure".
        if isinstance(value, str):
            reason, _, failure = value.partition(":")
            return {"reason": reason, "failure": failure or None}
        return value

    @classmethod
    def of(cls, reason: str, failure: str | None = None) -> StopRequest:
        """Validated from the control loop's plain strings."""
        return cls.model_validate({"reason": reason, "failure": failure})


class EstimateBasis(StrEnum):
    """What an estimated start rests on: the weakest expected run time among the runs that
    end before it in the forecast."""

    FREE = "Free"  # the room is free now: it starts at the next cycles
    MAX_RUNTIME = "MaxRuntime"  # the runs ahead end by their maxRuntime at the latest
    HISTORY = "History"  # a high percentile of similar finished runs
    OUTLIVED = "Outlived"  # a run ahead outlived its estimate: expected to run as long again
    NO_HISTORY = "NoHistory"  # a guess: a run ahead has no maxRuntime and no similar run ended
    UNKNOWN = "Unknown"  # beyond what the forecast looked at (too many jobs ahead)


class StartEstimate(Model):
    """Where a pending job stands and when it should start, from a forward run of the
    scheduler core on a copy of the live state (refreshed every few seconds)."""

    position: int = Field(ge=1, description="1 = next in its ClusterQueue's order")
    cohort_position: int | None = Field(
        default=None, ge=1, description="Its place among the pending jobs of its cohort, by "
        "estimated start; None when its ClusterQueue has no cohort")
    starts_at: float | None = Field(
        default=None, description="Epoch seconds; None when unknown (see basis)")
    basis: EstimateBasis
    guess: bool = Field(default=False, description="True when a run it waits for has no "
                        "maxRuntime and no history of similar runs")
    message: str = Field(default="", description="One line: what the estimate rests on")
    computed_at: float = Field(description="Epoch seconds of the state it was computed from")


class JobRecord(Model):
    """A job as the control plane stores and serves it."""

    name: str
    spec: JobSpec
    status: JobStatus = JobStatus.QUEUED
    queue: str
    cluster_queue: str
    priority: int = 0
    submitted_at: float  # epoch seconds, first submission
    queued_at: float  # epoch seconds, last time it (re-)entered the queue
    admitted_at: float | None = None
    started_at: float | None = None
    finished_at: float | None = None
    attempt: int = 0  # bumped at each admission; pods of older attempts are never adopted
    user_restarts: int = 0
    system_restarts: int = 0
    admission: JobAdmission | None = None
    pending_code: str | None = None
    pending_message: str | None = None
    message: str = ""
    exit_code: int | None = None
    not_before: float | None = None  # restart backoff: not requeued before this time
    cancel_requested: bool = False
    # Why the current attempt's pods are being stopped (Cancelled, Preempted, Failed,
    # DeadlineExceeded, ...); kept so a restarted control plane finishes the job's stop.
    stop_reason: StopRequest | None = None
    preemptions: int = 0
    # Who submitted the job: the signed-in user (the bootstrap key is user admin). Jobs of
    # earlier versions may carry the OS user their client named.
    user: str = "unknown"
    endpoints: dict[str, str] = Field(
        default_factory=dict, description="Addresses the job's kind recorded when its current "
        "attempt was launched, e.g. a Ray cluster's dashboard URL",
    )
    plane: str | None = Field(
        default=None, description="The compute plane (cluster) its current placement is on, "
        "read from the placement's nodes when the job is served; never stored",
    )
    estimate: StartEstimate | None = Field(
        default=None, description="A queued job's position and estimated start, when the "
        "control plane has computed one; never stored",
    )

    # A notebook shows a job as an HTML table, rich's console as a table (spec/tables.py).
    def _repr_html_(self) -> str:
        from phalanx.spec.tables import job_table

        return job_table(self)._repr_html_()

    def __rich__(self) -> Any:
        from phalanx.spec.tables import job_table

        return job_table(self).__rich__()


class JobList(Model):
    items: list[JobRecord]
    continue_token: str | None = Field(
        default=None, alias="continue",
        description="Pass as ``continue`` to get the next page; absent on the last page",
    )
    remaining_item_count: int | None = Field(
        default=None, description="How many jobs match after this page (with ``limit``)",
    )


class JobEvent(Model):
    job: str
    time: float
    type: str = "Normal"  # Normal | Warning
    reason: str
    message: str = ""


class PodInfo(Model):
    """One pod of a job's current attempt, as served by ``GET /v1/jobs/{name}``."""

    name: str
    pod_set: str
    index: int
    rank: int
    node: str
    phase: Literal["Pending", "Running", "Succeeded", "Failed"]  # compute.base.PodPhase
    exit_code: int | None = None
    signal: int | None = None
    reason: str = ""
    pid: int | None = None
    started_at: float | None = None
    finished_at: float | None = None
    cpus: list[int] = Field(
        default_factory=list, description="CPUs the pod has to itself (cpuPinning: exclusive)"
    )


class JobDetail(JobRecord):
    pods: list[PodInfo] = Field(default_factory=list)
    events: list[JobEvent] = Field(default_factory=list)
    manifest: dict[str, Any] | None = Field(
        default=None, description="The Kubernetes manifest the job was submitted as (shown "
        "to the job's owner); the job's spec is what Phalanx made of it")
    manifest_notes: list[str] = Field(
        default_factory=list, description="What Phalanx made of the manifest's fields it "
        "reads its own way, each as `path: what`")
