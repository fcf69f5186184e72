"""Why a gang does not fit the nodes: one sentence with numbers, for its pending reason.

The counts of nodes that match a pod shape but are tainted, cordoned, unhealthy or
lack a resource are kept per signature until the node set changes.
"""

from __future__ import annotations

from collections.abc import Sequence

from phalanx.scheduler.node_classes import Status, fit_count
from phalanx.scheduler.node_index import NodeIndex
from phalanx.scheduler.packing import Entry, Overlay, Signature
from phalanx.scheduler.pod_groups import PlacementFailure, PodGroup
from phalanx.scheduler.topology import TopologyDomains
from phalanx.scheduler.types import PendingCode
from phalanx.spec.planes import PLANE_LABEL
from phalanx.spec.quantity import format_amount


class PlacementExplainer:
    def __init__(self, index: NodeIndex, domains: TopologyDomains) -> None:
        self.index = index
        self.domains = domains

    def room(self, entries: list[Entry], overlay: Overlay) -> tuple[int, int]:
        """(nodes with room for one more pod, pods that fit node by node)."""
        nodes = pods = 0
        for cls, pairs, _ in entries:
            room_pods, room_nodes = cls.room_nodes(pairs)
            pods += room_pods
            nodes += room_nodes
        by_class = {id(e[0]): e for e in entries}
        for name, free in overlay.items():
            found = self.index.entry_of(name, by_class)
            if found is not None:
                before = fit_count(self.index.free[name], found[1], 1 << 30)
                after = fit_count(free, found[1], 1 << 30)
                nodes += (after > 0) - (before > 0)
                pods += after - before
        return nodes, pods

    def no_fit(self, groups: Sequence[PodGroup], sigs: list[Signature], failed: int,
                overlay: Overlay) -> PlacementFailure:
        group, sig = groups[failed], sigs[failed]
        text = needs(group, sig, len(groups) > 1)
        if sig.sizes is None or sig.sizes[0] != self.index.members:
            sig.sizes = (self.index.members, (
                sum(e[0].size for e in sig.entries) + sum(
                    c.size for c in sig.blocked + sig.lacking),
                sum(c.size for c in sig.untolerated),
                sum(c.size for c in sig.blocked if c.status == Status.CORDONED),
                sum(c.size for c in sig.blocked if c.status == Status.UNHEALTHY),
                sum(c.size for c in sig.lacking),
            ))
        matching, untolerated, cordoned, unhealthy, lacking = sig.sizes[1]
        if not matching:
            if untolerated:
                taint = sig.untolerated[0].taints[0]
                text += (f"; the {untolerated} nodes with those labels have taints it does not "
                         f"tolerate (e.g. {taint.key}={taint.value}:{taint.effect})")
            elif group.node_selector:
                text += f"; none of the {len(self.index.nodes)} nodes has those labels"
            else:
                text += "; the cluster has no nodes"
            return PlacementFailure(PendingCode.NO_NODE_FITS, text)
        room_nodes, room_pods = self.room(sig.flat, overlay)
        text += f"; {room_nodes} of {matching} matching nodes have room, for {room_pods} pods"
        notes = [f"{n} {what}" for n, what in (
            (cordoned, "cordoned"),
            (unhealthy, "unhealthy"),
            (lacking, "without " + "/".join(r for r, _ in sig.requests)),
        ) if n]
        if notes:
            text += f" ({', '.join(notes)})"
        if room_pods >= group.min_count:
            text += ", but not together with the job's other pod sets"
        return PlacementFailure(PendingCode.NO_NODE_FITS, text + self._closed_planes(sigs))

    def topology(self, groups: Sequence[PodGroup], sigs: list[Signature], key: str,
                 overlay: Overlay, anywhere: list[list[str]]) -> PlacementFailure:
        """A required topology no value of ``key`` satisfies, though the gang fits the
        cluster as a whole (on the nodes ``anywhere``)."""
        wanted = sum(g.min_count for g in groups)
        pods = ", ".join(
            needs(g, s, False)[len("needs "):] for g, s in zip(groups, sigs, strict=True)
        )
        domains = self.domains
        if key == PLANE_LABEL:
            return self._across_planes(groups, sigs, overlay, anywhere, pods, wanted)
        planes = self.index.multi_plane  # each value of key is met plane by plane
        text = (f"needs {pods} within one {key} of one compute plane (required topology; a "
                "gang never spans two clusters)" if planes
                else f"needs {pods} within one {key} (required topology)")
        ranked = domains.rank(groups, sigs, key, overlay, domains.freed(overlay, key),
                              prune=False)
        if not ranked:
            text += f", but no matching node has the label {key}"
        else:
            best, room = min(ranked, key=lambda dr: (-dr[1], dr[0]))
            text += (f"; the roomiest {key}, {best}, has room for {room} of the "
                     f"{wanted} pods{' over all clusters together' if planes else ''}, "
                     f"while the cluster as a whole fits {sum(len(n) for n in anywhere)}")
        return PlacementFailure(PendingCode.TOPOLOGY_UNSATISFIABLE, text)


    def _across_planes(self, groups: Sequence[PodGroup], sigs: list[Signature],
                       overlay: Overlay, anywhere: list[list[str]], pods: str,
                       wanted: int) -> PlacementFailure:
        """The gang fits the compute planes together but no single one (it never spans two)."""
        domains = self.domains
        ranked = domains.rank(groups, sigs, PLANE_LABEL, overlay,
                              domains.freed(overlay, PLANE_LABEL), prune=False)
        text = f"needs {pods} within one compute plane (a gang never spans two clusters)"
        if ranked:
            best, room = min(ranked, key=lambda dr: (-dr[1], dr[0]))
            text += (f"; the roomiest, cluster {best}, has room for {room} of the {wanted} "
                     f"pods, while all clusters together fit {sum(len(n) for n in anywhere)}")
        return PlacementFailure(PendingCode.TOPOLOGY_UNSATISFIABLE,
                                text + self._closed_planes(sigs))

    def _closed_planes(self, sigs: list[Signature]) -> str:
        """With several planes, those whose every matching node takes no placements, and
        why: "; cluster onprem takes no placements (compute plane onprem is
        disconnected)". Empty with one plane."""
        if not self.index.multi_plane:
            return ""
        open_planes = {e[0].labels.get(PLANE_LABEL) for sig in sigs for e in sig.entries}
        closed: dict[str, str] = {}
        for cls in (c for sig in sigs for c in sig.blocked):
            plane = cls.labels.get(PLANE_LABEL)
            if plane is None or plane in open_planes or plane in closed:
                continue
            closed[plane] = "its nodes are cordoned or unhealthy"
            member = next((names[0] for names in cls.buckets.values() if names), None)
            node = self.index.nodes.get(member) if member is not None else None
            for reason in node.health_reasons if node is not None else ():
                if f"compute plane {plane} " in reason:
                    # (without the seconds of silence, which were those at the last report)
                    closed[plane] = reason.removeprefix("NotReady: ").split(" (silent for")[0]
                    break
        return "".join(f"; cluster {plane} takes no placements ({why})"
                       for plane, why in sorted(closed.items()))


def needs(group: PodGroup, sig: Signature, name_it: bool) -> str:
    """'needs 4 pods x 8 nvidia.com/gpu on nodes with gpu=h100', for pending reasons."""
    count = (f"{group.count}" if group.min_count == group.count
             else f"at least {group.min_count} (up to {group.count})")
    each = [f"{format_amount(a, r)} {r}" for r, a in sig.requests]
    text = f"needs {count} pods"
    if len(each) == 1:
        text += f" x {each[0]}"
    elif each:
        text += f" x ({', '.join(each)})"
    if name_it:
        text = f"pod set {group.name} {text}"
    if group.node_selector:
        text += " on nodes with " + ", ".join(f"{k}={v}" for k, v in group.node_selector)
    return text
