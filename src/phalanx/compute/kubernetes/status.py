"""What a Pod object says about its pod: phase, exit, reason, and whose fault a failure is.

A non-zero exit of the container is the job's own failure ("user"), except the
fence's (its exit status and termination message: "Fenced", "system"). Anything
the job did not cause is a "system" failure, restarted under the system budget:
the kernel's OOM killer (``OOMKilled``), eviction, node shutdown or loss, a pod
whose container never reported an exit, a pod phase of ``Unknown`` (its node
stopped reporting). A pod ended because the control plane asked for it is
reported as ``Terminated`` with no failure to charge, as on the local plane.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any

from phalanx.compute.base import FailureKind, PodPhase
from phalanx.compute.kubernetes import fence
from phalanx.compute.kubernetes.objects import CONTAINER

Object = dict[str, Any]

OOM = "OOMKilled"
TERMINATED = "Terminated"
DELETED = "Deleted"
NODE_LOST = "NodeLost"
NOT_READY = "PodsNotReady"
# Waiting reasons that mean the container will not start without a change elsewhere.
STUCK = frozenset({
    "ErrImagePull", "ImagePullBackOff", "InvalidImageName", "ErrImageNeverPull",
    "CreateContainerConfigError", "CreateContainerError", "RunContainerError",
})


@dataclass(frozen=True, slots=True)
class Observed:
    phase: PodPhase
    node: str = ""
    exit_code: int | None = None
    signal: int | None = None
    reason: str = ""
    failure: FailureKind | None = None
    started_at: float | None = None
    finished_at: float | None = None
    waiting: str | None = None  # why the container has not started, while Pending
    deleting: bool = False  # deletionTimestamp is set
    container_started: bool = False  # there is a log to read


def timestamp(value: object) -> float | None:
    if not isinstance(value, str) or not value:
        return None
    try:
        return datetime.fromisoformat(value.replace("Z", "+00:00")).timestamp()
    except ValueError:
        return None


def _container(status: Object) -> Object:
    statuses = status.get("containerStatuses") or []
    return next((c for c in statuses if c.get("name") == CONTAINER),
                statuses[0] if statuses else {})


def observe_pod(obj: Object, *, stop_requested: bool = False) -> Observed:
    meta, spec, status = obj.get("metadata", {}), obj.get("spec", {}), obj.get("status") or {}
    node = str(spec.get("nodeName") or "")
    deleting = bool(meta.get("deletionTimestamp"))
    container = _container(status)
    state = container.get("state") or {}
    running, terminated = state.get("running"), state.get("terminated")
    waiting = (state.get("waiting") or {}).get("reason")
    started = timestamp((running or terminated or {}).get("startedAt"))
    finished = timestamp((terminated or {}).get("finishedAt"))
    has_log = bool(running or terminated)
    phase = status.get("phase") or "Pending"
    common = dict(node=node, started_at=started, deleting=deleting, container_started=has_log)
    if phase == "Succeeded":
        return Observed(PodPhase.SUCCEEDED, exit_code=0, reason="Completed",
                        finished_at=finished, **common)  # type: ignore[arg-type]
    if phase in ("Failed", "Unknown"):
        exit_code = (terminated or {}).get("exitCode")
        exit_code = int(exit_code) if exit_code is not None else None
        sig = exit_code - 128 if exit_code is not None and exit_code > 128 else None
        reason, kind = _failure(phase, status, terminated, exit_code)
        failure: FailureKind | None = kind
        if stop_requested:
            reason, failure = TERMINATED, None
        return Observed(PodPhase.FAILED, exit_code=exit_code, signal=sig, reason=reason,
                        failure=failure, finished_at=finished, **common)  # type: ignore[arg-type]
    if phase == "Running":
        return Observed(PodPhase.RUNNING, reason="Running", **common)  # type: ignore[arg-type]
    return Observed(PodPhase.PENDING, reason=waiting or str(status.get("reason") or "Pending"),
                    waiting=waiting, **common)  # type: ignore[arg-type]


def _failure(
    phase: str, status: Object, terminated: Object | None, exit_code: int | None
) -> tuple[str, FailureKind]:
    if phase == "Unknown":
        return NODE_LOST, "system"
    own = (terminated or {}).get("reason") or ""
    if own == OOM:
        return OOM, "system"
    pod_reason = str(status.get("reason") or "")
    if pod_reason:  # Evicted, NodeLost, Shutdown, NodeShutdown, UnexpectedAdmissionError, ...
        return pod_reason, "system"
    disruption = next(
        (c for c in status.get("conditions") or []
         if c.get("type") == "DisruptionTarget" and c.get("status") == "True"), None,
    )
    if disruption is not None:  # preempted by kube-scheduler, taint eviction, GC of a lost node
        return str(disruption.get("reason") or "Disrupted"), "system"
    if terminated is None or exit_code is None or own == "ContainerStatusUnknown":
        return own or NODE_LOST, "system"
    if exit_code == 0:  # Failed with a clean exit: the pod was stopped around its container
        return own or "Failed", "system"
    if fence.was_fenced(exit_code, (terminated or {}).get("message")):
        return fence.FENCED_REASON, "system"  # stopped at the lease's fence: not the job's
    return own or "Error", "user"
