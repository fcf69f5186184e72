"""Capacity follows health (MLBatch's slack queue, made general).

A ClusterQueue with ``capacityFollowsHealth`` loses, from its nominal quota of each
flavor, the capacity of that flavor's nodes that are unhealthy or cordoned (a node is
the flavor's when its labels carry the flavor's ``nodeLabels``); its ``lendingLimit``
is kept within what is left. The scheduler works with the shrunk configuration and
recomputes it whenever nodes change; the queue's admitted jobs over the shrunk quota
(over what it could hold, borrowing included) are preempted, lowest priority first.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from phalanx.scheduler.admitted import least_work_lost
from phalanx.scheduler.cache import QuotaCache
from phalanx.scheduler.workload import FR, PODS, Workload
from phalanx.spec.config import QueueConfig
from phalanx.spec.quantity import format_amount
from phalanx.spec.resources import ClusterQueue, Node, NodeHealth

Withheld = dict[FR, int]  # (flavor, resource) -> capacity of nodes that are out


def follows_health(config: QueueConfig) -> list[ClusterQueue]:
    return [cq for cq in config.cluster_queues.values() if cq.capacity_follows_health]


def withheld(config: QueueConfig, nodes: Iterable[Node]) -> Withheld:
    """The capacity of the unhealthy or cordoned nodes of every flavor a slack queue uses."""
    flavors = {f.name for cq in follows_health(config) for g in cq.resource_groups
               for f in g.flavors}
    out: Withheld = {}
    out_nodes = [n for n in nodes if n.unschedulable or n.health is NodeHealth.UNHEALTHY]
    for name in sorted(flavors):
        labels = config.flavors[name].node_labels.items()
        for node in out_nodes:
            if labels <= node.labels.items():
                for res, amount in node.allocatable.items():
                    out[(name, res)] = out.get((name, res), 0) + amount
    return {fr: amount for fr, amount in out.items() if amount}


def shrunk(config: QueueConfig, lost: Withheld) -> QueueConfig:
    """``config`` with every slack queue's quotas less what ``lost`` withholds."""
    if not lost:
        return config
    changed = []
    for cq in follows_health(config):
        groups = []
        for group in cq.resource_groups:
            flavors = []
            for fq in group.flavors:
                quotas = []
                for q in fq.resources:
                    nominal = max(0, q.nominal_quota - lost.get((fq.name, q.name), 0))
                    lending = None if q.lending_limit is None else min(q.lending_limit, nominal)
                    quotas.append(q.model_copy(update={"nominal_quota": nominal,
                                                       "lending_limit": lending}))
                flavors.append(fq.model_copy(update={"resources": quotas}))
            groups.append(group.model_copy(update={"flavors": flavors}))
        changed.append(cq.model_copy(update={"resource_groups": groups}))
    new = config.model_copy(deep=True)
    for cq in changed:
        new.cluster_queues[cq.name] = cq
    return new


def over_quota(cache: QuotaCache, config: QueueConfig,
               admitted: Mapping[str, Iterable[Workload]]) -> list[Workload]:
    """Jobs of slack queues to preempt so that each holds no more than it now may: lowest
    priority first, least work lost first among equals. Jobs already terminating count as
    gone."""
    victims: list[Workload] = []
    for cq in follows_health(config):
        node = cache.cqs.get(cq.name)
        jobs = admitted.get(cq.name)
        if node is None or jobs is None:
            continue
        over: dict[FR, int] = {}
        for fr in node.usage:
            excess = -cache.available(node, fr)
            if excess > 0:
                over[fr] = excess
        if not over:
            continue
        running = []
        for wl in jobs:
            if wl.terminating:
                for fr in over:
                    over[fr] -= wl.usage.get(fr, 0)
            else:
                running.append(wl)
        running.sort(key=lambda c: (c.priority, *least_work_lost(c)))
        for wl in running:
            if all(excess <= 0 for excess in over.values()):
                break
            if any(excess > 0 and wl.usage.get(fr, 0) for fr, excess in over.items()):
                victims.append(wl)
                for fr in over:
                    over[fr] -= wl.usage.get(fr, 0)
    return victims


def describe(lost: Withheld) -> str:
    parts = [f"{format_amount(amount, res)} {res} of {flavor}" for (flavor, res), amount in sorted(
        lost.items()) if res != PODS]
    return ", ".join(parts) or "capacity"
