"""The ``local`` provider: node pools of virtual nodes on the local plane.

A pool's nodes appear in the local plane's inventory ``options.delay`` after the pool is
asked for (its processes still run on this machine), and go when it is deleted, one status
read after the deletion was asked, so that deletion is confirmed as a cloud's would be.
``options.stockout`` injects stockouts: ``true`` (every pool), a count N (the first N pools
of the flavor) or a list of attempt numbers; ``options.error`` injects a transient or a
configuration error (at the attempts ``options.errorAttempts`` lists, or at every one);
``options.failDeletion`` makes every deletion fail.
Pools are files in the state directory (``<home>/pools``), so they survive a restart of the
control plane, and a restarted provider puts the nodes of its Ready pools back. Opting out
of node upgrades does not apply: virtual nodes are never upgraded.
"""

from __future__ import annotations

import builtins
import json
import os
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from phalanx.compute.base import ComputePlane
from phalanx.compute.local.inventory import DEFAULT_MAX_PODS
from phalanx.compute.local.plane import LocalPlane
from phalanx.provisioning.base import (
    RESERVED_FOR,
    ConfigurationError,
    PoolRequest,
    PoolState,
    PoolStatus,
    Provider,
    Stockout,
    TransientError,
)
from phalanx.spec.quantity import format_quantity, parse_duration
from phalanx.spec.resources import Node, Taint

_CREATING, _READY, _DELETING = "Creating", "Ready", "Deleting"


class LocalProvider(Provider):
    name = "local"

    def __init__(self, plane: LocalPlane, directory: Path,
                 clock: Callable[[], float] = time.time) -> None:
        self.plane = plane
        self.directory = Path(directory)
        self.directory.mkdir(parents=True, exist_ok=True)
        self.clock = clock
        self._lock = threading.Lock()
        for data in self._load_all():
            if data["state"] == _READY:
                self._add_nodes(data)

    # ------------------------------------------------------------------ Provider
    def create(self, request: PoolRequest) -> PoolStatus:
        with self._lock:
            data = self._load(request.name)
            if data is None:
                self._check_stock(request)
                data = {"request": request.to_dict(), "hash": request.config_hash,
                        "createdAt": self.clock(), "state": _CREATING}
                self._save(request.name, data)
            status = self._advance(request.name, data)
            assert status is not None  # a pool being made is not being deleted
            return status

    def status(self, name: str) -> PoolStatus | None:
        with self._lock:
            data = self._load(name)
            return None if data is None else self._advance(name, data)

    def list(self) -> builtins.list[PoolStatus]:
        with self._lock:
            out = []
            for data in self._load_all():
                status = self._advance(data["request"]["name"], data)
                if status is not None:
                    out.append(status)
            return out

    def delete(self, name: str) -> None:
        with self._lock:
            data = self._load(name)
            if data is not None and data["request"]["options"].get("failDeletion"):
                raise TransientError(f"pool {name} could not be deleted "
                                     "(options.failDeletion)")
            if data is not None and data["state"] != _DELETING:
                data["state"] = _DELETING
                self._save(name, data)

    def reassign(self, name: str, job: str) -> bool:
        with self._lock:
            data = self._load(name)
            if data is None or data["state"] != _READY:
                return False
            request = data["request"]
            request["job"] = job
            request["nodeLabels"][RESERVED_FOR] = job
            request["nodeTaints"] = [[k, job if k == RESERVED_FOR else v, e]
                                     for k, v, e in request["nodeTaints"]]
            self._save(name, data)
            self._add_nodes(data)  # the same nodes, reserved for their new job
            return True

    # ------------------------------------------------------------------ pools
    def _advance(self, name: str, data: dict[str, Any]) -> PoolStatus | None:
        """The pool's status now: its nodes come after the delay, and go when deleting."""
        request = data["request"]
        nodes = tuple(f"{name}-{i}" for i in range(int(request["nodeCount"])))
        if data["state"] == _DELETING:
            for node in nodes:
                self.plane.remove_virtual_node(node)
            (self.directory / f"{name}.json").unlink(missing_ok=True)
            return None
        if data["state"] == _CREATING:
            delay = parse_duration(request["options"].get("delay", 0))
            if self.clock() < data["createdAt"] + delay:
                return PoolStatus(name, PoolState.CREATING, (), 0, len(nodes), data["hash"],
                                  f"nodes come up {delay:g}s after the request")
            data["state"] = _READY
            self._save(name, data)
            self._add_nodes(data)
        return PoolStatus(name, PoolState.READY, nodes, len(nodes), len(nodes), data["hash"],
                          f"{len(nodes)} virtual node(s) Ready")

    def _add_nodes(self, data: dict[str, Any]) -> None:
        request = data["request"]
        name = request["name"]
        allocatable = {res: format_quantity(int(v), res) for res, v in request["node"].items()}
        allocatable.setdefault("pods", str(DEFAULT_MAX_PODS))
        for i in range(int(request["nodeCount"])):
            node_name = f"{name}-{i}"
            self.plane.add_virtual_node(Node(
                name=node_name,
                labels={**request["nodeLabels"], "kubernetes.io/hostname": node_name,
                        "phalanx.io/compute": "local-virtual"},
                taints=[Taint(key=k, value=v, effect=e)
                        for k, v, e in request["nodeTaints"]],
                allocatable=allocatable,
            ))

    def _check_stock(self, request: PoolRequest) -> None:
        stockout = request.options.get("stockout", False)
        out = False
        if stockout is True:
            out = True
        elif isinstance(stockout, list):
            out = request.attempt in stockout
        elif isinstance(stockout, int) and stockout > 0:
            counter = self.directory / f".stockouts-{request.flavor}"
            served = int(counter.read_text()) if counter.exists() else 0
            if served < stockout:
                _write_atomic(counter, str(served + 1))
                out = True
        if out:
            raise Stockout(f"no capacity for {request.node_count} node(s) of flavor "
                           f"{request.flavor} (options.stockout)")
        error = request.options.get("error")
        attempts = request.options.get("errorAttempts")
        if error and (not isinstance(attempts, list) or request.attempt in attempts):
            if error == "configuration":
                raise ConfigurationError(f"machine shape {request.node} is refused for "
                                         f"flavor {request.flavor} (options.error)")
            raise TransientError(f"the provider failed for a moment (options.error, attempt "
                                 f"{request.attempt})")

    # ------------------------------------------------------------------ files
    def _load(self, name: str) -> dict[str, Any] | None:
        path = self.directory / f"{name}.json"
        try:
            loaded: dict[str, Any] = json.loads(path.read_text())
        except FileNotFoundError:
            return None
        return loaded

    def _load_all(self) -> builtins.list[dict[str, Any]]:
        out = []
        for path in sorted(self.directory.glob("*.json")):
            data = self._load(path.stem)
            if data is not None:
                out.append(data)
        return out

    def _save(self, name: str, data: dict[str, Any]) -> None:
        _write_atomic(self.directory / f"{name}.json", json.dumps(data, sort_keys=True))


def _write_atomic(path: Path, text: str) -> None:
    tmp = path.with_name(f".{path.name}.tmp")
    with open(tmp, "w") as f:
        f.write(text)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)


def build(plane: ComputePlane) -> Provider:
    """The provider of the local plane ``plane`` (its ``ProviderInfo.build``)."""
    assert isinstance(plane, LocalPlane)
    return LocalProvider(plane, plane.home / "pools")
