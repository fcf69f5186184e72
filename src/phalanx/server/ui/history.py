"""The cluster over the last hours, for the dashboard's charts: utilisation, running and
pending jobs, and admissions per ClusterQueue, sampled in the control plane's memory.

A thread of its own samples every ``interval`` seconds whether or not a page is open,
so the chart a team lead opens in the morning shows the night. Samples live as long as
the control plane runs (they are not stored); the oldest go past ``keep`` seconds.
"""

from __future__ import annotations

import contextlib
import itertools
import threading
import time
from collections import deque
from dataclasses import dataclass, field

from prometheus_client import CollectorRegistry

from phalanx.control import JobService
from phalanx.spec.resources import GPU

SAMPLE_SECONDS = 30.0
KEEP_SECONDS = 6 * 3600.0
CPU = "cpu"


@dataclass(frozen=True, slots=True)
class Sample:
    time: float
    utilisation: float  # share of the cluster's GPUs in use (CPUs when it has no GPU)
    running: int
    pending: int
    admitted: dict[str, int] = field(default_factory=dict)  # ClusterQueue -> admissions so far


def utilisation(service: JobService) -> tuple[float, str]:
    """The share of the cluster's GPUs in use now (of its CPUs when it has no GPU)."""
    nodes = service.nodes()
    resource = GPU if any(n.node.allocatable.get(GPU) for n in nodes) else CPU
    total = sum(n.node.allocatable.get(resource, 0) for n in nodes if not n.node.lost)
    used = sum(n.used.get(resource, 0) for n in nodes)
    return (used / total if total else 0.0), resource


class History:
    def __init__(self, service: JobService, admissions: AdmissionCounter,
                 interval: float = SAMPLE_SECONDS, keep: float = KEEP_SECONDS) -> None:
        self.service = service
        self.admissions = admissions
        self.interval = interval
        self.samples: deque[Sample] = deque(maxlen=max(2, int(keep / interval)))
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def start(self) -> None:
        self._thread = threading.Thread(target=self._run, name="dashboard-history", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()

    def _run(self) -> None:
        while not self._stop.is_set():
            # A failed sample leaves a gap in the chart, not a dead thread.
            with contextlib.suppress(Exception):
                self.sample()
            self._stop.wait(self.interval)

    def sample(self) -> Sample:
        share, _ = utilisation(self.service)
        overview = self.service.queues()
        sample = Sample(
            time=time.time(), utilisation=share,
            running=sum(q.admitted for q in overview.local_queues),
            pending=sum(q.pending for q in overview.local_queues),
            admitted=self.admissions.counts(),
        )
        with self._lock:
            self.samples.append(sample)
        return sample

    def recent(self) -> list[Sample]:
        with self._lock:
            return list(self.samples)


class AdmissionCounter:
    """Admissions per ClusterQueue since start, read from the control loop's metrics (the
    admission-latency histogram counts one observation per admission)."""

    def __init__(self, registry: CollectorRegistry) -> None:
        self.registry = registry

    def counts(self) -> dict[str, int]:
        counts: dict[str, int] = {}
        for metric in self.registry.collect():
            if metric.name != "phalanx_admission_latency_seconds":
                continue
            for sample in metric.samples:
                if sample.name.endswith("_count"):
                    counts[sample.labels["cluster_queue"]] = int(sample.value)
        return counts


def admission_rates(samples: list[Sample], queue: str) -> list[tuple[float, float]]:
    """Admissions per minute of ``queue`` between consecutive samples."""
    rates = []
    for before, after in itertools.pairwise(samples):
        span = after.time - before.time
        if span > 0:
            done = after.admitted.get(queue, 0) - before.admitted.get(queue, 0)
            rates.append((after.time, max(done, 0) * 60.0 / span))
    return rates
