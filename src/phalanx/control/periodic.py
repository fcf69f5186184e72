"""A control-plane background pass: a daemon thread of its own that does one pass every
so many seconds, from ``start`` until ``stop``.

The start-time forecaster, the intake of Kubernetes-native objects and the retention
collector each run so; a pass that raises is logged and the next one tries again, so a
failure never ends the thread unseen.
"""

from __future__ import annotations

import logging
import threading


class Periodic:
    """Subclasses give ``_period`` (the seconds to wait before each pass) and ``_pass``."""

    _thread_name = "phalanx-periodic"
    _failure = "a background pass failed"  # logged, with the traceback, when a pass raises
    _log = logging.getLogger("phalanx")
    _join_seconds = 10.0  # how long ``stop`` waits for a pass under way

    def __init__(self) -> None:
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def _period(self) -> float:
        raise NotImplementedError

    def _pass(self) -> None:
        raise NotImplementedError

    def start(self) -> None:
        self._thread = threading.Thread(target=self._run, name=self._thread_name, daemon=True)
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=self._join_seconds)

    def _run(self) -> None:
        while not self._stop.wait(self._period()):
            try:
                self._pass()
            except Exception:
                self._log.exception(self._failure)
