"""Deleting finished jobs and their logs once they are older than the finished-job TTL,
and forgetting Idempotency-Keys a day after they were used.

Without it the store and the log directory grow with every job ever run. A thread
of its own does the work, so a slow disk never delays a scheduling step, and it
works in small batches: each batch is one short store transaction (the jobs, their
events and labels) after removing the batch's log directories, so no API call or
loop write waits long behind it. Only finished jobs are ever deleted; the store
checks that in the same statement that deletes them.

An Idempotency-Key protects retries of one request, which come within minutes;
like Stripe's API, Phalanx keeps each key for 24 hours, so the table stays the
size of a day's keyed submits however long the server runs.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable

from phalanx.store import Store

log = logging.getLogger("phalanx.retention")

DEFAULT_BATCH = 500
# A pass over 100,000 expired jobs ends after this many batches; the next pass goes on.
MAX_BATCHES_PER_PASS = 200
IDEMPOTENCY_KEY_TTL = 24 * 3600.0
# Keys are forgotten at least this often, whatever the finished-job TTL.
REQUEST_SWEEP_SECONDS = 600.0


class FinishedJobCollector:
    def __init__(
        self, store: Store, delete: Callable[[list[str]], list[str]], ttl_seconds: float | None,
        clock: Callable[[], float], *, batch: int = DEFAULT_BATCH,
        request_ttl: float = IDEMPOTENCY_KEY_TTL,
    ) -> None:
        self.store = store
        self.request_ttl = request_ttl
        self._delete = delete
        self.ttl_seconds = ttl_seconds if ttl_seconds and ttl_seconds > 0 else None
        self.clock = clock
        self.batch = batch
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

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

    def start(self) -> None:
        self._thread = threading.Thread(target=self._run, name="phalanx-retention",
                                        daemon=True)
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=30)

    def _run(self) -> None:
        while not self._stop.wait(self.interval):
            try:
                self.collect()
                self.forget_requests()
            except Exception:  # the next pass tries again
                log.exception("deleting finished jobs or old Idempotency-Keys failed")
