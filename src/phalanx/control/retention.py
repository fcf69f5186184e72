"""Deleting finished jobs and their logs once they are older than the finished-job TTL,
forgetting Idempotency-Keys a day after they were used, and pruning uploaded workdirs.

Without it the store and the log directory grow with every job ever run. A thread
of its own does the work, so a slow disk never delays a scheduling step, and it
works in small batches: each batch is one short store transaction (the jobs, their
events and labels) after removing the batch's log directories, so no API call or
loop write waits long behind it. Only finished jobs are ever deleted; the store
checks that in the same statement that deletes them.

An Idempotency-Key protects retries of one request, which come within minutes;
like Stripe's API, Phalanx keeps each key for 24 hours, so the table stays the
size of a day's keyed submits however long the server runs.

A workdir archive (``store/workdirs.py``) is pruned once no job that has not ended names
it and it has not been used (uploaded, asked about, named at submit) for the workdir
retention, 7 days by default; the same thread does it, at most once an hour, and an admin
may ask for a pass at any time (``phalanx workdirs prune``).
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable

from phalanx.control.periodic import Periodic
from phalanx.control.state import ControlState
from phalanx.spec.sources import WorkdirArchive
from phalanx.store import Store
from phalanx.store.workdirs import PruneReport, WorkdirStore

log = logging.getLogger("phalanx.retention")

DEFAULT_BATCH = 500
# A pass over 100,000 expired jobs ends after this many batches; the next pass goes on.
MAX_BATCHES_PER_PASS = 200
IDEMPOTENCY_KEY_TTL = 24 * 3600.0
# Keys are forgotten at least this often, whatever the finished-job TTL.
REQUEST_SWEEP_SECONDS = 600.0
DEFAULT_WORKDIR_RETENTION = 7 * 24 * 3600.0
WORKDIR_PRUNE_EVERY = 3600.0  # the background's passes over the workdir store, at most


class WorkdirPruner:
    """Prunes the archives no live job needs and no one used for ``retention`` seconds
    (None or 0: only when asked)."""

    def __init__(self, archives: WorkdirStore, state: ControlState, retention: float | None,
                 clock: Callable[[], float], *, every: float = WORKDIR_PRUNE_EVERY) -> None:
        self.archives = archives
        self.state = state
        self.retention = retention if retention and retention > 0 else None
        self.clock = clock
        self.every = every
        self._last: float | None = None
        self._lock = threading.Lock()  # one pass at a time: the background's or an admin's

    def needed(self) -> set[str]:
        """The archives of the jobs that have not ended (queued, admitted, running...)."""
        with self.state.lock:
            return {r.spec.workdir.sha256 for r in self.state.jobs.values()
                    if isinstance(r.spec.workdir, WorkdirArchive)}

    def prune(self, older_than: float | None = None, *, dry_run: bool = False) -> PruneReport:
        """One pass now, keeping what was used within ``older_than`` (default: the
        retention, else 7 days)."""
        keep_for = older_than if older_than is not None else (
            self.retention or DEFAULT_WORKDIR_RETENTION)
        with self._lock:
            report = self.archives.prune_unused(self.needed(), keep_for, self.clock(),
                                                dry_run=dry_run)
        if report.removed and not dry_run:
            log.info("pruned %d workdir archive(s), %d bytes, unused for %gs and named by no "
                     "live job", len(report.removed), report.removed_bytes, keep_for)
        return report

    def due(self) -> PruneReport | None:
        """A pass if the retention is set and the last was an ``every`` ago or more."""
        now = self.clock()
        if self.retention is None or (self._last is not None and now - self._last < self.every):
            return None
        self._last = now
        return self.prune()


class FinishedJobCollector(Periodic):
    _thread_name = "phalanx-retention"
    # the next pass tries again
    _failure = "deleting finished jobs, old Idempotency-Keys or unused workdirs failed"
    _log = log
    _join_seconds = 30.0

    def __init__(
        self, store: Store, delete: Callable[[list[str]], list[str]], ttl_seconds: float | None,
        clock: Callable[[], float], *, batch: int = DEFAULT_BATCH,
        request_ttl: float = IDEMPOTENCY_KEY_TTL, workdirs: WorkdirPruner | None = None,
    ) -> None:
        super().__init__()
        self.store = store
        self.workdirs = workdirs
        self.request_ttl = request_ttl
        self._delete = delete
        self.ttl_seconds = ttl_seconds if ttl_seconds and ttl_seconds > 0 else None
        self.clock = clock
        self.batch = batch

    @property
    def interval(self) -> float:
        """Seconds between passes: a tenth of the TTL, within 1 s to 60 s (10 min with none)."""
        if self.ttl_seconds is None:
            return REQUEST_SWEEP_SECONDS
        return min(60.0, max(1.0, self.ttl_seconds / 10))

    def forget_requests(self) -> int:
        """Forget Idempotency-Keys older than their TTL; how many."""
        forgotten = self.store.forget_requests_before(self.clock() - self.request_ttl)
        if forgotten:
            log.info("forgot %d Idempotency-Key(s) older than %gs", forgotten, self.request_ttl)
        return forgotten

    def collect(self) -> list[str]:
        """One pass: delete finished jobs older than the TTL, batch by batch; their names."""
        if self.ttl_seconds is None:
            return []
        cutoff = self.clock() - self.ttl_seconds
        deleted: list[str] = []
        for _ in range(MAX_BATCHES_PER_PASS):
            if self._stop.is_set():
                break
            names = self.store.finished_before(cutoff, self.batch)
            if not names:
                break
            deleted += self._delete(names)
            if len(names) < self.batch:
                break
        if deleted:
            log.info("deleted %d finished job(s) older than the TTL (%gs)", len(deleted),
                     self.ttl_seconds)
        return deleted

    def _period(self) -> float:
        return self.interval

    def _pass(self) -> None:
        self.collect()
        self.forget_requests()
        if self.workdirs is not None:
            self.workdirs.due()
