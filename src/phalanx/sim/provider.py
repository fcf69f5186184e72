"""The ``simulated`` provider: node pools bought and given back in virtual time.

It implements the same ``Provider`` interface as the local and Kubernetes providers, with a
clock the simulator moves instead of the wall clock, and no threads: a pool is ``Creating``
from ``create`` until ``options.delay`` has passed, then ``Ready`` with ``node_count`` nodes
named ``<pool>-<i>``; ``delete`` removes it at once (the simulator models the wait before a
deletion itself). Stockouts are injected as the local provider's are (``options.stockout``:
true, the first N pools of the flavor, or a list of attempt numbers), or at a rate
(``options.stockoutRate``: the chance that a request finds no capacity, drawn from a seeded
generator, so a replay is reproducible).
"""

from __future__ import annotations

import random
from dataclasses import dataclass, replace

from phalanx.provisioning.base import (
    RESERVED_FOR,
    PoolRequest,
    PoolState,
    PoolStatus,
    Provider,
    Stockout,
)
from phalanx.spec.quantity import parse_duration


@dataclass(slots=True)
class _Pool:
    request: PoolRequest
    ready_at: float
    nodes: tuple[str, ...]


def pool_delay(options: dict[str, object]) -> float:
    """Seconds from a pool's creation until every node is Ready."""
    value = options.get("delay")
    return 0.0 if value is None else parse_duration(value)


def always_out_of_stock(options: dict[str, object]) -> bool:
    """Whether no request can ever find capacity (asking again is pointless)."""
    rate = options.get("stockoutRate")
    return options.get("stockout") is True or (isinstance(rate, int | float) and rate >= 1)


class SimulatedProvider(Provider):
    """Pools in virtual time: ``now`` is set by the simulator before each call."""

    name = "simulated"

    def __init__(self, seed: int = 0) -> None:
        self.now = 0.0
        self._pools: dict[str, _Pool] = {}
        self._created: dict[str, int] = {}  # flavor -> pools asked for (stockouts included)
        self._rng = random.Random(seed)

    def create(self, request: PoolRequest) -> PoolStatus:
        found = self._pools.get(request.name)
        if found is not None:
            return self._status(found)
        count = self._created[request.flavor] = self._created.get(request.flavor, 0) + 1
        why = self._stockout(request, count)
        if why:
            raise Stockout(why)
        nodes = tuple(f"{request.name}-{i}" for i in range(request.node_count))
        pool = _Pool(request, self.now + pool_delay(request.options), nodes)
        self._pools[request.name] = pool
        return self._status(pool)

    def _stockout(self, request: PoolRequest, count: int) -> str:
        options = request.options
        rule = options.get("stockout", False)
        where = f"no capacity for {request.node_count} node(s) of flavor {request.flavor}"
        if rule is True:
            return f"{where} (options.stockout: true)"
        if isinstance(rule, int) and not isinstance(rule, bool) and count <= rule:
            return f"{where} (options.stockout: the first {rule} pool(s))"
        if isinstance(rule, list) and request.attempt in rule:
            return f"{where} (options.stockout: attempt {request.attempt})"
        rate = options.get("stockoutRate")
        if isinstance(rate, int | float) and rate > 0 and self._rng.random() < rate:
            return f"{where} (options.stockoutRate: {rate:g})"
        return ""

    def status(self, name: str) -> PoolStatus | None:
        pool = self._pools.get(name)
        return None if pool is None else self._status(pool)

    def _status(self, pool: _Pool) -> PoolStatus:
        ready = self.now >= pool.ready_at
        request = pool.request
        return PoolStatus(
            name=request.name, state=PoolState.READY if ready else PoolState.CREATING,
            nodes=pool.nodes, ready_nodes=len(pool.nodes) if ready else 0,
            node_count=request.node_count, config_hash=request.config_hash,
            message="every node Ready" if ready else
                    f"nodes boot until {pool.ready_at:g} s (options.delay)")

    def ready_at(self, name: str) -> float:
        return self._pools[name].ready_at

    def reassign(self, name: str, job: str) -> bool:
        pool = self._pools.get(name)
        if pool is None:
            return False
        request = pool.request
        pool.request = replace(request, job=job, node_labels={**request.node_labels,
                                                              RESERVED_FOR: job},
                               node_taints=tuple((k, job if k == RESERVED_FOR else v, e)
                                                 for k, v, e in request.node_taints))
        return True

    def list(self) -> list[PoolStatus]:
        return [self._status(p) for _, p in sorted(self._pools.items())]

    def delete(self, name: str) -> None:
        self._pools.pop(name, None)
