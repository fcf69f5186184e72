"""Kubernetes Events of a job's pods (scheduling, image pulls, kills), for ``describe``.

Read on demand rather than watched: they matter while someone looks, and the
cluster keeps them only about an hour anyway.
"""

from __future__ import annotations

import logging

from phalanx.compute.kubernetes.client import KubeClient, KubeError
from phalanx.compute.kubernetes.status import timestamp
from phalanx.spec.status import JobEvent

log = logging.getLogger("phalanx.compute.kubernetes")


def pod_events(client: KubeClient, namespace_path: str, job: str,
               pods: set[str]) -> list[JobEvent]:
    """The Events whose involvedObject is one of ``pods``, oldest first ([] if unreadable)."""
    if not pods:
        return []
    try:
        items = client.get(f"{namespace_path}/events").get("items") or []
    except KubeError as exc:  # describe still answers, without the cluster's side
        log.warning("cannot list the events of %s's pods: %s", job, exc)
        return []
    out: list[JobEvent] = []
    for item in items:
        involved = item.get("involvedObject") or {}
        pod = involved.get("name")
        if involved.get("kind") != "Pod" or pod not in pods:
            continue
        when = (timestamp(item.get("lastTimestamp")) or timestamp(item.get("eventTime"))
                or timestamp(item.get("firstTimestamp"))
                or timestamp((item.get("metadata") or {}).get("creationTimestamp")) or 0.0)
        count = item.get("count") or 1
        message = f"pod {pod}: {item.get('message', '')}".rstrip(": ")
        if count > 1:
            message += f" (x{count})"
        out.append(JobEvent(
            job=job, time=when, type="Warning" if item.get("type") == "Warning" else "Normal",
            reason=str(item.get("reason") or "PodEvent"), message=message,
        ))
    out.sort(key=lambda e: e.time)
    return out
