"""This machine as the local plane's node: cordon, health from the node doctor, GPUs,
and the virtual nodes whose pods run here too (``provisioning/local``)."""

from __future__ import annotations

import tempfile
import threading
import time
from collections.abc import Sequence
from pathlib import Path

from phalanx.compute.base import NodeTable
from phalanx.compute.local.gpus import GPUInfo, discover_gpus
from phalanx.compute.local.inventory import machine_node
from phalanx.errors import SpecError
from phalanx.health import Doctor, Report, make_doctor
from phalanx.health.stale import DoctorWatch, mark_stale, stale_after_for
from phalanx.spec.resources import Node, NodeCheck, NodeHealth


class MachineNode:
    """The node half of ``LocalPlane`` (which sets these attributes)."""

    home: Path
    node_name: str
    gpus: list[GPUInfo]
    expected_gpus: int
    max_pods: int
    _node: NodeTable
    _lock: threading.RLock
    _doctor: Doctor | None
    _doctor_watch: DoctorWatch

    def set_node_state(
        self, *, unschedulable: bool | None = None, health: NodeHealth | None = None,
        reasons: list[str] | None = None, checks: list[NodeCheck] | None = None,
    ) -> None:
        """Cordon or uncordon this machine, or set its health (from the node's checks).

        A change reaches the scheduler like any node change: through
        ``inventory_generation``, at the control loop's next step.
        """
        node = self._node.get(self.node_name)
        assert node is not None
        if unschedulable is not None:
            node.unschedulable = unschedulable
        if health is not None:
            node.health = health
        if reasons is not None:
            node.health_reasons = list(reasons)
        if checks is not None:
            node.checks = list(checks)
        self._node.upsert(node)

    def cordon(self, name: str, unschedulable: bool) -> None:
        self._node.cordon(name, unschedulable)

    def add_virtual_node(self, node: Node) -> None:
        """Add (or change) a node whose pods run on this machine too (``provisioning/local``:
        a rehearsal of bought nodes); its resources are advertised, not reserved here."""
        if node.name == self.node_name:
            raise SpecError(f"{node.name!r} is this machine's own node", field="node.name",
                            fix="give the virtual node another name")
        self._node.upsert(node)

    def remove_virtual_node(self, name: str) -> None:
        if name != self.node_name:
            self._node.remove(name)

    def set_gpus(self, gpus: Sequence[GPUInfo]) -> None:
        """The GPUs this machine now has (a GPU that fell off the bus is no longer offered)."""
        with self._lock:
            self.gpus = list(gpus)
        current = self._node.get(self.node_name)
        assert current is not None
        fresh = machine_node(self.node_name, self.gpus, self.max_pods)
        self._node.upsert(fresh.model_copy(update={
            "unschedulable": current.unschedulable, "health": current.health,
            "health_reasons": current.health_reasons, "checks": current.checks,
        }))

    def start_doctor(self, interval: float, *, site_dir: Path | None = None,
                     stale_after: float | None = None) -> Doctor:
        """Run the node doctor every ``interval`` seconds; its reports set this node's health.

        When NVML counts other GPUs than the node offers, the node offers what NVML sees.
        A doctor silent for ``stale_after`` seconds (default: five missed reports, at least
        five minutes) leaves the node degraded until it reports again.
        """
        doctor = make_doctor(
            self.node_name, expected_gpus=lambda: self.expected_gpus,
            disk_paths=[self.home, Path(tempfile.gettempdir())], site_dir=site_dir,
        )
        self._doctor = doctor
        self._doctor_watch.start(time.time(), stale_after_for(interval)
                                 if stale_after is None else stale_after)
        doctor.start(interval, self._apply_report)
        return doctor

    def _check_doctor(self, now: float) -> None:
        """A doctor that stopped reporting (a check that hangs, say) leaves the node
        degraded until it reports again."""
        watch = self._doctor_watch
        if self._doctor is not None and watch.falls_silent(now):
            node = self._node.get(self.node_name)
            assert node is not None and watch.heard is not None
            health, reasons = mark_stale(node.health, node.health_reasons, watch.heard, now,
                                         watch.stale_after)
            self.set_node_state(health=health, reasons=reasons)

    def _apply_report(self, report: Report) -> None:
        self._doctor_watch.report(time.time())
        if report.gpus is not None and report.gpus != len(self.gpus):
            self.set_gpus(discover_gpus())
        self.set_node_state(health=report.health, reasons=report.reasons, checks=report.checks)
