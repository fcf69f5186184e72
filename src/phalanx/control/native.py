"""Kubernetes-native admission, the control plane's side: managed objects become jobs.

The Kubernetes plane follows the objects (``compute/kubernetes/native.py``); this takes
each managed object it has not made a job of yet, translates it as ``submit`` would
(``spec.manifests.native``), and submits it, so the job is stored before anything about it
is decided, let alone unsuspended. An object deleted ends its job (cancelled, as ``phalanx
cancel`` would). After a restart the plane relists the objects and this adopts them: a job
that exists already (by its deterministic name) is left as it is.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Mapping
from typing import Any, Protocol

from phalanx.control.periodic import Periodic
from phalanx.control.service import UNKNOWN_USER, JobService
from phalanx.errors import NotFound, PhalanxError
from phalanx.spec.manifests import translate
from phalanx.spec.manifests.native import NATIVE_LABEL, as_authored, owner_of
from phalanx.spec.manifests.native_kinds import kind_of

log = logging.getLogger("phalanx.control")

# How often an object refused unchanged is tried again: what it names (a LocalQueue, a
# priority) may have been created since.
RETRY_REFUSED_SECONDS = 30.0


class ManagedSource(Protocol):
    """What follows the managed objects (the Kubernetes plane's ``NativeJobs``)."""

    @property
    def synced(self) -> bool: ...

    def managed(self) -> list[Any]: ...

    def take_deleted(self) -> set[str]: ...

    def refuse(self, job: str, message: str) -> None: ...

    def admission_patch(self, obj: dict[str, Any], user: str | None) -> list[Any]: ...


class NativeIntake(Periodic):
    """Submits each managed object once, and cancels the jobs of deleted objects."""

    _thread_name = "phalanx-native-intake"
    # the next tick tries again; nothing is half-submitted
    _failure = "native admission: intake failed"
    _log = log

    def __init__(self, service: JobService, source: ManagedSource,
                 tick_seconds: float = 0.25) -> None:
        super().__init__()
        self.service = service
        self.source = source
        self.tick_seconds = tick_seconds
        self._known: set[str] = set()  # jobs made (or found made) of an object
        # job -> (the resourceVersion refused, why, when): said once on the object, and
        # tried again now and then
        self._refused: dict[str, tuple[str, str, float]] = {}

    def _period(self) -> float:
        return self.tick_seconds

    def _pass(self) -> None:
        self.step()

    def step(self) -> list[str]:
        """Submit what is new, cancel what was deleted; the jobs submitted."""
        if not self.source.synced:
            return []
        managed = self.source.managed()
        for job in sorted(self.source.take_deleted() | self._orphans({m.job for m in managed})):
            self._known.discard(job)
            try:
                record = self.service.cancel(job)
            except NotFound:
                continue
            log.info("native admission: the object of job %s was deleted (%s)", job,
                     record.status)
        submitted = []
        for item in managed:
            if item.job in self._known or _finished(item.obj):
                continue
            if self._exists(item.job):
                self._known.add(item.job)
                continue
            version = str(item.obj["metadata"].get("resourceVersion"))
            refused = self._refused.get(item.job)
            now = time.monotonic()
            if refused is not None and refused[0] == version \
                    and now - refused[2] < RETRY_REFUSED_SECONDS:
                continue
            manifest = as_authored(item.obj, item.default_queue)
            try:
                adapter = kind_of(item.obj)
                if adapter is not None:
                    adapter.check(item.obj)
                spec = translate(manifest).spec
                self.service.submit_many([spec], batch=False,
                                         user=owner_of(item.obj) or UNKNOWN_USER,
                                         manifests={spec.name: manifest})
            except PhalanxError as exc:
                where = f" (at {exc.field})" if exc.field else ""
                fix = f"; {exc.fix}" if exc.fix else ""
                message = f"{exc.message}{where}{fix}"
                self._refused[item.job] = (version, message, now)
                if refused is None or refused[1] != message:  # said once, not every retry
                    self.source.refuse(item.job, message)
                continue
            self._known.add(item.job)
            self._refused.pop(item.job, None)
            submitted.append(item.job)
            log.info("native admission: queued %s/%s as job %s",
                     item.obj["metadata"].get("namespace"), item.obj["metadata"]["name"],
                     item.job)
        return submitted

    def _orphans(self, present: set[str]) -> set[str]:
        """Live jobs of managed objects no longer there: deleted while the control plane was
        down (or their namespace no longer managed)."""
        state = self.service.state
        with state.lock:
            return {name for name, record in state.jobs.items()
                    if record.spec.labels.get(NATIVE_LABEL) and name not in present
                    and not record.cancel_requested and not record.status.terminal}

    def _exists(self, job: str) -> bool:
        try:
            self.service.get(job)
        except NotFound:
            return False
        return True


def _finished(obj: Mapping[str, Any]) -> bool:
    """An object that ran to its end (its job may have been collected since): left alone."""
    adapter = kind_of(obj)
    return adapter is not None and adapter.progress(obj).finished is not None
