"""The Kubernetes plane's lease: a ``coordination.k8s.io/v1`` Lease in the runs namespace.

The worker renews it each time it reaches the control plane (``PlaneLease``,
``compute/lease.py``); ``renewTime + leaseDurationSeconds`` is when it lapses. Every
job pod of the plane runs under the fence (``fence.py``), which reads this Lease and
stops the pod's ranks once it has lapsed.
"""

from __future__ import annotations

import math
import time
from datetime import UTC, datetime
from urllib.parse import quote

from phalanx.compute.kubernetes.client import KubeClient, KubeError, Object
from phalanx.defaults import plane_lease_name as lease_name

LEASE_API = "/apis/coordination.k8s.io/v1"

__all__ = ["KubeLease", "expiry_of", "lease_name", "lease_paths", "micro_time",
           "parse_micro_time", "read_lease"]


def micro_time(epoch: float) -> str:
    """A Kubernetes MicroTime (RFC 3339, microseconds, UTC)."""
    return datetime.fromtimestamp(epoch, UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def parse_micro_time(text: str) -> float:
    return datetime.fromisoformat(text.replace("Z", "+00:00")).timestamp()


def expiry_of(lease: Object) -> float | None:
    """``renewTime + leaseDurationSeconds`` (epoch seconds); None if either is missing."""
    spec = lease.get("spec") or {}
    renew, duration = spec.get("renewTime") or spec.get("acquireTime"), spec.get(
        "leaseDurationSeconds")
    if not isinstance(renew, str) or not isinstance(duration, int):
        return None
    try:
        return parse_micro_time(renew) + duration
    except ValueError:
        return None


def lease_paths(namespace: str, name: str) -> tuple[str, str]:
    """The API paths of the namespace's Leases and of the Lease ``name``."""
    collection = f"{LEASE_API}/namespaces/{quote(namespace, safe='')}/leases"
    return collection, f"{collection}/{quote(name, safe='')}"


def read_lease(client: KubeClient, path: str) -> Object | None:
    """The Lease at ``path``; None if there is none."""
    try:
        return client.get(path)
    except KubeError as exc:
        if exc.status == 404:
            return None
        raise


class KubeLease:
    """A ``PlaneLease`` kept as a Lease object; written with merge patches, created once."""

    def __init__(self, client: KubeClient, namespace: str, name: str, holder: str,
                 stops_within: float = 0.0) -> None:
        """``stops_within``: how long the fence around the ranks takes to stop them once
        the Lease lapses (``fencing.Fence.stops_within``)."""
        self.stops_within = stops_within
        self.client = client
        self.namespace = namespace
        self.name = name
        self.holder = holder
        self._collection, self._path = lease_paths(namespace, name)

    @property
    def where(self) -> str:
        return f"{self.namespace}/{self.name}"

    def _spec(self, expires_at: float) -> Object:
        # A whole number of seconds (the field is an int32), renewTime moved back by the
        # rounding: renewTime + leaseDurationSeconds is exactly expires_at.
        duration = max(1, math.ceil(expires_at - time.time()))
        return {"holderIdentity": self.holder, "leaseDurationSeconds": duration,
                "renewTime": micro_time(expires_at - duration)}

    def renew(self, expires_at: float) -> None:
        spec = self._spec(expires_at)
        try:
            self.client.patch(self._path, {"spec": spec})
            return
        except KubeError as exc:
            if exc.status != 404:
                raise
        body = {"apiVersion": "coordination.k8s.io/v1", "kind": "Lease",
                "metadata": {"name": self.name, "namespace": self.namespace,
                             "labels": {"app.kubernetes.io/managed-by": "phalanx"}},
                "spec": {**spec, "acquireTime": spec["renewTime"]}}
        try:
            self.client.create(self._collection, body)
        except KubeError as exc:
            if exc.status != 409:  # created meanwhile: patch that one
                raise
            self.client.patch(self._path, {"spec": spec})

    def expires_at(self) -> float | None:
        found = read_lease(self.client, self._path)
        return None if found is None else expiry_of(found)

    def release(self) -> None:
        """Lapse now: renewTime one second ago, for one second."""
        try:
            self.client.patch(self._path, {"spec": {
                "leaseDurationSeconds": 1, "renewTime": micro_time(time.time() - 1)}})
        except KubeError as exc:
            if exc.status != 404:
                raise
