"""What a session may see of a job: its own teams' jobs in full (secrets redacted as the
API redacts them), other teams' jobs as queue occupancy only.

A job the session may not see keeps its queue, status, size and times (what anyone
judging the queue needs) and loses its name, user, labels, command and messages. Its
name becomes ``hidden-`` and an HMAC of the name under a server key: stable from one
answer to the next (a row can be followed) but not reversible by guessing names.
"""

from __future__ import annotations

import hashlib
import hmac
from dataclasses import dataclass

from phalanx.server.redaction import SecretEnvRule, job_as_seen_by
from phalanx.server.ui.session import Session
from phalanx.spec.resources import GPU
from phalanx.spec.status import JobRecord, JobStatus

HIDDEN_USER = "hidden"


@dataclass(frozen=True, slots=True)
class JobRow:
    """One job as a table row shows it to one session."""

    name: str
    shown: bool  # False: another team's job, seen as occupancy only
    queue: str
    cluster_queue: str
    status: str
    user: str
    kind: str
    team: str
    pods: int
    gpus: int
    priority: int
    submitted_at: float
    waited: float | None  # seconds queued so far, for a queued job
    reason: str
    may_change: bool
    live: bool
    plane: str | None = None  # the compute plane (cluster) it is placed on


class Visibility:
    def __init__(self, key: bytes, secrets: SecretEnvRule) -> None:
        self._key = key
        self.secrets = secrets

    def hidden_name(self, name: str) -> str:
        digest = hmac.new(self._key, name.encode(), hashlib.sha256).hexdigest()[:16]
        return f"hidden-{digest}"

    def record(self, record: JobRecord, session: Session) -> JobRecord | None:
        """The whole job as the session may read it (detail page), or None."""
        if not session.sees(record):
            return None
        return job_as_seen_by(record, session.viewer, self.secrets)

    def row(self, record: JobRecord, session: Session, now: float) -> JobRow:
        shown = session.sees(record)
        queued = record.status is JobStatus.QUEUED
        return JobRow(
            name=record.name if shown else self.hidden_name(record.name),
            shown=shown,
            queue=record.queue,
            cluster_queue=record.cluster_queue,
            status=record.status.value,
            user=record.user if shown else HIDDEN_USER,
            kind=str(record.spec.kind.value),
            team=record.spec.labels.get("team", "") if shown else "",
            pods=record.spec.pod_count,
            gpus=gpus_of(record),
            priority=record.priority,
            submitted_at=record.submitted_at,
            waited=now - record.queued_at if queued else None,
            reason=(record.pending_message or "") if shown and queued else "",
            may_change=shown and session.may_change(record) and not record.status.terminal,
            live=not record.status.terminal,
            plane=record.plane,
        )


def gpus_of(record: JobRecord) -> int:
    """GPUs the whole gang asks for (resources are held in milli-units)."""
    return sum(p.replicas * p.resources.get(GPU, 0) for p in record.spec.pod_sets) // 1000
