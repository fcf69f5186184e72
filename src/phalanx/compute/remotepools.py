"""The node pools of a plane behind a worker, as the control plane keeps them: the pools its
provisioning controller wants there (sent with the desired state) and those the worker last
reported. ``RemotePlane`` holds one; the provider the controller drives
(``provisioning/remote.py``) reads and edits it.

A pool the controller asked to delete stays listed (``deleted``) until the worker reports
it gone; one it wants stays listed until it asks for its deletion. A pool the list does not
name is left alone by the worker, so a restarted control plane, which lists none, takes
nothing from under a running gang.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterable, Sequence
from typing import Any

from phalanx.spec.planes import DesiredPool, PoolReport


class RemotePools:
    def __init__(self, changed: Callable[[], None]) -> None:
        self._lock = threading.Lock()
        self._changed = changed  # the desired state changed: wake the worker's poll
        self._desired: dict[str, DesiredPool] = {}
        self._reported: dict[str, PoolReport] = {}
        # The providers the worker offers, as it last said; None: not said since this start.
        self.offered: list[str] | None = None

    def want(self, name: str, provider: str, request: dict[str, Any]) -> None:
        with self._lock:
            wanted = DesiredPool(name=name, provider=provider, request=request)
            if self._desired.get(name) == wanted:
                return
            self._desired[name] = wanted
        self._changed()

    def unwant(self, name: str, provider: str) -> None:
        """Ask the worker to delete the pool (nothing happens there when it has none)."""
        with self._lock:
            known = self._desired.get(name)
            if known is not None and known.deleted:
                return
            self._desired[name] = DesiredPool(
                name=name, provider=provider, deleted=True,
                request=known.request if known is not None else {})
        self._changed()

    def desired(self) -> list[DesiredPool]:
        with self._lock:
            return [p.model_copy() for _, p in sorted(self._desired.items())]

    def wanted(self, name: str) -> DesiredPool | None:
        with self._lock:
            return self._desired.get(name)

    def take(self, reported: Sequence[PoolReport], offered: Iterable[str] | None) -> None:
        """A report came: its pools are the plane's now; a deletion it shows done is dropped."""
        with self._lock:
            self._reported = {p.name: p for p in reported}
            if offered is not None:
                self.offered = list(offered)
            for name in [n for n, p in self._desired.items()
                         if p.deleted and n not in self._reported]:
                del self._desired[name]

    def reported(self, name: str) -> PoolReport | None:
        with self._lock:
            return self._reported.get(name)

    def all_reported(self, provider: str) -> list[PoolReport]:
        with self._lock:
            return [p for p in self._reported.values() if p.provider == provider]
