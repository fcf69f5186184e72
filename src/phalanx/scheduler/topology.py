"""Topology: ranking the values of a node label (racks, blocks) for a gang to go into.

A required topology puts the whole gang within one value of the label; a preferred
one tries values one at a time and then spills over the roomiest. Values are ranked
by the pods of each group that fit there node by node, a table kept per signature and
label and brought up to date from the change log (``change_log``) rather than rebuilt.
"""

from __future__ import annotations

from bisect import bisect_left, insort
from collections.abc import Sequence

from phalanx.scheduler.change_log import ChangeLog
from phalanx.scheduler.node_index import NodeIndex
from phalanx.scheduler.packing import NO_DOMAIN, Overlay, Signature
from phalanx.scheduler.pod_groups import PodGroup


class TopologyDomains:
    def __init__(self, index: NodeIndex) -> None:
        self.index = index
        self.log: ChangeLog = index.log

    def freed(self, overlay: Overlay, key: str) -> set[str]:
        """The values of label ``key`` on the nodes with freed capacity."""
        return {self.index.class_of[name].labels.get(key, NO_DOMAIN) for name in overlay}

    def rank(self, groups: Sequence[PodGroup], sigs: list[Signature], key: str,
                 overlay: Overlay, freed: set[str], *, prune: bool) -> list[tuple[str, int]]:
        """(label value, room in pods) for values every group can use, in the order to try:
        those with room for the whole job, tightest first (packing domains like nodes),
        then the rest, roomiest first. ``prune`` drops values without room for every
        group's minimum (a value holding freed capacity is always kept)."""
        if len(sigs) == 1:
            if not overlay:
                return self._one_group(groups[0], sigs[0], key, prune=prune)
            return self._one_group_freed(groups[0], sigs[0], key, freed, prune=prune)
        return self.general(groups, sigs, key, freed, prune=prune)

    def general(self, groups: Sequence[PodGroup], sigs: list[Signature], key: str,
                         freed: set[str], *, prune: bool) -> list[tuple[str, int]]:
        rooms = [self.rooms(s, key)[0] for s in sigs]
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

    def _one_group(self, group: PodGroup, sig: Signature, key: str, *,
                           prune: bool) -> list[tuple[str, int]]:
        """``rank`` for the common case, by bisecting the room-sorted domains."""
        _, order = self.rooms(sig, key)
        cut = bisect_left(order, (group.count, ""))
        full = [(d, group.count) for _, d in order[cut:]]
        low = bisect_left(order, (group.min_count, "")) if prune else 0
        partial = sorted(order[low:cut], key=lambda rd: (-rd[0], rd[1]))
        return full + [(d, room) for room, d in partial]

    def _one_group_freed(self, group: PodGroup, sig: Signature, key: str,
                                 freed: set[str], *, prune: bool) -> list[tuple[str, int]]:
        """``general`` for one group with capacity freed on a few nodes (what each
        step of a preemption search asks): the order of the values nothing was freed in is
        kept for the pool's version, and only the few values with freed nodes move."""
        rooms, order = self.rooms(sig, key)
        lists_key = (key, group.count, group.min_count, prune)
        cached = sig.domain_lists.get(lists_key)
        if cached is None or cached[0] != self.log.version:
            cut = bisect_left(order, (group.count, ""))
            full = sorted((d, group.count) for _, d in order[cut:])  # whole-group ties: by name
            low = bisect_left(order, (group.min_count, "")) if prune else 0
            partial = [(d, room) for room, d in sorted(order[low:cut],
                                                       key=lambda rd: (-rd[0], rd[1]))]
            cached = sig.domain_lists[lists_key] = (self.log.version, full, partial)
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

    def rooms(self, sig: Signature, key: str
                      ) -> tuple[dict[str, int], list[tuple[int, str]]]:
        """Pods of ``sig`` that fit node by node in each value of label ``key``, as a table
        and sorted by room."""
        cached = sig.domain_room.get(key)
        if cached is not None:
            version, rooms, order = cached
            if version == self.log.version:
                return rooms, order
            changed = self.log.changed_since(version)
            if changed is not None:
                self._update_rooms(sig, key, changed, rooms, order)
                sig.domain_room[key] = (self.log.version, rooms, order)
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
        sig.domain_room[key] = (self.log.version, rooms, order)
        return rooms, order

    def _update_rooms(self, sig: Signature, key: str, changed: set[str],
                             rooms: dict[str, int], order: list[tuple[int, str]]) -> None:
        """Bring ``rooms``'s table and order up to date for the values of the
        ``changed`` nodes alone (in place: nobody keeps them across a change)."""
        by_domain = sig.domains(key)
        for domain in {self.index.class_of[name].labels.get(key, NO_DOMAIN) for name in changed
                       if name in self.index.class_of}:
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
