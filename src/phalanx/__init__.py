"""Phalanx: queue, gang-schedule and run distributed ML training jobs on shared clusters.

The names below load on first use: ``import phalanx.scheduler`` (the simulator,
the compiled core) must not pay for the SDK's HTTP client or the server's
dependencies.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from phalanx.lazy import lazy_names
from phalanx.version import __version__

if TYPE_CHECKING:
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
    from phalanx.sdk.login import (
        KubeConfigFileAuthentication,
        TokenAuthentication,
        login,
        logout,
    )
    from phalanx.spec import JobSpec, PodSet
    from phalanx.spec.status import JobDetail, JobEvent, JobRecord, JobStatus

# Where each lazily loaded name lives; the TYPE_CHECKING imports above must match.
_HOMES = {
    "AuthError": "phalanx.errors",
    "Conflict": "phalanx.errors",
    "ConnectionFailed": "phalanx.errors",
    "NotFound": "phalanx.errors",
    "PhalanxError": "phalanx.errors",
    "ServerError": "phalanx.errors",
    "SpecError": "phalanx.errors",
    "Client": "phalanx.sdk",
    "Job": "phalanx.sdk",
    "PodSetBuilder": "phalanx.sdk",
    "KubeConfigFileAuthentication": "phalanx.sdk.login",
    "TokenAuthentication": "phalanx.sdk.login",
    "login": "phalanx.sdk.login",
    "logout": "phalanx.sdk.login",
    "JobSpec": "phalanx.spec",
    "PodSet": "phalanx.spec",
    "JobDetail": "phalanx.spec.status",
    "JobEvent": "phalanx.spec.status",
    "JobRecord": "phalanx.spec.status",
    "JobStatus": "phalanx.spec.status",
}

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
    "KubeConfigFileAuthentication",
    "NotFound",
    "PhalanxError",
    "PodSet",
    "PodSetBuilder",
    "ServerError",
    "SpecError",
    "TokenAuthentication",
    "__version__",
    "login",
    "logout",
]


# Hidden from type checkers: they would accept any attribute of a module with a
# __getattr__; they see the real names through the TYPE_CHECKING imports instead.
if not TYPE_CHECKING:
    __getattr__, __dir__ = lazy_names(__name__, _HOMES, globals(), __all__)
