"""Converting records to table rows and back."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from phalanx.spec.base import validate
from phalanx.spec.status import JobEvent, JobRecord


def job_row(record: JobRecord) -> dict[str, Any]:
    return {
        "name": record.name,
        "status": record.status.value,
        "queue": record.queue,
        "cluster_queue": record.cluster_queue,
        "priority": record.priority,
        "submitted_at": record.submitted_at,
        "finished_at": record.finished_at,
        "record": record.to_dict(),
    }


def job_from_row(row: Mapping[Any, Any]) -> JobRecord:
    return validate(JobRecord, row["record"], prefix=f"stored job {row['name']}")


def event_row(event: JobEvent) -> dict[str, Any]:
    return {
        "job": event.job,
        "time": event.time,
        "type": event.type,
        "reason": event.reason,
        "message": event.message,
    }


def event_from_row(row: Mapping[Any, Any]) -> JobEvent:
    return JobEvent(
        job=row["job"], time=row["time"], type=row["type"], reason=row["reason"],
        message=row["message"],
    )
