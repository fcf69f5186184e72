"""What the Kubernetes plane knows of one attempt, and how it reads that back from the
attempt's anchor ConfigMap (no I/O here: the plane does the reading and writing)."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from phalanx.compute.base import PodCredential, PodPhase, PodRef, PodState
from phalanx.compute.kubernetes import credentials, objects
from phalanx.compute.kubernetes.client import Object
from phalanx.errors import Conflict
from phalanx.scheduler.types import Admission
from phalanx.spec.resources import JobSpec


@dataclass(slots=True)
class TrackedPod:
    ref: PodRef
    name: str
    node: str
    obj: Object | None = None  # the latest object seen (the last one, once deleted)
    seen: bool = False
    gone: bool = False
    stuck_since: float | None = None
    final: PodState | None = None


@dataclass(slots=True)
class Attempt:
    job: str
    attempt: int
    name: str
    launched_at: float
    pods: list[TrackedPod]
    spec: JobSpec | None = None
    admission: Admission | None = None
    uid: str | None = None
    launched: bool = False  # every object was created
    started: bool = False  # every pod has been running at once
    stop_at: float | None = None  # when a stop was requested
    deletes_sent: bool = False
    grace: float = 10.0
    endpoints: dict[str, str] = field(default_factory=dict)  # the kind's, from the plan
    ray_cluster: bool = False  # KubeRay makes its pods (kuberay.py), naming them itself
    key: bytes = b""  # the attempt's key (on its anchor): its pods' secrets derive from it
    api_url: str | None = None  # set: the pods mount the attempt's credential (its Secret)
    credential: PodCredential | None = None  # known to the plane that launched it only


def failed(state: PodState, reason: str, failure: Any, now: float) -> PodState:
    return PodState(ref=state.ref, node=state.node, phase=PodPhase.FAILED,
                    exit_code=state.exit_code, signal=state.signal, reason=reason,
                    failure=failure, started_at=state.started_at,
                    finished_at=state.finished_at or now)


def newer(obj: Object | None, version: str) -> bool:
    """Whether ``obj`` was written after a list at ``version`` (so the list cannot show it).

    Versions are etcd revisions, compared as numbers; when one is not a number the
    object is taken as listed, and its absence as a deletion.
    """
    mine = str((obj or {}).get("metadata", {}).get("resourceVersion") or "")
    return mine.isdigit() and version.isdigit() and int(mine) > int(version)


def with_spec(anchor: Object, job: JobSpec, api_url: str | None = None) -> Object:
    anchor["data"]["spec"] = json.dumps(job.to_dict())
    if api_url is not None:
        anchor["data"][credentials.ANCHOR_URL] = api_url
    return anchor


def check_owner(obj: Object, job: str, attempt: int,
                identity: dict[str, str] | None = None) -> None:
    """Refuse to adopt an object that exists under the name this attempt wants but is not
    its own: another job's, or the same job's of another plane or control plane (a worker
    acts on no one else's objects)."""
    labels = obj.get("metadata", {}).get("labels") or {}
    name = obj.get("metadata", {}).get("name")
    if labels.get(objects.JOB) != job or labels.get(objects.ATTEMPT) != str(attempt):
        raise Conflict(
            f"{obj.get('kind', 'object')} {name!r} exists and belongs to another job "
            f"({labels.get(objects.JOB)!r}, attempt {labels.get(objects.ATTEMPT)!r})",
            field="name", fix="rename the job, or delete the stray object",
        )
    theirs = {k: labels.get(k) for k in (objects.PLANE, objects.CONTROL_PLANE)
              if labels.get(k) != (identity or {}).get(k)}
    if theirs:
        owner = ", ".join(f"{k}={v}" for k, v in sorted(theirs.items()))
        raise Conflict(
            f"{obj.get('kind', 'object')} {name!r} exists and belongs to another plane or "
            f"control plane ({owner})", field="name",
            fix="give each control plane and plane its own runs namespace, or delete the "
                "stray object")


def key_of(anchor: Object) -> bytes:
    return bytes.fromhex((anchor.get("data") or {}).get(objects.ATTEMPT_KEY) or "")


def attempt_from_anchor(item: Object) -> Attempt:
    meta, data = item["metadata"], item.get("data") or {}
    annotations = meta.get("annotations") or {}
    job, attempt = data["job"], int(data["attempt"])
    pods = [
        TrackedPod(ref=PodRef(job=job, attempt=attempt, pod_set=p["podSet"], index=int(p["index"]),
                        rank=int(p["rank"])), name=p["name"], node=p["node"])
        for p in json.loads(data["pods"])
    ]
    stop = annotations.get(objects.TERMINATE)
    return Attempt(
        job=job, attempt=attempt, name=meta["name"], launched_at=float(data["launchedAt"]),
        pods=pods, uid=meta.get("uid"),
        spec=JobSpec.model_validate(json.loads(data["spec"])) if data.get("spec") else None,
        admission=Admission.from_dict(json.loads(data["admission"])),
        launched=annotations.get(objects.LAUNCHED) == "true",
        stop_at=float(stop) if stop else None, key=key_of(item),
        ray_cluster=data.get(objects.RAY_CLUSTER) == "true",
        api_url=data.get(credentials.ANCHOR_URL),
    )
