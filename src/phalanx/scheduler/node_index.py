"""The nodes, indexed for placement: each node's equivalence class and shape, its free
capacity, and per pod shape (``Signature``) the classes that can take such pods.

Nodes are indexed by equivalence class and free capacity (see ``node_classes``), which
keeps a placement proportional to classes plus pods rather than to nodes. Shapes are
classes with their labels dropped, so one bucket index spans every rack.
"""

from __future__ import annotations

from collections.abc import Mapping

from phalanx.scheduler.change_log import ChangeLog
from phalanx.scheduler.node_classes import (
    ClassKey,
    FreeVector,
    NodeClass,
    class_key,
    resource_order,
)
from phalanx.scheduler.packing import Entry, Overlay, Signature
from phalanx.scheduler.pod_groups import PodGroup, toleration_key
from phalanx.spec.planes import PLANE_LABEL
from phalanx.spec.resources import Node


class NodeIndex:
    def __init__(self, log: ChangeLog) -> None:
        self.log = log
        self.nodes: dict[str, Node] = {}
        self.class_of: dict[str, NodeClass] = {}
        self.shape_of: dict[str, NodeClass] = {}
        self.free: dict[str, FreeVector] = {}
        self.classes: dict[ClassKey, NodeClass] = {}
        self.shapes: dict[ClassKey, NodeClass] = {}
        self.shape_members: dict[ClassKey, set[ClassKey]] = {}
        self.signatures: dict[tuple[object, ...], Signature] = {}
        self.members = 0  # bumped whenever the node set or a node's class changes
        # Nodes per compute plane (label phalanx.dev/plane): with two or more planes every
        # gang must stay within one (placement.py).
        self.plane_nodes: dict[str, int] = {}

    @property
    def multi_plane(self) -> bool:
        return len(self.plane_nodes) > 1

    # ------------------------------------------------------------------ nodes
    def upsert(self, node: Node, used: dict[str, int] | None) -> None:
        """Add or change a node that has ``used`` reserved on it."""
        self.log.bump("")
        self.members += 1
        if node.name in self.nodes:
            self._detach(node.name)
        key, shape_key = class_key(node), class_key(node, labels=False)
        cls = self.classes.get(key)
        if cls is None:
            cls = self.classes[key] = NodeClass(key, node)
            self.signatures.clear()
        shape = self.shapes.get(shape_key)
        if shape is None:
            shape = self.shapes[shape_key] = NodeClass(shape_key, node)
        self.shape_members.setdefault(shape_key, set()).add(key)
        free = cls.free_of(used)
        cls.add(node.name, free)
        shape.add(node.name, free)
        self.nodes[node.name] = node
        plane = node.labels.get(PLANE_LABEL)
        if plane is not None:
            self.plane_nodes[plane] = self.plane_nodes.get(plane, 0) + 1
        self.class_of[node.name] = cls
        self.shape_of[node.name] = shape
        self.free[node.name] = free

    def remove(self, name: str) -> None:
        if name in self.nodes:
            self.log.bump("")
            self.members += 1
            self._detach(name)

    def _detach(self, name: str) -> None:
        cls, shape = self.class_of.pop(name), self.shape_of.pop(name)
        free = self.free.pop(name)
        cls.discard(name, free)
        shape.discard(name, free)
        plane = self.nodes.pop(name).labels.get(PLANE_LABEL)
        if plane is not None:
            left = self.plane_nodes[plane] - 1
            if left:
                self.plane_nodes[plane] = left
            else:
                del self.plane_nodes[plane]
        if not cls.size:
            del self.classes[cls.key]
            self.shape_members[shape.key].discard(cls.key)
            self.signatures.clear()
        if not shape.size:
            del self.shapes[shape.key]
            del self.shape_members[shape.key]

    def refit(self, name: str, used: dict[str, int]) -> None:
        """Node ``name`` (if known) now has ``used`` reserved on it."""
        cls = self.class_of.get(name)
        if cls is not None:
            shape, old = self.shape_of[name], self.free[name]
            free = cls.free_of(used)
            cls.discard(name, old)
            cls.add(name, free)
            shape.discard(name, old)
            shape.add(name, free)
            self.free[name] = free

    # ------------------------------------------------------------------ look-ups
    def entry_of(self, name: str, by_class: dict[int, Entry]) -> Entry | None:
        """The entry (class or whole shape) that holds node ``name``, if any."""
        entry = by_class.get(id(self.class_of[name]))
        return entry if entry is not None else by_class.get(id(self.shape_of[name]))

    def signature(self, group: PodGroup) -> Signature:
        """What every group of the same pod shape shares: the classes it can use."""
        key = (group.requests, group.node_selector, toleration_key(group.tolerations))
        sig = self.signatures.get(key)
        if sig is not None:
            return sig
        requests = tuple(sorted(((r, a) for r, a in group.requests if a > 0),
                                key=lambda ra: resource_order(ra[0])))
        ranked = [r for r, _ in requests]
        entries: list[Entry] = []
        blocked: list[NodeClass] = []
        lacking: list[NodeClass] = []
        untolerated: list[NodeClass] = []
        for ckey in sorted(self.classes):
            cls = self.classes[ckey]
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
        if len(self.signatures) > 4096:  # bounded: distinct pod shapes are few in practice
            self.signatures.clear()
        self.signatures[key] = sig
        return sig

    def _flatten(self, entries: list[Entry], ranked: list[str]) -> list[Entry]:
        """Replace classes by their shape wherever the whole shape is among ``entries``."""
        chosen: dict[ClassKey, list[Entry]] = {}
        for entry in entries:
            chosen.setdefault(((), *entry[0].key[1:]), []).append(entry)
        flat: list[Entry] = []
        for shape_key in sorted(chosen):
            members = chosen[shape_key]
            if len(members) > 1 and len(members) == len(self.shape_members[shape_key]):
                shape = self.shapes[shape_key]
                pairs = members[0][1]  # identical: the shape's classes share allocatable
                flat.append((shape, pairs, tuple(shape.index[r] for r in ranked)))
            else:
                flat.extend(members)
        return flat

    def freed_overlay(self, freed: Mapping[str, Mapping[str, int]] | None) -> Overlay:
        """Free capacity of the nodes in ``freed`` with what it frees there added."""
        overlay: Overlay = {}
        for name, extra in (freed or {}).items():
            cls = self.class_of.get(name)
            if cls is None:
                continue
            free = list(self.free[name])
            for resource, amount in extra.items():
                i = cls.index.get(resource)
                if i is not None:
                    free[i] += amount
            overlay[name] = tuple(free)
        return overlay
