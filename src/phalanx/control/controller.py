"""One control plane's state, its API-facing service and its loop, built together."""

from __future__ import annotations

import time
from collections.abc import Callable

from phalanx.compute.base import ComputePlane
from phalanx.control.estimates import StartForecaster, load_history
from phalanx.control.loop import ControlLoop, CredentialSource
from phalanx.control.metrics import Metrics
from phalanx.control.native import ManagedSource, NativeIntake
from phalanx.control.provisioning import ProvisioningController
from phalanx.control.reader import StoreReader
from phalanx.control.retention import (
    DEFAULT_BATCH,
    DEFAULT_WORKDIR_RETENTION,
    FinishedJobCollector,
    WorkdirPruner,
)
from phalanx.control.service import JobService
from phalanx.control.state import ControlState
from phalanx.scheduler import CycleResult, Scheduler
from phalanx.spec.config import QueueConfig
from phalanx.spec.resources import JobSpec
from phalanx.spec.status import JobRecord
from phalanx.store import LogStore, Store
from phalanx.store.workdirs import PruneReport, WorkdirStore


class Controller:
    """Builds the state from the store and the plane, recovers, and hands out the two halves.

    Routes use ``service``; the loop thread runs ``loop``. The few verbs below are the
    ones a driver (the server, a benchmark, a test) uses on the whole.
    """

    def __init__(
        self,
        store: Store,
        plane: ComputePlane,
        *,
        grace_seconds: float = 10.0,
        tick_seconds: float = 0.2,
        batch_seconds: float = 0.02,
        clock: Callable[[], float] = time.time,
        logs: LogStore | None = None,
        finished_ttl: float | None = None,
        collect_batch: int = DEFAULT_BATCH,
        credentials: CredentialSource | None = None,
        workdirs: WorkdirStore | None = None,
        workdir_retention: float | None = DEFAULT_WORKDIR_RETENTION,
        native: ManagedSource | None = None,
        reader: bool = False,
    ) -> None:
        """``finished_ttl``: seconds after which finished jobs and their ``logs`` are deleted
        (None: kept for ever); ``credentials``: what launched pods call the API with;
        ``workdirs``: the uploaded archives, pruned when no live job needs them and unused
        for ``workdir_retention`` seconds (None or 0: only when asked); ``native``: the
        managed objects of Kubernetes-native admission, made jobs of; ``reader``: a replica
        that follows, whose routes read the store (``control/reader.py``): nothing is
        recovered nor loaded into memory, and its store refuses writes."""
        self.store = store
        self.plane = plane
        self.started_at = clock()
        nodes = plane.inventory()
        stored = store.load_config()
        config = stored or QueueConfig.default_for(nodes)
        if stored is None and not reader:
            store.save_config(config)
        self.state = ControlState(store, Scheduler(config, nodes), config, nodes, clock=clock)
        self.service = (StoreReader if reader else JobService)(self.state, plane, logs)
        self.workdirs = None if workdirs is None else WorkdirPruner(
            workdirs, self.state, workdir_retention, clock)
        self.collector = FinishedJobCollector(store, self.service.delete_finished, finished_ttl,
                                              clock, batch=collect_batch,
                                              workdirs=self.workdirs)
        self.provisioning = ProvisioningController(self.state, plane)
        self.loop = ControlLoop(self.state, plane, grace_seconds=grace_seconds,
                                tick_seconds=tick_seconds, batch_seconds=batch_seconds,
                                credentials=credentials, provisioning=self.provisioning)
        if not reader:
            self.loop.recover()
            load_history(self.state, store)
        self.forecaster = StartForecaster(self.state)
        self.native = NativeIntake(self.service, native) if native is not None else None

    @property
    def metrics(self) -> Metrics:
        return self.state.metrics

    def start(self) -> None:
        self.loop.start()
        self.collector.start()
        self.forecaster.start()
        if self.native is not None:
            self.native.start()

    def stop(self) -> None:
        if self.native is not None:
            self.native.stop()
        self.forecaster.stop()
        self.collector.stop()
        self.loop.stop()
        self.provisioning.close()

    def collect_finished(self) -> list[str]:
        """Delete finished jobs older than the TTL now (the background does it every while)."""
        return self.collector.collect()

    def prune_workdirs(self, older_than: float | None = None, *,
                       dry_run: bool = False) -> PruneReport | None:
        """Prune the unused workdir archives now (None: this control plane keeps none)."""
        if self.workdirs is None:
            return None
        return self.workdirs.prune(older_than, dry_run=dry_run)

    def step(self) -> CycleResult:
        return self.loop.step()

    def submit(self, spec: JobSpec) -> JobRecord:
        return self.service.submit(spec)

    def cancel(self, name: str) -> JobRecord:
        return self.service.cancel(name)

    def get(self, name: str) -> JobRecord:
        return self.service.get(name)

    def status(self) -> dict[str, object]:
        return self.service.status(self.started_at)

    def health(self) -> tuple[bool, str]:
        """Whether the control loop is stepping, and a sentence saying so."""
        return self.loop.health()
