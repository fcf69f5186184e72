"""A provider of a plane behind a worker, as the control plane drives it: ``RemoteProvider``.

The worker's plane offers its providers (``PlaneHello.providers``); the provisioning
controller drives one of them through this proxy exactly as it drives a provider of its own
plane. ``create`` and ``delete`` edit the pools listed with the plane's desired state (the
worker creates and deletes them, ``worker/pools.py``); ``status`` and ``list`` read what the
worker last reported. A failure the worker's provider raised comes back with its class
(stockout, configuration, transient), so the same rules decide what happens next.

While the worker is not connected its pools read ``Unknown``: not Ready, not failed, not
gone, so that no deletion is taken as done and no idle pool is deleted meanwhile.
"""

from __future__ import annotations

import builtins

from phalanx.compute.remote import PlaneState, RemotePlane
from phalanx.provisioning.base import (
    ERROR_KINDS,
    ConfigurationError,
    PoolRequest,
    PoolState,
    PoolStatus,
    Provider,
    ProvisioningError,
    TransientError,
)
from phalanx.spec.planes import PoolReport


class RemoteProvider(Provider):
    def __init__(self, name: str, plane: RemotePlane) -> None:
        self.name = name
        self.plane = plane

    def _check_offered(self) -> None:
        offered = self.plane.pools.offered
        if offered is None:
            raise TransientError(f"the worker of compute plane {self.plane.plane} has not said "
                                 "yet which node-pool providers it offers")
        if self.name not in offered:
            has = ", ".join(offered) if offered else "none"
            raise ConfigurationError(
                f"the worker of compute plane {self.plane.plane} does not offer provider "
                f"{self.name} (it offers {has}); start it with a --compute whose providers "
                "include it, or use one it offers")

    def create(self, request: PoolRequest) -> PoolStatus:
        self._check_offered()
        self.plane.pools.want(request.name, self.name, request.to_dict())
        found = self.status(request.name)
        if found is not None:
            return found
        return PoolStatus(request.name, PoolState.CREATING, node_count=request.node_count,
                          config_hash=request.config_hash,
                          message=f"asked of the worker of compute plane {self.plane.plane}")

    def status(self, name: str) -> PoolStatus | None:
        pools = self.plane.pools
        wanted = pools.wanted(name)
        if self.plane.state is not PlaneState.CONNECTED:
            if wanted is None and pools.reported(name) is None:
                return None
            return PoolStatus(name, PoolState.UNKNOWN, message=(
                f"unknown: compute plane {self.plane.plane} is {self.plane.describe_state()}"))
        reported = pools.reported(name)
        if reported is not None and reported.provider == self.name:
            return self._status(reported)
        if wanted is not None and not wanted.deleted:
            request = PoolRequest.from_dict(wanted.request)
            return PoolStatus(name, PoolState.CREATING, node_count=request.node_count,
                              config_hash=request.config_hash,
                              message=f"asked of the worker of compute plane {self.plane.plane}")
        return None

    def list(self) -> builtins.list[PoolStatus]:
        if self.plane.state is not PlaneState.CONNECTED:
            return []  # (nothing is collected on what a silent worker said before)
        return [self._status(p) for p in self.plane.pools.all_reported(self.name)]

    def delete(self, name: str) -> None:
        """Ask the worker; a deletion it reports failing raises, as its provider's would (the
        controller counts them: a cleanup that keeps failing stops failover)."""
        self.plane.pools.unwant(name, self.name)
        reported = self.plane.pools.reported(name)
        if reported is not None and reported.deletion_error:
            raise TransientError(f"the worker of compute plane {self.plane.plane} could not "
                                 f"delete pool {name}: {reported.deletion_error}")

    def _status(self, report: PoolReport) -> PoolStatus:
        """The worker's report, its nodes named as the control plane names them."""
        error: ProvisioningError | None = None
        if report.error is not None:
            error = ERROR_KINDS.get(report.error, ProvisioningError)(report.message)
        return PoolStatus(
            report.name, PoolState(report.state),
            tuple(f"{self.plane.plane}.{n}" for n in report.nodes), report.ready_nodes,
            report.node_count, report.config_hash, report.message, error)
