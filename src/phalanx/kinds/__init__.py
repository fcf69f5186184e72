"""Job kinds: what each kind of job runs, and when it is ready and done (``base.Framework``).

``framework_of(job)`` answers for a job's kind. Each kind is one module that
defines a ``Framework`` and is listed in ``_FRAMEWORKS``.
"""

from __future__ import annotations

from phalanx.errors import SpecError
from phalanx.kinds.base import (
    DEFAULT_MASTER_PORT,
    Framework,
    OwnAddressNetwork,
    PodNetwork,
    PodPlan,
)
from phalanx.kinds.gangs import GangPhase, GangStatus, gang_status
from phalanx.kinds.generic import Generic
from phalanx.kinds.mpi import Mpi
from phalanx.kinds.pods import FailureKind, PodPhase, PodRef, PodState
from phalanx.kinds.torch import Torch
from phalanx.spec.resources import JobKind, JobSpec

_FRAMEWORKS: dict[JobKind, Framework] = {f.kind: f for f in (Generic(), Torch(), Mpi())}


def framework_of(job: JobSpec | JobKind) -> Framework:
    """The framework that runs ``job`` (or every job of that kind)."""
    kind = job.kind if isinstance(job, JobSpec) else job
    framework = _FRAMEWORKS.get(kind)
    if framework is None:
        known = ", ".join(sorted(_FRAMEWORKS))
        raise SpecError(f"jobs of kind {kind.value!r} cannot run here", field="kind",
                        fix=f"use one of the kinds this control plane runs: {known}")
    return framework


__all__ = [
    "DEFAULT_MASTER_PORT",
    "FailureKind",
    "Framework",
    "GangPhase",
    "GangStatus",
    "OwnAddressNetwork",
    "PodNetwork",
    "PodPhase",
    "PodPlan",
    "PodRef",
    "PodState",
    "framework_of",
    "gang_status",
]
