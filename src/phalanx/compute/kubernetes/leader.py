"""Leadership among control-plane replicas decided by a ``coordination.k8s.io/v1`` Lease.

``phalanx up --ha --leader-lease kubernetes`` (the Kubernetes install with ``replicas`` of 2
or more) elects its leader the way Kubernetes' own controllers do: a Lease object in the
control plane's namespace names the holder (``holderIdentity``), when it last renewed
(``renewTime``) and for how long (``leaseDurationSeconds``); a replica takes it once it has
run out, counting ``leaseTransitions``, and every change is a merge patch conditioned on the
``resourceVersion`` it read, so two replicas never both take it. The URL a follower sends
clients to rides on the Lease as an annotation.

The Lease decides who should lead; the store still fences. A replica that the Lease names
then takes the store's lease row (``store/leases.py``) whatever its expiry, which adds one
to the row's term under a row lock: the old leader's writes in flight finish first and every
later one is refused. So a paused or partitioned old leader writes nothing after a new one
leads, exactly as with the store's own lease, and the store's term is the fence's.
"""

from __future__ import annotations

import math
import time
from typing import TYPE_CHECKING

from phalanx.compute.kubernetes.client import KubeClient, KubeError, Object
from phalanx.compute.kubernetes.lease import (
    expiry_of,
    lease_paths,
    micro_time,
    parse_micro_time,
    read_lease,
)
from phalanx.defaults import LEADER_LEASE_NAME as DEFAULT_NAME
from phalanx.store.leases import LEADER_LEASE, Fence, Lease, LeaseStore, check_lease_seconds

if TYPE_CHECKING:
    from phalanx.store import Store

URL_ANNOTATION = "phalanx.dev/leader-url"


class KubeLeaderLease:
    """The leader's lease kept as a Kubernetes Lease, mirrored into the store for fencing.

    Same calls as ``LeaseStore`` (``try_acquire``, ``release``), so the ``Elector`` takes
    either."""

    def __init__(self, client: KubeClient, namespace: str, store_leases: LeaseStore,
                 name: str = DEFAULT_NAME) -> None:
        self.client = client
        self.namespace = namespace
        self.name = name
        self.store_leases = store_leases
        self._collection, self._path = lease_paths(namespace, name)

    @property
    def where(self) -> str:
        return f"{self.namespace}/{self.name}"

    @property
    def store(self) -> Store:
        """The store whose lease row mirrors the Lease (and whose term fences)."""
        return self.store_leases.store

    def read(self) -> Lease | None:
        """The Lease as it stands (no write): a follower's look at who leads."""
        found = self._read()
        return None if found is None else self._as_lease(found)

    def _read(self) -> Object | None:
        return read_lease(self.client, self._path)

    def _as_lease(self, obj: Object) -> Lease:
        """The Lease as the Elector reads leases (a follower's view of the leader)."""
        spec = obj.get("spec") or {}
        annotations = (obj.get("metadata") or {}).get("annotations") or {}
        renewed = spec.get("renewTime")
        expires = expiry_of(obj)
        return Lease(
            name=LEADER_LEASE, holder=str(spec.get("holderIdentity") or ""),
            url=str(annotations.get(URL_ANNOTATION) or ""),
            term=int(spec.get("leaseTransitions") or 0) + 1,
            renewed_at=parse_micro_time(renewed) if isinstance(renewed, str) else 0.0,
            expires_at=expires if expires is not None else 0.0)

    def _spec(self, holder: str, seconds: float, now: float) -> Object:
        return {"holderIdentity": holder, "leaseDurationSeconds": max(1, math.ceil(seconds)),
                "renewTime": micro_time(now)}

    def try_acquire(self, holder: str, url: str, seconds: float, *,
                    now: float | None = None) -> Lease:
        """Renew the Lease if ``holder`` holds it, take it if it is free or has run out; then
        make the store's lease row name ``holder`` (its term fences every write). The lease
        as it stands after: ``holder`` leads if it is named."""
        check_lease_seconds(seconds)
        now = time.time() if now is None else now
        found = self._read()
        if found is None:
            body = {"apiVersion": "coordination.k8s.io/v1", "kind": "Lease",
                    "metadata": {"name": self.name, "namespace": self.namespace,
                                 "labels": {"app.kubernetes.io/managed-by": "phalanx"},
                                 "annotations": {URL_ANNOTATION: url}},
                    "spec": {**self._spec(holder, seconds, now), "acquireTime": micro_time(now),
                             "leaseTransitions": 0}}
            try:
                self.client.create(self._collection, body)
            except KubeError as exc:
                if exc.status != 409:
                    raise
                return self._current()  # another replica created it first
        else:
            lease = self._as_lease(found)
            if lease.holder and lease.holder != holder and not lease.expired(now):
                return lease
            spec = self._spec(holder, seconds, now)
            if lease.holder != holder:
                transitions = int((found.get("spec") or {}).get("leaseTransitions") or 0)
                spec.update(acquireTime=micro_time(now), leaseTransitions=transitions + 1)
            patch = {"metadata": {"resourceVersion": found["metadata"]["resourceVersion"],
                                  "annotations": {URL_ANNOTATION: url}}, "spec": spec}
            try:
                self.client.patch(self._path, patch)
            except KubeError as exc:
                if exc.status != 409:
                    raise
                return self._current()  # another replica changed it since we read it
        # The Lease names this replica: the store's row follows, whatever its expiry.
        return self.store_leases.try_acquire(holder, url, seconds, now=now, take=True)

    def _current(self) -> Lease:
        found = self._read()
        if found is None:  # deleted as we looked: nobody leads until the next try
            return Lease(LEADER_LEASE, "", "", 0, 0.0, 0.0)
        return self._as_lease(found)

    def release(self, fence: Fence) -> bool:
        """Give the Lease up now (a planned stop), if ``fence``'s holder holds it, as
        Kubernetes' controllers do: no holder, one second long, renewed a second ago."""
        found = self._read()
        if found is None or (found.get("spec") or {}).get("holderIdentity") != fence.holder:
            return False
        try:
            self.client.patch(self._path, {
                "metadata": {"resourceVersion": found["metadata"]["resourceVersion"]},
                "spec": {"holderIdentity": "", "leaseDurationSeconds": 1,
                         "renewTime": micro_time(time.time() - 1)}})
        except KubeError as exc:
            if exc.status in (404, 409):
                return False
            raise
        self.store_leases.release(fence)
        return True
