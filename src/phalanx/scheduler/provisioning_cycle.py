"""The cycle's part in provisioning: take holds, and place gangs whose pools are Ready
(the state it works on is in ``provisioning``)."""

from __future__ import annotations

from typing import Protocol

from phalanx.scheduler.cache import QueueInfo
from phalanx.scheduler.flavorassigner.flavors import FIT
from phalanx.scheduler.placement import Placement, PodGroup
from phalanx.scheduler.provisioning import (
    Hold,
    PodSetNeed,
    ProvisioningNeed,
    nodes_needed,
    provisioning_reason,
    reserved_toleration,
)
from phalanx.scheduler.state import State
from phalanx.scheduler.types import CycleResult, PendingReason
from phalanx.scheduler.workload import FR, Workload
from phalanx.spec.provisioning import RESERVED_FOR


class CycleView(Protocol):
    """What of the running cycle these functions use (``cycle.Cycle``)."""

    st: State
    result: CycleResult

    def set_reason(self, wl: Workload, reason: PendingReason) -> None: ...

    def admit_on(self, wl: Workload, info: QueueInfo, usage: dict[FR, int],
                 groups: tuple[PodGroup, ...], placement: Placement,
                 flavors: tuple[dict[str, str], ...]) -> None: ...


def try_hold(cycle: CycleView, wl: Workload, info: QueueInfo) -> str | None:
    """Hold ``wl``'s quota on a provisionable flavor of its queue when it fits there without
    preemption: None when held; otherwise a note for its pending reason ("" for none)."""
    st = cycle.st
    prov = st.provisioning
    groups = info.groups
    names = {f.name for g in groups for f in g.flavors if f.name in prov.flavors}
    if not names:
        return ""
    if not prov.create_pools:
        return "; no new node pool is created now (ProvisioningPolicy createPools: false)"
    open_flavors = set()
    notes = []
    for name in sorted(names):
        why = prov.blocked(wl.name, name, st.now)
        if why:
            notes.append(f"{name}: {why}")
        else:
            open_flavors.add(name)
    if not open_flavors:
        return "; node pools tried: " + "; ".join(notes)
    excluded = frozenset(
        (i, g, f.name) for i in range(len(wl.pod_sets)) for g, group in enumerate(groups)
        for f in group.flavors if f.name not in open_flavors
    )
    counts = tuple(ps.count for ps in wl.pod_sets)
    a = st.assigner.assign_quota(wl, info, counts, excluded)
    if a.mode != FIT:
        return ""
    chosen = {f for c in a.choices for f in c.flavors.values()}
    if len(chosen) != 1:
        return ""  # one pool serves one flavor; a gang across flavors is not provisioned
    flavor = chosen.pop()
    spec = prov.flavors[flavor]
    slice_size = spec.nodes_per_pool if isinstance(spec.nodes_per_pool, int) else None
    pod_sets = []
    for c in a.choices:
        requests = dict(c.pod_set.requests)
        n = nodes_needed(spec.node, requests, c.count, slice_size)
        if n == 0:
            return (f"; a pod of pod set {c.pod_set.name} fits no node of flavor {flavor}'s "
                    "pools (provisioning.node)")
        pod_sets.append(PodSetNeed(c.pod_set.name, c.count, requests, n))
    need = ProvisioningNeed(wl.name, info.name, flavor, tuple(pod_sets))
    if spec.max_nodes is not None and need.nodes > spec.max_nodes:
        return (f"; it needs {need.nodes} nodes of flavor {flavor}, above its maxNodes "
                f"({spec.max_nodes})")
    hold = Hold(wl, need, dict(a.usage), a,
                message=f"waiting for a node pool of {need.nodes} {flavor} node"
                        f"{'s' if need.nodes != 1 else ''}")
    st.queues.discard(wl)
    st.unreported.pop(wl.name, None)
    st.cache.charge(info.name, hold.usage)
    prov.holds[wl.name] = hold
    cycle.result.provisioning.append(need)
    cycle.set_reason(wl, provisioning_reason(hold.message))
    return None


def place_ready(cycle: CycleView) -> None:
    """Admit every held gang whose pool is Ready, onto the pool's nodes only."""
    st = cycle.st
    prov = st.provisioning
    for name in sorted(prov.holds):
        hold = prov.holds[name]
        if hold.ready_nodes is None:
            continue
        wl = hold.wl
        info = st.infos.get(wl.cluster_queue)
        if info is None:
            continue
        groups = tuple(
            PodGroup(g.name, g.count, g.count, g.requests,
                     tuple(sorted({**dict(g.node_selector), RESERVED_FOR: wl.name}.items())),
                     (*g.tolerations, reserved_toleration(wl.name)))
            for g in st.assigner.groups_for(info, hold.assignment)
        )
        placed = st.pool.place(groups, wl.topology)
        if not isinstance(placed, Placement):
            hold.message = (f"the node pool is Ready but the gang does not fit its nodes: "
                            f"{placed.message}")
            cycle.set_reason(wl, provisioning_reason(hold.message))
            continue
        del prov.holds[name]
        st.cache.charge(info.name, hold.usage, -1)
        cycle.admit_on(wl, info, hold.usage, groups, placed,
                       tuple(c.flavors for c in hold.assignment.choices))

