"""Free space in the control plane's state directory (``PHALANX_HOME``).

A write that fails for lack of space (the store's SQLite file, a log, a key) leaves
nothing half-written: the store's transaction rolls back. What the API adds here is the
answer: 507 "no space left in PHALANX_HOME (N bytes free)" instead of a bare 500, one
clear line in the server's log, and ``/healthz`` not ready while the disk is full, so a
load balancer or an operator sees it. Once space is freed, writes succeed again and
``/healthz`` says ok: nothing to reset.

Likewise a store that cannot be reached (PostgreSQL stopped, the network to it cut):
``store_unavailable`` makes the failure a 503 "the store is unavailable: ...", and the
first write that commits once it is back ends the fault. A submit refused so was not kept
(jobs join memory once stored); a change the control plane made in memory first (a
cancel) is written, and only then sent to the planes, once the store is back.
"""

from __future__ import annotations

import logging
import shutil
import threading
from pathlib import Path

from phalanx.errors import InsufficientStorage, Unavailable, is_no_space
from phalanx.store.engine import unavailable_reason

log = logging.getLogger("phalanx.api")

# Below this, the state directory counts as full: a submit, an event or a log line may
# not fit. Also the room a failed write asks for beyond what was free when it failed.
MIN_FREE_BYTES = 1024 * 1024
class StateDisk:
    """The disk of the state directory, as ``/healthz`` and a failed write see it."""

    def __init__(self, home: Path, min_free: int = MIN_FREE_BYTES) -> None:
        self.home = home
        self.min_free = min_free
        self._lock = threading.Lock()
        # Free bytes when a write last failed for lack of space (None: none failed since
        # space came back), and how many were refused since.
        self._failed_at: int | None = None
        self._refused = 0

    def free(self) -> int:
        try:
            return shutil.disk_usage(self.home).free
        except OSError:
            return self.min_free  # unknown: not reported as full

    def refusal(self, exc: BaseException) -> InsufficientStorage | None:
        """The 507 for a write that failed for lack of space (logged once, clearly); None
        when ``exc`` is another failure."""
        if not is_no_space(exc):
            return None
        free = self.free()
        with self._lock:
            self._failed_at = free
            self._refused += 1
        log.error("no space left in PHALANX_HOME %s (%d bytes free): a write was refused "
                  "(%s); nothing of it was kept; free space there and send it again",
                  self.home, free, _first_line(exc))
        return self.error(free)

    def error(self, free: int) -> InsufficientStorage:
        return InsufficientStorage(
            f"no space left in PHALANX_HOME ({free} bytes free)",
            fix=f"free space on the disk of {self.home} (delete finished jobs and their "
                "logs: phalanx delete), then send the request again; nothing of it was kept",
        )

    def problem(self) -> InsufficientStorage | None:
        """Why the control plane is not ready to write: too little free space now, or a
        write failed for lack of space and little has been freed since."""
        free = self.free()
        with self._lock:
            refused = 0
            if self._failed_at is not None and free >= self._failed_at + self.min_free:
                self._failed_at, refused, self._refused = None, self._refused, 0
            failed = self._failed_at is not None
        if refused:
            # Said again now that it can be written: the line at the time may not have fit.
            log.warning("space is back in PHALANX_HOME %s (%d bytes free): %d writes were "
                        "refused for lack of it (no space left in PHALANX_HOME), none kept "
                        "in part", self.home, free, refused)
        if free < self.min_free or failed:
            return self.error(free)
        return None


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    return text[0][:200] if text else type(exc).__name__


STORE_FIX = ("the request was not acknowledged: send it again once the store answers (the "
             "control plane reconnects by itself, and a submit or cancel sent again is not "
             "done twice); check that the database server runs and that this machine "
             "reaches it")


def store_unavailable(exc: BaseException) -> Unavailable | None:
    """The 503 for a request that failed because the store could not be reached (one line
    in the log, no traceback); None for any other failure."""
    reason = unavailable_reason(exc)
    if reason is None:
        return None
    log.error("the store is unavailable: %s; a request was refused", reason)
    return Unavailable(f"the store is unavailable: {reason}", field="db", fix=STORE_FIX)
