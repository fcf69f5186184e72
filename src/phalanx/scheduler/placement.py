"""Node placement of gangs: which concrete nodes a job's pods go to, all or nothing.

``NodePool`` tracks nodes and the resources jobs reserve on them. ``place``
answers "where would these pod groups go right now?" without changing
anything; the scheduler then calls ``reserve`` for the jobs it admits.

Placement packs: a pod goes to the eligible node with the least free capacity
of the scarcest requested resource (GPUs first), so whole nodes stay free for
large gangs. Nodes are indexed by equivalence class and free capacity (see
``node_classes``; the walk itself is in ``packing``), which keeps a call
proportional to classes plus pods rather than to nodes.
"""

from __future__ import annotations

from bisect import bisect_left, insort
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

from phalanx.scheduler.node_classes import (
    POD_MILLIS,
    PODS,
    ClassKey,
    FreeVector,
    NodeClass,
    Status,
    class_key,
    fit_count,
    resource_order,
)
from phalanx.scheduler.packing import NO_DOMAIN, Entry, Overlay, Signature, fill
from phalanx.scheduler.types import PendingCode
from phalanx.spec.quantity import format_amount
from phalanx.spec.resources import Node, Toleration, TopologyConstraint

# Version changes remembered for bringing per-version tables up to date, and the most
# worth replaying: beyond that, rebuilding a table costs less than walking the changes.
LOG_KEPT = 4096
REPLAY_LIMIT = 256


@dataclass(frozen=True, slots=True)
class PodGroup:
    """One pod set after flavor assignment."""

    name: str
    count: int  # replicas wanted
    min_count: int  # minReplicas (== count when the pod set has none)
    requests: tuple[tuple[str, int], ...]  # per-pod resource -> milli-units (zeros omitted)
    node_selector: tuple[tuple[str, str], ...] = ()  # pod set selector + flavors' nodeLabels
    tolerations: tuple[Toleration, ...] = ()  # pod set tolerations + flavors' tolerations

    def __post_init__(self) -> None:
        if not 0 <= self.min_count <= self.count:
            raise ValueError(
                f"pod group {self.name}: min_count {self.min_count} must be between 0 and "
                f"count {self.count}"
            )


@dataclass(frozen=True, slots=True)
class Placement:
    counts: tuple[int, ...]  # pods placed per group (min_count <= n <= count)
    nodes: tuple[tuple[str, ...], ...]  # per group, one node name per placed pod


@dataclass(frozen=True, slots=True)
class PlacementFailure:
    code: PendingCode  # NO_NODE_FITS or TOPOLOGY_UNSATISFIABLE
    message: str  # one human sentence with numbers, shown as the job's pending reason


def _toleration_key(tolerations: tuple[Toleration, ...]) -> tuple[tuple[object, ...], ...]:
    return tuple((t.key, t.operator, t.value, t.effect) for t in tolerations)


def _group_key(g: PodGroup) -> tuple[object, ...]:
    """A hashable stand-in for a group with tolerations (which do not hash)."""
    return (g.name, g.count, g.min_count, g.requests, g.node_selector,
            _toleration_key(g.tolerations))


class NodePool:
    """Nodes, what jobs have reserved on them, and where new gangs would fit."""

    def __init__(self, nodes: Iterable[Node] = ()) -> None:
        self._nodes: dict[str, Node] = {}
        self._class_of: dict[str, NodeClass] = {}
        self._shape_of: dict[str, NodeClass] = {}
        self._free: dict[str, FreeVector] = {}
        self._classes: dict[ClassKey, NodeClass] = {}
        # Shapes: classes with their labels dropped, so one bucket index spans every rack.
        self._shapes: dict[ClassKey, NodeClass] = {}
        self._shape_members: dict[ClassKey, set[ClassKey]] = {}
        # Reservations outlive their node: a removed node's pods are still the job's.
        self._used: dict[str, dict[str, int]] = {}
        self._jobs: dict[str, dict[str, dict[str, int]]] = {}
        self._signatures: dict[tuple[object, ...], Signature] = {}
        self._version = 0  # bumped whenever free capacity or the node set changes
        # The node each recent version changed ("" for a change of the node set): tables
        # kept per version are brought up to date from it instead of rebuilt.
        # ``_log[i]`` is the change that made version ``_log_base + i + 1``.
        self._log: list[str] = []
        self._log_base = 0
        # Gangs that did not fit at ``_failed_version``: a cycle asks again for the same gang
        # from other queues while nothing was reserved or released in between.
        self._failed: dict[tuple[object, ...], PlacementFailure] = {}
        self._failed_version = -1
        self._members = 0  # bumped whenever the node set or a node's class changes
        for node in nodes:
            self.upsert(node)

    # ------------------------------------------------------------------ nodes
    def _bump(self, node: str) -> None:
        self._version += 1
        log = self._log
        log.append(node)
        if len(log) > 2 * LOG_KEPT:
            del log[:LOG_KEPT]
            self._log_base += LOG_KEPT

    def _changed_since(self, version: int) -> set[str] | None:
        """The nodes whose free capacity changed after ``version``; None when the node set
        changed too, or the changes are too many (or too old) to be worth replaying."""
        start = version - self._log_base
        if start < 0 or self._version - version > REPLAY_LIMIT:
            return None
        changed = set(self._log[start:])
        return None if "" in changed else changed

    def upsert(self, node: Node) -> None:
        """Add or change a node; reservations already on it stay."""
        self._bump("")
        self._members += 1
        if node.name in self._nodes:
            self._detach(node.name)
        key, shape_key = class_key(node), class_key(node, labels=False)
        cls = self._classes.get(key)
        if cls is None:
            cls = self._classes[key] = NodeClass(key, node)
            self._signatures.clear()
        shape = self._shapes.get(shape_key)
        if shape is None:
            shape = self._shapes[shape_key] = NodeClass(shape_key, node)
        self._shape_members.setdefault(shape_key, set()).add(key)
        free = cls.free_of(self._used.get(node.name))
        cls.add(node.name, free)
        shape.add(node.name, free)
        self._nodes[node.name] = node
        self._class_of[node.name] = cls
        self._shape_of[node.name] = shape
        self._free[node.name] = free

    def remove(self, name: str) -> None:
        """Forget a node; reservations on it stay accounted to their jobs until released."""
        if name in self._nodes:
            self._bump("")
            self._members += 1
            self._detach(name)

    def _detach(self, name: str) -> None:
        cls, shape = self._class_of.pop(name), self._shape_of.pop(name)
        free = self._free.pop(name)
        cls.discard(name, free)
        shape.discard(name, free)
        del self._nodes[name]
        if not cls.size:
            del self._classes[cls.key]
            self._shape_members[shape.key].discard(cls.key)
            self._signatures.clear()
        if not shape.size:
            del self._shapes[shape.key]
            del self._shape_members[shape.key]

    def nodes(self) -> list[Node]:
        return [self._nodes[name] for name in sorted(self._nodes)]

    # ------------------------------------------------------------------ reservations
    def reserve(self, job: str, groups: Sequence[PodGroup], placement: Placement) -> None:
        """Charge ``placement`` to ``job`` (added to whatever the job already holds)."""
        if len(placement.nodes) != len(groups):
            raise ValueError(
                f"placement has {len(placement.nodes)} pod groups but {len(groups)} were given"
            )
        held = self._jobs.setdefault(job, {})
        for group, names in zip(groups, placement.nodes, strict=True):
            per_pod = {r: a for r, a in group.requests if a}
            per_pod[PODS] = POD_MILLIS
            for name, pods in Counter(names).items():
                delta = {r: a * pods for r, a in per_pod.items()}
                mine = held.setdefault(name, {})
                for resource, amount in delta.items():
                    mine[resource] = mine.get(resource, 0) + amount
                self._charge(name, delta, 1)

    def release(self, job: str) -> None:
        """Free everything ``job`` holds; releasing twice is harmless."""
        for name, delta in self._jobs.pop(job, {}).items():
            self._charge(name, delta, -1)

    def reserved(self, job: str) -> dict[str, dict[str, int]]:
        return {name: dict(res) for name, res in self._jobs.get(job, {}).items()}

    def holdings(self, job: str) -> Mapping[str, Mapping[str, int]]:
        """What ``job`` holds per node, as a live read-only view (no copy)."""
        return self._jobs.get(job, {})

    def usage(self) -> dict[str, dict[str, int]]:
        return {name: dict(res) for name, res in self._used.items() if res}

    def _charge(self, name: str, delta: Mapping[str, int], sign: int) -> None:
        self._bump(name)
        used = self._used.setdefault(name, {})
        for resource, amount in delta.items():
            left = used.get(resource, 0) + sign * amount
            if left:
                used[resource] = left
            else:
                used.pop(resource, None)
        if not used:
            del self._used[name]
        cls = self._class_of.get(name)
        if cls is not None:
            shape, old = self._shape_of[name], self._free[name]
            free = cls.free_of(used)
            cls.discard(name, old)
            cls.add(name, free)
            shape.discard(name, old)
            shape.add(name, free)
            self._free[name] = free

    # ------------------------------------------------------------------ queries
    def fits_ever(self, group: PodGroup) -> bool:
        """Whether one pod fits the allocatable of some node matching selector and taints."""
        sig = self._signature(group)
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
        sig = self._signature(group)
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
        need: dict[str, dict[int, int]] = {}
        for group, names in zip(groups, placement.nodes, strict=True):
            flat = self._signature(group).flat_index()
            for name, pods in Counter(names).items():
                if name not in self._class_of:
                    return False
                entry = self._entry_of(name, flat)
                if entry is None:
                    return False
                mine = need.setdefault(name, {})
                for i, amount in entry[1]:
                    mine[i] = mine.get(i, 0) + amount * pods
        for name, amounts in need.items():
            free = self._free[name]
            if any(free[i] < amount for i, amount in amounts.items()):
                return False
        if topology is not None and topology.required:
            key = topology.required
            domains = {self._nodes[name].labels.get(key, NO_DOMAIN) for name in need}
            if len(domains) > 1 or NO_DOMAIN in domains:
                return False
        return True

    def signature(self, group: PodGroup) -> Signature:
        """What every group of the same shape shares (for repeated ``room_gain`` calls)."""
        return self._signature(group)

    def room_gain(self, sig: Signature, name: str, extra: Mapping[str, int]) -> int:
        """How many more pods of a group with signature ``sig`` fit on node ``name`` with
        ``extra`` freed there (0 on a node the group cannot use)."""
        home = self._class_of.get(name)
        if home is None:
            return 0
        entry = self._entry_of(name, sig.flat_index())
        if entry is None:
            return 0
        free = self._free[name]
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
        if freed:
            return self._place(groups, topology, freed)
        if self._failed_version != self._version:
            self._failed.clear()
            self._failed_version = self._version
        key = (tuple(g if not g.tolerations else _group_key(g) for g in groups),
               topology.required if topology is not None else None,
               topology.preferred if topology is not None else None)
        known = self._failed.get(key)
        if known is not None:
            return known
        result = self._place(groups, topology, None)
        if isinstance(result, PlacementFailure):
            self._failed[key] = result
        return result

    def _place(self, groups: Sequence[PodGroup], topology: TopologyConstraint | None,
               freed: Mapping[str, Mapping[str, int]] | None) -> Placement | PlacementFailure:
        sigs = [self._signature(g) for g in groups]
        overlay = self._freed_overlay(freed)
        # The group packed first fails exactly when its room, node by node, is short of its
        # minimum (identical pods pack greedily without loss); every topology then ends in
        # the same explanation, so the walk is skipped.
        first = min(range(len(groups)), key=lambda i: (-sigs[i].first_request, i))
        if self._room(sigs[first].flat, overlay)[1] < groups[first].min_count:
            return self._no_fit(groups, sigs, first, overlay)
        if topology is not None and topology.required:
            return self._place_required(groups, sigs, topology.required, overlay)
        if topology is not None and topology.preferred:
            return self._place_preferred(groups, sigs, topology.preferred, overlay)
        nodes, failed = self._assign(groups, sigs, [[s.flat] for s in sigs], overlay)
        if failed is not None:
            return self._no_fit(groups, sigs, failed, overlay)
        return _placement(nodes)

    # ------------------------------------------------------------------ topology
    def _place_required(self, groups: Sequence[PodGroup], sigs: list[Signature], key: str,
                        overlay: Overlay) -> Placement | PlacementFailure:
        wanted = sum(g.count for g in groups)
        best: list[list[str]] | None = None
        best_pods = -1
        # Values with freed nodes come first, ranked by their room without them: always tried.
        freed = self._freed_domains(overlay, key)
        for domain, room in self._domains(groups, sigs, key, overlay, freed, prune=True):
            if room <= best_pods and domain not in freed:
                break  # the rest are roomier-first partial candidates that cannot do better
            scopes = [[s.domains(key).get(domain, [])] for s in sigs]
            nodes, failed = self._assign(groups, sigs, scopes, overlay)
            if failed is None:
                pods = sum(len(n) for n in nodes)
                if pods == wanted:
                    return _placement(nodes)
                if pods > best_pods:
                    best, best_pods = nodes, pods
        if best is not None:
            return _placement(best)
        return self._topology_failure(groups, sigs, key, overlay)

    def _place_preferred(self, groups: Sequence[PodGroup], sigs: list[Signature], key: str,
                         overlay: Overlay) -> Placement | PlacementFailure:
        wanted = sum(g.count for g in groups)
        # Values with freed nodes rank first by the room they have without them, which
        # says nothing of the room they have with them: they are always tried.
        freed = self._freed_domains(overlay, key)
        ranked = self._domains(groups, sigs, key, overlay, freed, prune=False)
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
            return self._no_fit(groups, sigs, failed, overlay)
        return _placement(nodes)

    def _freed_domains(self, overlay: Overlay, key: str) -> set[str]:
        """The values of label ``key`` on the nodes with freed capacity."""
        return {self._class_of[name].labels.get(key, NO_DOMAIN) for name in overlay}

    def _domains(self, groups: Sequence[PodGroup], sigs: list[Signature], key: str,
                 overlay: Overlay, freed: set[str], *, prune: bool) -> list[tuple[str, int]]:
        """(label value, room in pods) for values every group can use, in the order to try:
        those with room for the whole job, tightest first (packing domains like nodes),
        then the rest, roomiest first. ``prune`` drops values without room for every
        group's minimum (a value holding freed capacity is always kept)."""
        if len(sigs) == 1:
            if not overlay:
                return self._domains_one_group(groups[0], sigs[0], key, prune=prune)
            return self._domains_one_group_freed(groups[0], sigs[0], key, freed, prune=prune)
        return self._domains_general(groups, sigs, key, freed, prune=prune)

    def _domains_general(self, groups: Sequence[PodGroup], sigs: list[Signature], key: str,
                         freed: set[str], *, prune: bool) -> list[tuple[str, int]]:
        rooms = [self._domain_rooms(s, key)[0] for s in sigs]
        common = set(rooms[0]).intersection(*rooms[1:])
        ranked: list[tuple[tuple[int, int, str], str, int]] = []
        for domain in common:
            full, total, short = True, 0, False
            for group, room in zip(groups, rooms, strict=True):
                have = room[domain]
                total += min(have, group.count)
                full = full and have >= group.count
                short = short or have < group.min_count
            if domain in freed:
                full, short = True, False
            if prune and short:
                continue
            ranked.append(((0, total, domain) if full else (1, -total, domain), domain, total))
        ranked.sort()
        return [(domain, total) for _, domain, total in ranked]

    def _domains_one_group(self, group: PodGroup, sig: Signature, key: str, *,
                           prune: bool) -> list[tuple[str, int]]:
        """``_domains`` for the common case, by bisecting the room-sorted domains."""
        _, order = self._domain_rooms(sig, key)
        cut = bisect_left(order, (group.count, ""))
        full = [(d, group.count) for _, d in order[cut:]]
        low = bisect_left(order, (group.min_count, "")) if prune else 0
        partial = sorted(order[low:cut], key=lambda rd: (-rd[0], rd[1]))
        return full + [(d, room) for room, d in partial]

    def _domains_one_group_freed(self, group: PodGroup, sig: Signature, key: str,
                                 freed: set[str], *, prune: bool) -> list[tuple[str, int]]:
        """``_domains_general`` for one group with capacity freed on a few nodes (what each
        step of a preemption search asks): the order of the values nothing was freed in is
        kept for the pool's version, and only the few values with freed nodes move."""
        rooms, order = self._domain_rooms(sig, key)
        lists_key = (key, group.count, group.min_count, prune)
        cached = sig.domain_lists.get(lists_key)
        if cached is None or cached[0] != self._version:
            cut = bisect_left(order, (group.count, ""))
            full = sorted((d, group.count) for _, d in order[cut:])  # whole-group ties: by name
            low = bisect_left(order, (group.min_count, "")) if prune else 0
            partial = [(d, room) for room, d in sorted(order[low:cut],
                                                       key=lambda rd: (-rd[0], rd[1]))]
            cached = sig.domain_lists[lists_key] = (self._version, full, partial)
        _, full, partial = cached
        # A value with freed nodes counts as having room for the whole group, ranked by the
        # room it has without them (nodes without the label have no entry in ``rooms``).
        short = sorted((rooms[d], d) for d in freed if d in rooms and rooms[d] < group.count)
        out = [(d, room) for room, d in short]
        out.extend(full)
        if short:
            moved = {d for _, d in short}
            out.extend(entry for entry in partial if entry[0] not in moved)
        else:
            out.extend(partial)
        return out

    def _domain_rooms(self, sig: Signature, key: str
                      ) -> tuple[dict[str, int], list[tuple[int, str]]]:
        """Pods of ``sig`` that fit node by node in each value of label ``key``, as a table
        and sorted by room."""
        cached = sig.domain_room.get(key)
        if cached is not None:
            version, rooms, order = cached
            if version == self._version:
                return rooms, order
            changed = self._changed_since(version)
            if changed is not None:
                self._update_domain_rooms(sig, key, changed, rooms, order)
                sig.domain_room[key] = (self._version, rooms, order)
                return rooms, order
        rooms = {}
        for domain, entries in sig.domains(key).items():
            if domain == NO_DOMAIN:
                continue
            total = 0
            for cls, pairs, _ in entries:
                total += cls.room(pairs)
            rooms[domain] = total
        order = sorted((room, domain) for domain, room in rooms.items())
        sig.domain_room[key] = (self._version, rooms, order)
        return rooms, order

    def _update_domain_rooms(self, sig: Signature, key: str, changed: set[str],
                             rooms: dict[str, int], order: list[tuple[int, str]]) -> None:
        """Bring ``_domain_rooms``'s table and order up to date for the values of the
        ``changed`` nodes alone (in place: nobody keeps them across a change)."""
        by_domain = sig.domains(key)
        for domain in {self._class_of[name].labels.get(key, NO_DOMAIN) for name in changed
                       if name in self._class_of}:
            old = rooms.get(domain)
            if old is None:
                continue  # not a value this signature can use
            total = 0
            for cls, pairs, _ in by_domain[domain]:
                total += cls.room(pairs)
            if total != old:
                rooms[domain] = total
                del order[bisect_left(order, (old, domain))]
                insort(order, (total, domain))

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
            placed += fill(sig, entries, work, need - placed, out, self._entry_of)
            if placed >= need:
                break
        return placed

    # ------------------------------------------------------------------ indexes
    def _entry_of(self, name: str, by_class: dict[int, Entry]) -> Entry | None:
        """The entry (class or whole shape) that holds node ``name``, if any."""
        entry = by_class.get(id(self._class_of[name]))
        return entry if entry is not None else by_class.get(id(self._shape_of[name]))

    def _signature(self, group: PodGroup) -> Signature:
        key = (group.requests, group.node_selector, _toleration_key(group.tolerations))
        sig = self._signatures.get(key)
        if sig is not None:
            return sig
        requests = tuple(sorted(((r, a) for r, a in group.requests if a > 0),
                                key=lambda ra: resource_order(ra[0])))
        ranked = [r for r, _ in requests]
        entries: list[Entry] = []
        blocked: list[NodeClass] = []
        lacking: list[NodeClass] = []
        untolerated: list[NodeClass] = []
        for ckey in sorted(self._classes):
            cls = self._classes[ckey]
            labelled, tolerated = cls.matches(group.node_selector, group.tolerations)
            if not labelled:
                continue
            if not tolerated:
                untolerated.append(cls)
            elif not cls.usable:
                blocked.append(cls)
            else:
                pairs = cls.pairs(requests)
                if pairs is None:
                    lacking.append(cls)
                else:
                    entries.append((cls, pairs, tuple(cls.index[r] for r in ranked)))
        sig = Signature(requests, requests[0][1] if requests else 0, entries,
                         self._flatten(entries, ranked), blocked, lacking, untolerated)
        if len(self._signatures) > 4096:  # bounded: distinct pod shapes are few in practice
            self._signatures.clear()
        self._signatures[key] = sig
        return sig

    def _flatten(self, entries: list[Entry], ranked: list[str]) -> list[Entry]:
        """Replace classes by their shape wherever the whole shape is among ``entries``."""
        chosen: dict[ClassKey, list[Entry]] = {}
        for entry in entries:
            chosen.setdefault(((), *entry[0].key[1:]), []).append(entry)
        flat: list[Entry] = []
        for shape_key in sorted(chosen):
            members = chosen[shape_key]
            if len(members) > 1 and len(members) == len(self._shape_members[shape_key]):
                shape = self._shapes[shape_key]
                pairs = members[0][1]  # identical: the shape's classes share allocatable
                flat.append((shape, pairs, tuple(shape.index[r] for r in ranked)))
            else:
                flat.extend(members)
        return flat

    def _freed_overlay(self, freed: Mapping[str, Mapping[str, int]] | None) -> Overlay:
        overlay: Overlay = {}
        for name, extra in (freed or {}).items():
            cls = self._class_of.get(name)
            if cls is None:
                continue
            free = list(self._free[name])
            for resource, amount in extra.items():
                i = cls.index.get(resource)
                if i is not None:
                    free[i] += amount
            overlay[name] = tuple(free)
        return overlay

    # ------------------------------------------------------------------ explaining failures
    def _room(self, entries: list[Entry], overlay: Overlay) -> tuple[int, int]:
        """(nodes with room for one more pod, pods that fit node by node)."""
        nodes = pods = 0
        for cls, pairs, _ in entries:
            room_pods, room_nodes = cls.room_nodes(pairs)
            pods += room_pods
            nodes += room_nodes
        by_class = {id(e[0]): e for e in entries}
        for name, free in overlay.items():
            found = self._entry_of(name, by_class)
            if found is not None:
                before = fit_count(self._free[name], found[1], 1 << 30)
                after = fit_count(free, found[1], 1 << 30)
                nodes += (after > 0) - (before > 0)
                pods += after - before
        return nodes, pods

    def _no_fit(self, groups: Sequence[PodGroup], sigs: list[Signature], failed: int,
                overlay: Overlay) -> PlacementFailure:
        group, sig = groups[failed], sigs[failed]
        text = _needs(group, sig, len(groups) > 1)
        if sig.sizes is None or sig.sizes[0] != self._members:
            sig.sizes = (self._members, (
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
                text += f"; none of the {len(self._nodes)} nodes has those labels"
            else:
                text += "; the cluster has no nodes"
            return PlacementFailure(PendingCode.NO_NODE_FITS, text)
        room_nodes, room_pods = self._room(sig.flat, overlay)
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
        return PlacementFailure(PendingCode.NO_NODE_FITS, text)

    def _topology_failure(self, groups: Sequence[PodGroup], sigs: list[Signature], key: str,
                          overlay: Overlay) -> PlacementFailure:
        anywhere, failed = self._assign(groups, sigs, [[s.flat] for s in sigs], overlay)
        if failed is not None:
            return self._no_fit(groups, sigs, failed, overlay)
        wanted = sum(g.min_count for g in groups)
        pods = ", ".join(
            _needs(g, s, False)[len("needs "):] for g, s in zip(groups, sigs, strict=True)
        )
        text = f"needs {pods} within one {key} (required topology)"
        ranked = self._domains(groups, sigs, key, overlay, self._freed_domains(overlay, key),
                               prune=False)
        if not ranked:
            text += f", but no matching node has the label {key}"
        else:
            best, room = min(ranked, key=lambda dr: (-dr[1], dr[0]))
            text += (f"; the roomiest {key}, {best}, has room for {room} of the "
                     f"{wanted} pods, while the cluster as a whole fits "
                     f"{sum(len(n) for n in anywhere)}")
        return PlacementFailure(PendingCode.TOPOLOGY_UNSATISFIABLE, text)


def _placement(nodes: list[list[str]]) -> Placement:
    return Placement(tuple(len(n) for n in nodes), tuple(tuple(n) for n in nodes))


def _needs(group: PodGroup, sig: Signature, name_it: bool) -> str:
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
