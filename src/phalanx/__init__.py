"""Phalanx: queue, gang-schedule and run distributed ML training jobs on shared clusters."""

from phalanx.errors import (
    AuthError,
    Conflict,
    ConnectionFailed,
    NotFound,
    PhalanxError,
    ServerError,
    SpecError,
)
from phalanx.sdk import Client, Job, PodSetBuilder
from phalanx.spec import JobSpec, PodSet
from phalanx.spec.status import JobDetail, JobEvent, JobRecord, JobStatus
from phalanx.version import __version__

__all__ = [
    "AuthError",
    "Client",
    "Conflict",
    "ConnectionFailed",
    "Job",
    "JobDetail",
    "JobEvent",
    "JobRecord",
    "JobSpec",
    "JobStatus",
    "NotFound",
    "PhalanxError",
    "PodSet",
    "PodSetBuilder",
    "ServerError",
    "SpecError",
    "__version__",
]
