"""Node placement of gangs: which concrete nodes a job's pods go to, all or nothing.

``NodePool`` tracks nodes and the resources jobs reserve on them. ``place``
answers "where would these pod groups go right now?" without changing
anything; the scheduler then calls ``reserve`` for the jobs it admits.

Placement packs: a pod goes to the eligible node with the least free capacity
of the scarcest requested resource (GPUs first), so whole nodes stay free for
large gangs. Nodes are indexed by equivalence class and free capacity (see
``node_classes``; the walk itself is in ``packing``), which keeps a call
proportional to classes plus pods rather than to nodes.

The pool is a facade over its parts: the node index (``node_index``), what jobs
reserve (``node_reservations``), the log of changes that keeps per-version tables
current (``change_log``), topology domains (``topology``) and the sentences that
explain a failure (``placement_failure``). Placing itself, packing gangs into
scopes of nodes, is here.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping, Sequence

from phalanx.scheduler.change_log import ChangeLog
from phalanx.scheduler.node_classes import fit_count
from phalanx.scheduler.node_index import NodeIndex
from phalanx.scheduler.node_reservations import NodeReservations
from phalanx.scheduler.packing import NO_DOMAIN, Entry, Overlay, Signature, fill
from phalanx.scheduler.placement_failure import PlacementExplainer
from phalanx.scheduler.pod_groups import Placement, PlacementFailure, PodGroup, group_key
from phalanx.scheduler.topology import TopologyDomains
from phalanx.spec.planes import PLANE_LABEL
from phalanx.spec.resources import Node, TopologyConstraint

# The pool's questions and answers are defined with it (``pod_groups``) and used by its callers.
__all__ = ["NodePool", "Placement", "PlacementFailure", "PodGroup"]


class NodePool:
    """Nodes, what jobs have reserved on them, and where new gangs would fit."""

    def __init__(self, nodes: Iterable[Node] = ()) -> None:
        self.log = ChangeLog()
        self.index = NodeIndex(self.log)
        self.reservations = NodeReservations(self.index)
        self.domains = TopologyDomains(self.index)
        self.explain = PlacementExplainer(self.index, self.domains)
        # Gangs that did not fit at ``_failed_version``: a cycle asks again for the same gang
        # from other queues while nothing was reserved or released in between.
        self._failed: dict[tuple[object, ...], PlacementFailure] = {}
        self._failed_version = -1
        for node in nodes:
            self.upsert(node)

    # ------------------------------------------------------------------ nodes
    def upsert(self, node: Node) -> None:
        """Add or change a node; reservations already on it stay."""
        self.index.upsert(node, self.reservations.used.get(node.name))

    def remove(self, name: str) -> None:
        """Forget a node; reservations on it stay accounted to their jobs until released."""
        self.index.remove(name)

    def nodes(self) -> list[Node]:
        nodes = self.index.nodes
        return [nodes[name] for name in sorted(nodes)]

    # ------------------------------------------------------------------ reservations
    def reserve(self, job: str, groups: Sequence[PodGroup], placement: Placement) -> None:
        """Charge ``placement`` to ``job`` (added to whatever the job already holds)."""
        self.reservations.reserve(job, groups, placement)

    def release(self, job: str) -> None:
        """Free everything ``job`` holds; releasing twice is harmless."""
        self.reservations.release(job)

    def reserved(self, job: str) -> dict[str, dict[str, int]]:
        return self.reservations.reserved(job)

    def holdings(self, job: str) -> Mapping[str, Mapping[str, int]]:
        """What ``job`` holds per node, as a live read-only view (no copy)."""
        return self.reservations.holdings(job)

    def usage(self) -> dict[str, dict[str, int]]:
        return self.reservations.usage()

    # ------------------------------------------------------------------ queries
    def fits_ever(self, group: PodGroup) -> bool:
        """Whether one pod fits the allocatable of some node matching selector and taints."""
        sig = self.index.signature(group)
        for cls in [entry[0] for entry in sig.entries] + sig.blocked:
            pairs = cls.pairs(sig.requests)
            if pairs is not None and fit_count(cls.allocatable, pairs, 1):
                return True
        return False

    def room_bound(self, group: PodGroup,
                   freed: Mapping[str, Mapping[str, int]] | None = None) -> int:
        """At least as many pods of ``group`` as ``place`` could put down, ``freed`` added.

        Pods that fit node by node on the group's eligible nodes, ignoring topology and the
        job's other groups: a cheap necessary condition checked before a full placement.
        """
        sig = self.index.signature(group)
        total = 0
        for cls, pairs, _ in sig.flat:
            total += cls.room(pairs)
        for name, extra in (freed or {}).items():
            total += self.room_gain(sig, name, extra)
        return total

    def fits_as_placed(self, groups: Sequence[PodGroup], placement: Placement,
                       topology: TopologyConstraint | None) -> bool:
        """Whether ``placement`` (found earlier) could be reserved as it stands now: every
        node still takes the groups (labels, taints, health, cordon) and has room for all
        the pods it was given, and a required topology still holds one domain."""
        topology = self._within_one_plane(topology)
        need: dict[str, dict[int, int]] = {}
        for group, names in zip(groups, placement.nodes, strict=True):
            flat = self.index.signature(group).flat_index()
            for name, pods in Counter(names).items():
                if name not in self.index.class_of:
                    return False
                entry = self.index.entry_of(name, flat)
                if entry is None:
                    return False
                mine = need.setdefault(name, {})
                for i, amount in entry[1]:
                    mine[i] = mine.get(i, 0) + amount * pods
        for name, amounts in need.items():
            free = self.index.free[name]
            if any(free[i] < amount for i, amount in amounts.items()):
                return False
        if topology is not None and topology.required:
            key = topology.required
            nodes = self.index.nodes
            domains = {nodes[name].labels.get(key, NO_DOMAIN) for name in need}
            if len(domains) > 1 or NO_DOMAIN in domains:
                return False
            if key != PLANE_LABEL and self.index.multi_plane and len(
                    {nodes[name].labels.get(PLANE_LABEL) for name in need}) > 1:
                return False
        return True

    def signature(self, group: PodGroup) -> Signature:
        """What every group of the same shape shares (for repeated ``room_gain`` calls)."""
        return self.index.signature(group)

    def room_gain(self, sig: Signature, name: str, extra: Mapping[str, int]) -> int:
        """How many more pods of a group with signature ``sig`` fit on node ``name`` with
        ``extra`` freed there (0 on a node the group cannot use)."""
        home = self.index.class_of.get(name)
        if home is None:
            return 0
        entry = self.index.entry_of(name, sig.flat_index())
        if entry is None:
            return 0
        free = self.index.free[name]
        more = list(free)
        for resource, amount in extra.items():
            i = home.index.get(resource)
            if i is not None:
                more[i] += amount
        pairs = entry[1]
        return fit_count(tuple(more), pairs, 1 << 30) - fit_count(free, pairs, 1 << 30)

    def place(
        self,
        groups: Sequence[PodGroup],
        topology: TopologyConstraint | None = None,
        *,
        freed: Mapping[str, Mapping[str, int]] | None = None,
    ) -> Placement | PlacementFailure:
        """Where the groups would go now, all or nothing; reserves nothing.

        ``freed`` adds capacity to nodes for this call only ("if these victims were gone").
        """
        if not groups:
            return Placement((), ())
        topology = self._within_one_plane(topology)
        if freed:
            return self._place(groups, topology, freed)
        version = self.log.version
        if self._failed_version != version:
            self._failed.clear()
            self._failed_version = version
        key = (tuple(g if not g.tolerations else group_key(g) for g in groups),
               topology.required if topology is not None else None,
               topology.preferred if topology is not None else None)
        known = self._failed.get(key)
        if known is not None:
            return known
        result = self._place(groups, topology, None)
        if isinstance(result, PlacementFailure):
            self._failed[key] = result
        return result

    def _within_one_plane(self, topology: TopologyConstraint | None
                          ) -> TopologyConstraint | None:
        """With nodes of two or more compute planes a gang never spans two: the plane is a
        required topology level of every gang. A gang's own required level stays (its
        values are named per plane, e.g. racks by cluster); a preferred one gives way to
        the plane. One plane: unchanged."""
        if not self.index.multi_plane or (topology is not None and topology.required):
            return topology
        return _ONE_PLANE

    def _place(self, groups: Sequence[PodGroup], topology: TopologyConstraint | None,
               freed: Mapping[str, Mapping[str, int]] | None) -> Placement | PlacementFailure:
        sigs = [self.index.signature(g) for g in groups]
        overlay = self.index.freed_overlay(freed)
        # The group packed first fails exactly when its room, node by node, is short of its
        # minimum (identical pods pack greedily without loss); every topology then ends in
        # the same explanation, so the walk is skipped.
        first = min(range(len(groups)), key=lambda i: (-sigs[i].first_request, i))
        if self.explain.room(sigs[first].flat, overlay)[1] < groups[first].min_count:
            return self.explain.no_fit(groups, sigs, first, overlay)
        if topology is not None and topology.required:
            return self._place_required(groups, sigs, topology.required, overlay)
        if topology is not None and topology.preferred:
            return self._place_preferred(groups, sigs, topology.preferred, overlay)
        nodes, failed = self._assign(groups, sigs, [[s.flat] for s in sigs], overlay)
        if failed is not None:
            return self.explain.no_fit(groups, sigs, failed, overlay)
        return _placement(nodes)

    # ------------------------------------------------------------------ topology
    def _place_required(self, groups: Sequence[PodGroup], sigs: list[Signature], key: str,
                        overlay: Overlay) -> Placement | PlacementFailure:
        wanted = sum(g.count for g in groups)
        best: list[list[str]] | None = None
        best_pods = -1
        # Values with freed nodes come first, ranked by their room without them: always tried.
        freed = self.domains.freed(overlay, key)
        # A level other than the plane may repeat its values across clusters (two clusters
        # in one zone): each value is tried plane by plane, so a gang never spans two.
        split = key != PLANE_LABEL and self.index.multi_plane
        for domain, room in self.domains.rank(groups, sigs, key, overlay, freed, prune=True):
            if room <= best_pods and domain not in freed:
                break  # the rest are roomier-first partial candidates that cannot do better
            within = [s.domains(key).get(domain, []) for s in sigs]
            for scope in (_by_plane(within) if split else (within,)):
                nodes, failed = self._assign(groups, sigs, [[e] for e in scope], overlay)
                if failed is None:
                    pods = sum(len(n) for n in nodes)
                    if pods == wanted:
                        return _placement(nodes)
                    if pods > best_pods:
                        best, best_pods = nodes, pods
        if best is not None:
            return _placement(best)
        anywhere, failed = self._assign(groups, sigs, [[s.flat] for s in sigs], overlay)
        if failed is not None:
            return self.explain.no_fit(groups, sigs, failed, overlay)
        return self.explain.topology(groups, sigs, key, overlay, anywhere)

    def _place_preferred(self, groups: Sequence[PodGroup], sigs: list[Signature], key: str,
                         overlay: Overlay) -> Placement | PlacementFailure:
        wanted = sum(g.count for g in groups)
        # Values with freed nodes rank first by the room they have without them, which
        # says nothing of the room they have with them: they are always tried.
        freed = self.domains.freed(overlay, key)
        ranked = self.domains.rank(groups, sigs, key, overlay, freed, prune=False)
        for domain, room in ranked:
            if room < wanted and domain not in freed:
                break
            scopes = [[s.domains(key).get(domain, [])] for s in sigs]
            nodes, failed = self._assign(groups, sigs, scopes, overlay)
            if failed is None and sum(len(n) for n in nodes) == wanted:
                return _placement(nodes)
        # No single domain holds it all: spill over the roomiest domains first so the job
        # spans as few as possible, then nodes without the label.
        order = [d for d, room in ranked if room or d in freed] + [NO_DOMAIN]
        scopes = [[s.domains(key).get(d, []) for d in order] for s in sigs]
        nodes, failed = self._assign(groups, sigs, scopes, overlay)
        if failed is not None:
            return self.explain.no_fit(groups, sigs, failed, overlay)
        return _placement(nodes)

    # ------------------------------------------------------------------ the packing itself
    def _assign(self, groups: Sequence[PodGroup], sigs: list[Signature],
                scopes: list[list[list[Entry]]], overlay: Overlay
                ) -> tuple[list[list[str]], int | None]:
        """Place every group's minimum, then top each group up; (nodes, failing group)."""
        work = dict(overlay)
        nodes: list[list[str]] = [[] for _ in groups]
        # Big pods first: small ones fill the gaps the big ones leave.
        order = sorted(range(len(groups)), key=lambda i: (-sigs[i].first_request, i))
        for i in order:
            need = groups[i].min_count
            if need and self._fill_scopes(sigs[i], scopes[i], work, need, nodes[i]) < need:
                return nodes, i
        for i in order:
            extra = groups[i].count - groups[i].min_count
            if extra:
                self._fill_scopes(sigs[i], scopes[i], work, extra, nodes[i])
        return nodes, None

    def _fill_scopes(self, sig: Signature, scopes: list[list[Entry]], work: Overlay,
                     need: int, out: list[str]) -> int:
        placed = 0
        for entries in scopes:
            placed += fill(sig, entries, work, need - placed, out, self.index.entry_of)
            if placed >= need:
                break
        return placed

_ONE_PLANE = TopologyConstraint(required=PLANE_LABEL)


def _by_plane(scope: list[list[Entry]]) -> list[list[list[Entry]]]:
    """``scope`` (entries per group) cut into one scope per compute plane."""
    planes = sorted({e[0].labels.get(PLANE_LABEL, "") for entries in scope for e in entries})
    if len(planes) < 2:
        return [scope]
    return [[[e for e in entries if e[0].labels.get(PLANE_LABEL, "") == plane]
             for entries in scope] for plane in planes]


def _placement(nodes: list[list[str]]) -> Placement:
    return Placement(tuple(len(n) for n in nodes), tuple(tuple(n) for n in nodes))
