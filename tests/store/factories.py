"""Job records and events for store tests."""

from __future__ import annotations

from typing import Any

from phalanx.spec import JobSpec, validate
from phalanx.spec.status import JobEvent, JobRecord, JobStatus


def make_spec(name: str, queue: str = "default") -> JobSpec:
    return validate(JobSpec, {
        "name": name, "queue": queue,
        "podSets": [{"name": "worker", "replicas": 2, "resources": {"cpu": "500m"},
                     "command": ["python", "-c", "print(1)"]}],
    })


def make_record(
    name: str, *, status: JobStatus = JobStatus.QUEUED, queue: str = "default",
    submitted_at: float = 1_700_000_000.0, **fields: Any,
) -> JobRecord:
    return JobRecord(
        name=name, spec=make_spec(name, queue), status=status, queue=queue,
        cluster_queue=fields.pop("cluster_queue", f"cq-{queue}"),
        submitted_at=submitted_at, queued_at=fields.pop("queued_at", submitted_at), **fields,
    )


def full_record(name: str = "full") -> JobRecord:
    """A record with every field set to something other than its default."""
    spec = validate(JobSpec, {
        "name": name, "queue": "team-a", "priority": "high", "kind": "torch",
        "maxRuntime": "2h", "restart": {"maxRestarts": 3, "maxSystemRestarts": 5,
                                        "backoff": "30s", "maxBackoff": "10m"},
        "topology": {"required": "rack"}, "labels": {"team": "a", "project": "llm"},
        "podSets": [
            {"name": "launcher", "replicas": 1, "resources": {"cpu": "250m", "memory": "1Gi"},
             "command": ["python", "launch.py"], "env": {"MODE": "launch"},
             "workingDir": "/srv/train", "image": "ghcr.io/acme/train:1.2"},
            {"name": "worker", "replicas": 4, "minReplicas": 2,
             "resources": {"cpu": "8", "memory": "64Gi", "nvidia.com/gpu": "8"},
             "command": ["torchrun", "train.py"], "env": {"NCCL_DEBUG": "INFO", "ÜNICODE": "✓"},
             "nodeSelector": {"gpu": "h100"},
             "tolerations": [{"key": "spot", "operator": "Exists", "effect": "NoSchedule"}]},
        ],
    })
    return JobRecord(
        name=name, spec=spec, status=JobStatus.RUNNING, queue="team-a", cluster_queue="cq-a",
        priority=1000, submitted_at=1_700_000_000.123456, queued_at=1_700_000_050.5,
        admitted_at=1_700_000_060.25, started_at=1_700_000_061.0, finished_at=1_700_000_999.75,
        attempt=3, user_restarts=1, system_restarts=2,
        admission={"clusterQueue": "cq-a", "podSets": [
            {"name": "worker", "count": 4, "flavors": {"nvidia.com/gpu": "h100"},
             "nodes": ["node-1", "node-2"]}]},
        pending_code="Preempted", pending_message="preempted by job big (priority 2000)",
        message="running attempt 3 — résumé", exit_code=137, not_before=1_700_000_070.0,
        cancel_requested=True, stop_reason="Preempted", preemptions=4, user="ann",
    )


def make_event(job: str, time: float, reason: str = "Submitted", message: str = "") -> JobEvent:
    return JobEvent(job=job, time=time, reason=reason, message=message)
