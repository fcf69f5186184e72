"""The node pools a worker buys on its plane for the control plane's provisioning controller.

The worker offers the providers declared for its compute kind that it can build on its plane
(``PlaneHello.providers``). The desired state lists the pools the controller wants and those
it wants gone (``DesiredPool.deleted``): the worker creates a wanted pool it does not have
and deletes an unwanted one; a pool the list does not name is left alone (a restarted
control plane lists none until it asks again). Its state directory serves one control plane
(``agent.py``), so every pool its providers hold was made for that control plane.

Each report carries the pools as the providers see them, and the pools a provider refused,
with the class of the refusal (stockout, configuration, transient), until the control plane
stops asking for them.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Sequence

from phalanx.compute.base import ComputePlane
from phalanx.provisioning.base import (
    PoolRequest,
    PoolState,
    PoolStatus,
    Provider,
    ProvisioningError,
)
from phalanx.provisioning.registry import build_provider
from phalanx.spec.computeplanes import plane_providers
from phalanx.spec.planes import DesiredPool, PoolReport

log = logging.getLogger("phalanx.worker")


def offered_providers(plane: ComputePlane, compute: str) -> dict[str, Provider]:
    """The providers of ``compute`` this worker can build on ``plane``, by name."""
    built: dict[str, Provider] = {}
    for name in plane_providers(compute):
        try:
            built[name] = build_provider(name, plane)
        except Exception as exc:  # (not offered: the control plane's jobs are told why)
            log.warning("provider %s is not offered: %s", name, exc)
    return built


def pool_report(provider: str, status: PoolStatus) -> PoolReport:
    return PoolReport(
        name=status.name, provider=provider,
        state=status.state.value if status.state is not PoolState.UNKNOWN else "Creating",
        nodes=list(status.nodes), ready_nodes=status.ready_nodes, node_count=status.node_count,
        config_hash=status.config_hash, message=status.message,
        error=status.error.kind if status.error is not None else None)


class WorkerPools:
    def __init__(self, providers: dict[str, Provider]) -> None:
        self.providers = providers
        self._lock = threading.Lock()
        self._refused: dict[str, PoolReport] = {}  # pools a provider would not make
        self._undeleted: dict[str, str] = {}  # pools whose deletion failed: why

    @property
    def offered(self) -> list[str]:
        return sorted(self.providers)

    def converge(self, desired: Sequence[DesiredPool]) -> None:
        """Create the wanted pools not made yet, delete the unwanted ones."""
        wanted = {p.name for p in desired if not p.deleted}
        unwanted = {p.name for p in desired if p.deleted}
        with self._lock:
            self._refused = {n: r for n, r in self._refused.items() if n in wanted}
            self._undeleted = {n: e for n, e in self._undeleted.items() if n in unwanted}
            refused = set(self._refused)
        for pool in desired:
            provider = self.providers.get(pool.provider)
            if provider is None:
                if not pool.deleted:
                    self._refuse(pool, f"this worker does not offer provider {pool.provider}",
                                 "ConfigurationError")
                continue
            try:
                if pool.deleted:
                    provider.delete(pool.name)
                    with self._lock:
                        self._undeleted.pop(pool.name, None)
                elif pool.name not in refused:
                    provider.create(PoolRequest.from_dict(pool.request))  # (idempotent)
            except Exception as exc:  # (a cloud's own error: retried as a transient one)
                if pool.deleted:  # tried again at the next converge; the control plane counts
                    log.warning("node pool %s: deletion failed: %s", pool.name, exc)
                    with self._lock:
                        self._undeleted[pool.name] = str(exc)
                elif isinstance(exc, ProvisioningError):
                    self._refuse(pool, exc.message, exc.kind)
                else:
                    log.exception("node pool %s: creation failed", pool.name)
                    self._refuse(pool, str(exc), "TransientError")

    def _refuse(self, pool: DesiredPool, message: str, kind: str) -> None:
        request = pool.request
        with self._lock:
            self._refused[pool.name] = PoolReport(
                name=pool.name, provider=pool.provider, state="Failed",
                node_count=int(request.get("nodeCount", 0)), message=message, error=kind)

    def report(self) -> list[PoolReport]:
        """Every pool the providers have, and those they refused."""
        out: list[PoolReport] = []
        for name, provider in sorted(self.providers.items()):
            try:
                out += [pool_report(name, s) for s in provider.list()]
            except Exception:  # (reported again at the next report)
                log.exception("could not list the pools of provider %s", name)
        with self._lock:
            out = [p.model_copy(update={"deletion_error": self._undeleted[p.name]})
                   if p.name in self._undeleted else p for p in out]
            listed = {p.name for p in out}
            out += [r for n, r in sorted(self._refused.items()) if n not in listed]
        return out

    def close(self) -> None:
        for provider in self.providers.values():
            provider.close()
