"""The lease a compute-plane worker renews, and the fence inside the cluster that reads it.

A worker (``phalanx.worker``) renews its plane's lease each time it reaches the control
plane, to ``now + fence_after``. Something inside the cluster that outlives the worker
(the pod's supervisor on the local plane, ``compute/local/shim.py``; the node doctor or an
entrypoint wrapper on Kubernetes) stops the plane's pods once the lease has lapsed, so a
worker killed with ``kill -9`` or cut off from the control plane cannot leave ranks
running while the control plane requeues their job elsewhere.

``PlaneLease`` is what every kind of lease provides; ``FileLease`` is the local plane's:
a small JSON file ``{"holder": ..., "expiresAt": <epoch seconds>}`` written atomically.
A Kubernetes implementation keeps a ``coordination.k8s.io`` Lease with the same meaning
(``renewTime + leaseDurationSeconds`` = ``expiresAt``).
"""

from __future__ import annotations

import json
import os
import threading
import time
from pathlib import Path
from typing import Protocol

LEASE_FILE = "lease.json"
# The pod's supervisor reads its lease file this often (seconds): the fence acts at most
# this long after the lease lapses.
LEASE_POLL = 0.5
FENCE_GRACE_MAX = 5.0


def fence_step(fence_after: float, cap: float = FENCE_GRACE_MAX) -> float:
    """A tenth of the fence, at most ``cap``: the scale of everything that must act well
    within it (the fence's grace, its reads, the worker's reconnect backoff). With a fence
    of minutes that is the cap; one of seconds (tests) acts within its own scale."""
    return min(cap, fence_after / 10)


def fence_grace(fence_after: float) -> float:
    """SIGTERM to SIGKILL when a fence stops a plane's pods."""
    return fence_step(fence_after)


def fence_margin(fence_after: float) -> float:
    """What the control plane waits beyond a worker's fence and its pods' stop before it
    calls the plane lost. The fence in the cluster acts on the lease alone, which the
    worker renews from when it sent what the control plane took; the margin is for the
    two machines' clocks and the lease's write and reads (a tenth of the fence, 5 s at
    most, twice)."""
    return 2 * fence_step(fence_after)


def lost_after_needed(fence_after: float, stops_within: float) -> float:
    """The shortest ``--worker-lost-after`` that keeps a plane's ranks off two clusters at
    once: its fence, the time its fence takes to stop every pod, and the margin."""
    return fence_after + stops_within + fence_margin(fence_after)


class PlaneLease(Protocol):
    """The lease that keeps a plane's pods alive; renewed only while the control plane answers."""

    def renew(self, expires_at: float) -> None:
        """Hold the lease until ``expires_at`` (epoch seconds); raises if it cannot be written."""

    def expires_at(self) -> float | None:
        """When the lease lapses as last written (None: never written, which reads as lapsed)."""

    def release(self) -> None:
        """Let the lease lapse now: the fence stops the plane's pods."""

    @property
    def stops_within(self) -> float:
        """Seconds from the lease lapsing until its fence has stopped every pod (SIGKILL
        included)."""

    @property
    def where(self) -> str:
        """Where the lease is kept, for pods' supervisors and for messages."""


class FileLease:
    """A lease kept in a file on this machine: the local plane's."""

    def __init__(self, path: Path, holder: str, grace: float = FENCE_GRACE_MAX) -> None:
        """``grace``: SIGTERM to SIGKILL when the pods' supervisors fence them (written in
        the file, where they read it)."""
        self.path = Path(path)
        self.holder = holder
        self.grace = grace

    @property
    def stops_within(self) -> float:
        return LEASE_POLL + self.grace

    @property
    def where(self) -> str:
        return str(self.path)

    def renew(self, expires_at: float) -> None:
        write_lease(self.path, self.holder, expires_at, self.grace)

    def expires_at(self) -> float | None:
        return read_expiry(self.path)

    def release(self) -> None:
        write_lease(self.path, self.holder, 0.0, self.grace)


def write_lease(path: Path, holder: str, expires_at: float,
                grace: float = FENCE_GRACE_MAX) -> None:
    tmp = path.with_name(f"{path.name}.{os.getpid()}.{threading.get_ident()}.tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with open(fd, "w", encoding="utf-8") as out:
        json.dump({"holder": holder, "expiresAt": expires_at, "renewedAt": time.time(),
                   "grace": grace}, out)
    os.replace(tmp, path)


def read_expiry(path: Path | str) -> float | None:
    """The lease's expiry; None when the file is missing or unreadable (a lapsed lease).

    The shim has a copy of this reading (it imports nothing from the package); both read
    the same ``expiresAt`` key.
    """
    try:
        with open(path, encoding="utf-8") as f:
            value = json.load(f).get("expiresAt")
    except (OSError, ValueError, AttributeError):
        return None
    return float(value) if isinstance(value, int | float) else None
