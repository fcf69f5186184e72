"""Jobs of a list read from the API's JSON as plain rows, without the spec's models.

``phalanx jobs`` draws a table of a few fields of each job; building every job's whole
record (``JobRecord``, its ``JobSpec`` and their models) would cost the CLI more than all
the rest of its answer. A ``JobRow`` has the attributes of a ``JobRecord`` that the table
reads, with the same names, types and defaults, so one table (``cli/render.py``) serves
both. The client reads them (``Client.list_rows``).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from phalanx.spec.jobstatus import JobStatus


@dataclass(frozen=True, slots=True)
class RowSpec:
    priority: str | int
    pod_count: int  # replicas of every pod set, as JobSpec.pod_count


@dataclass(frozen=True, slots=True)
class RowAdmission:
    pod_count: int  # pods placed, as JobAdmission.pod_count


@dataclass(frozen=True, slots=True)
class RowEstimate:
    position: int
    cohort_position: int | None
    starts_at: float | None
    guess: bool


@dataclass(frozen=True, slots=True)
class JobRow:
    name: str
    queue: str
    cluster_queue: str
    user: str
    status: JobStatus
    plane: str | None
    priority: int
    submitted_at: float
    started_at: float | None
    finished_at: float | None
    pending_message: str | None
    message: str
    spec: RowSpec
    admission: RowAdmission | None
    estimate: RowEstimate | None

    @classmethod
    def of(cls, job: Mapping[str, Any]) -> JobRow:
        """A job of ``GET /v1/jobs``'s ``items`` (camelCase, as the API serves it)."""
        spec = job["spec"]
        admission = job.get("admission")
        estimate = job.get("estimate")
        return cls(
            name=job["name"], queue=job["queue"], cluster_queue=job["clusterQueue"],
            user=job.get("user", "unknown"), status=JobStatus(job.get("status", "Queued")),
            plane=job.get("plane"), priority=job.get("priority", 0),
            submitted_at=job["submittedAt"], started_at=job.get("startedAt"),
            finished_at=job.get("finishedAt"), pending_message=job.get("pendingMessage"),
            message=job.get("message", ""),
            spec=RowSpec(priority=spec.get("priority", "default"),
                         pod_count=sum(p.get("replicas", 1) for p in spec["podSets"])),
            admission=None if admission is None else RowAdmission(
                pod_count=sum(p["count"] for p in admission["podSets"])),
            estimate=None if estimate is None else RowEstimate(
                position=estimate["position"], cohort_position=estimate.get("cohortPosition"),
                starts_at=estimate.get("startsAt"), guess=estimate.get("guess", False)),
        )


@dataclass(frozen=True, slots=True)
class JobRows:
    """A page of jobs as rows: as ``JobList``, with ``continue_token`` for the next page."""

    items: list[JobRow]
    continue_token: str | None = None
    remaining_item_count: int | None = None

    @classmethod
    def of(cls, page: Mapping[str, Any]) -> JobRows:
        return cls(items=[JobRow.of(job) for job in page["items"]],
                   continue_token=page.get("continue"),
                   remaining_item_count=page.get("remainingItemCount"))
