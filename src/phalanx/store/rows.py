"""Converting records to table rows and back."""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Any, TypeVar

from phalanx.errors import InternalError, SpecError
from phalanx.spec.base import Model, validate
from phalanx.spec.status import JobEvent, JobRecord

log = logging.getLogger("phalanx.store")

M = TypeVar("M", bound=Model)


def stored(model: type[M], document: object, what: str) -> M:
    """A stored document as its model; one that no longer validates is the store's fault.

    The caller sent nothing wrong, so this is an InternalError (500), logged, not a SpecError.
    """
    try:
        return validate(model, document, prefix=what, stored=True)
    except SpecError as exc:
        log.error("%s does not load: %s", what, exc)
        raise InternalError(
            f"{what} does not load ({exc})", fix="see the control plane's log"
        ) from None


def job_row(record: JobRecord) -> dict[str, Any]:
    document = record.to_dict()
    document.pop("plane", None)  # read from the placement when served, never stored
    return {
        "name": record.name,
        "status": record.status.value,
        "queue": record.queue,
        "cluster_queue": record.cluster_queue,
        "priority": record.priority,
        "submitted_at": record.submitted_at,
        "finished_at": record.finished_at,
        "record": document,
        "user_name": record.user,
    }


def label_rows(record: JobRecord) -> list[dict[str, Any]]:
    return [{"job": record.name, "key": key, "value": value}
            for key, value in record.spec.labels.items()]


def job_from_row(row: Mapping[Any, Any]) -> JobRecord:
    return stored(JobRecord, row["record"], f"stored job {row['name']}")


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
