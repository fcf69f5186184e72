"""The node doctor: runs the checks, and turns their answers into the node's health.

Any ERR makes the node unhealthy (no new pods; the gangs on it are stopped and
requeued), any WARN degraded; N/A counts as nothing. A check that raises is an
ERR saying so: a broken check must not pass for a healthy node.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Sequence
from pathlib import Path

from pydantic import Field

from phalanx.health.checks import ERR, PASS, WARN, Check, result, worst
from phalanx.health.gpu import NVMLSession, TemperatureLimits, gpu_checks
from phalanx.health.host import DiskCheck, MemoryCheck
from phalanx.health.site import site_checks
from phalanx.spec.base import Model
from phalanx.spec.resources import CheckStatus, NodeCheck, NodeHealth

log = logging.getLogger("phalanx.health")


class Report(Model):
    """One run of the doctor: every check's answer and what they make of the node."""

    node: str
    time: float = Field(description="Epoch seconds at the end of the run")
    status: CheckStatus = Field(description="The worst answer: PASS, WARN or ERR")
    health: NodeHealth
    reasons: list[str] = Field(default_factory=list, description="'check: message' of each "
                               "WARN and ERR")
    checks: list[NodeCheck]
    gpus: int | None = Field(default=None, description="GPUs NVML sees (None: no NVML)")


def health_of(checks: Sequence[NodeCheck]) -> tuple[CheckStatus, NodeHealth, list[str]]:
    """(worst answer, node health, reasons) of a set of check results."""
    status = worst([c.status for c in checks])
    health = {ERR: NodeHealth.UNHEALTHY, WARN: NodeHealth.DEGRADED}.get(
        status, NodeHealth.HEALTHY)
    reasons = [f"{c.name}: {c.message}" for c in checks if c.status in (ERR, WARN)]
    return (status if status in (ERR, WARN) else PASS), health, reasons


class Doctor:
    """Runs a node's checks, once (``run``) or on a period in a thread (``start``)."""

    def __init__(
        self, node: str, checks: Sequence[Check], *, session: NVMLSession | None = None,
        site_dir: Path | None = None, site_timeout: float = 60.0,
    ) -> None:
        self.node = node
        self.checks = list(checks)
        self.session = session  # refreshed before the GPU checks of each run
        # Listed again at each run: a check dropped into the directory runs from the next one.
        self.site_dir = site_dir
        self.site_timeout = site_timeout
        self.last: Report | None = None
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def run(self) -> Report:
        if self.session is not None:
            self.session.refresh()
        results = []
        for check in [*self.checks, *site_checks(self.site_dir, self.site_timeout)]:
            try:
                results.append(check.run())
            except Exception as exc:
                log.exception("check %s failed to run", check.name)
                results.append(result(check.name, ERR, f"the check failed to run: {exc}"))
        status, health, reasons = health_of(results)
        gpus = None
        if self.session is not None and self.session.nvml is not None:
            gpus = len(self.session.gpus)
        self.last = Report(node=self.node, time=time.time(), status=status, health=health,
                           reasons=reasons, checks=results, gpus=gpus)
        return self.last

    def start(self, interval: float, on_report: Callable[[Report], None]) -> None:
        """Run every ``interval`` seconds in a thread, handing each report to ``on_report``."""
        self._thread = threading.Thread(target=self._loop, args=(interval, on_report),
                                        name="phalanx-doctor", daemon=True)
        self._thread.start()

    def _loop(self, interval: float, on_report: Callable[[Report], None]) -> None:
        while not self._stop.is_set():
            try:
                on_report(self.run())
            except Exception:  # the next run tries again
                log.exception("node doctor run failed")
            self._stop.wait(interval)

    def wait(self) -> None:
        """Block until the periodic runs stop (``close`` from another thread, or Ctrl-C)."""
        while self._thread is not None and self._thread.is_alive():
            self._thread.join(timeout=1.0)

    def close(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=30)
            self._thread = None
        if self.session is not None:
            self.session.close()


def default_checks(
    *,
    expected_gpus: Callable[[], int | None],
    disk_paths: Sequence[Path],
    temperature: TemperatureLimits | None = None,
) -> tuple[list[Check], NVMLSession]:
    """The built-in checks (GPU, disk, memory) and the NVML session they share."""
    session = NVMLSession()
    checks: list[Check] = [
        *gpu_checks(session, expected_gpus, temperature),
        DiskCheck(list(disk_paths)),
        MemoryCheck(),
    ]
    return checks, session


def make_doctor(
    node: str, *, expected_gpus: Callable[[], int | None], disk_paths: Sequence[Path],
    site_dir: Path | None = None, site_timeout: float = 60.0,
) -> Doctor:
    """A doctor with the built-in checks and the site's checks in ``site_dir``."""
    checks, session = default_checks(expected_gpus=expected_gpus, disk_paths=disk_paths)
    return Doctor(node, checks, session=session, site_dir=site_dir, site_timeout=site_timeout)
