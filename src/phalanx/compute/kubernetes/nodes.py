"""The cluster's nodes as the scheduler sees them, kept current by two watches.

A node offers its allocatable cpu, memory, pods and extended resources
(``nvidia.com/gpu`` and any other ``domain/name``), minus what pods Phalanx did
not create already request on it (any namespace, any non-terminal pod bound to
the node): that capacity is not Phalanx's to give. Labels and taints come
as they are; ``spec.unschedulable`` is the cordon flag; the Ready condition, the
pressure conditions and what the node's doctor wrote on it (``health.py``) give
the health.

A node that stops reporting (Ready not True, or the ``unreachable``/``not-ready``
taints) is degraded at first, a blip of its kubelet being no reason to stop the
gangs on it, and lost once that has lasted ``lost_grace`` seconds: unhealthy, and
its pods are deleted at once, as they cannot stop by themselves.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from typing import Any

from phalanx.compute.kubernetes.client import KubeClient
from phalanx.compute.kubernetes.health import CONDITION, doctor_health
from phalanx.compute.kubernetes.objects import MANAGED_BY, MANAGER
from phalanx.compute.kubernetes.status import timestamp
from phalanx.compute.kubernetes.taint import TAINT, is_health_taint
from phalanx.compute.kubernetes.watch import Informer
from phalanx.errors import SpecError
from phalanx.health.stale import DEFAULT_STALE_AFTER, is_stale, mark_stale
from phalanx.spec.quantity import format_quantity, parse_quantity
from phalanx.spec.resources import Node, NodeHealth, Taint

log = logging.getLogger("phalanx.compute.kubernetes")

Object = dict[str, Any]
BASE_RESOURCES = ("cpu", "memory", "pods")
PRESSURE = ("MemoryPressure", "DiskPressure", "PIDPressure", "NetworkUnavailable")
EFFECTS = ("NoSchedule", "PreferNoSchedule", "NoExecute")
UNREACHABLE_TAINTS = ("node.kubernetes.io/unreachable", "node.kubernetes.io/not-ready")
DEFAULT_LOST_GRACE = 60.0
# Only pods that can still hold capacity: the API server filters the rest out, and sends
# a pod that reaches Succeeded or Failed to this watch as deleted.
LIVE_PODS = "status.phase!=Succeeded,status.phase!=Failed"


def offered(name: str) -> bool:
    """Resources the scheduler accounts for: cpu, memory, pods and extended resources."""
    return name in BASE_RESOURCES or ("/" in name and not name.startswith("hugepages"))


def _quantities(values: object) -> dict[str, int]:
    out: dict[str, int] = {}
    for name, value in (values or {}).items() if isinstance(values, dict) else ():
        if not offered(name):
            continue
        try:
            out[name] = parse_quantity(value)
        except SpecError:
            log.warning("ignoring unreadable quantity %s=%r", name, value)
    return out


def pod_requests(pod: Object) -> dict[str, int]:
    """What a pod holds on its node: the kube-scheduler's effective request (milli-units).

    Regular containers and sidecars (restartable init containers) run together and add
    up; each other init container runs alone, so only the largest of those counts when
    it is above the sum; the pod's overhead comes on top; and the pod itself takes one
    unit of "pods".
    """
    spec = pod.get("spec") or {}
    total: dict[str, int] = {}
    sidecars: dict[str, int] = {}
    largest_init: dict[str, int] = {}
    for container in spec.get("initContainers") or []:
        requests = _quantities((container.get("resources") or {}).get("requests"))
        if container.get("restartPolicy") == "Always":
            for k, v in requests.items():
                sidecars[k] = sidecars.get(k, 0) + v
        else:
            for k, v in requests.items():
                largest_init[k] = max(largest_init.get(k, 0), v + sidecars.get(k, 0))
    for container in spec.get("containers") or []:
        for k, v in _quantities((container.get("resources") or {}).get("requests")).items():
            total[k] = total.get(k, 0) + v
    for k, v in sidecars.items():
        total[k] = total.get(k, 0) + v
    for k, v in largest_init.items():
        total[k] = max(total.get(k, 0), v)
    for k, v in _quantities(spec.get("overhead")).items():
        total[k] = total.get(k, 0) + v
    total["pods"] = total.get("pods", 0) + 1000
    return total


def lost_since(obj: Object) -> float | None:
    """Since when the node has not reported (0.0 when that time is unknown), or None."""
    spec, status = obj.get("spec") or {}, obj.get("status") or {}
    ready = next((c for c in status.get("conditions") or [] if c.get("type") == "Ready"), None)
    times = []
    if ready is None or ready.get("status") != "True":
        times.append(timestamp((ready or {}).get("lastTransitionTime")) or 0.0)
    for taint in spec.get("taints") or []:
        if taint.get("key") in UNREACHABLE_TAINTS:
            times.append(timestamp(taint.get("timeAdded")) or 0.0)
    return min(times) if times else None


def doctor_heartbeat(obj: Object) -> float | None:
    """When the node's doctor last reported (its condition's heartbeat), None: no doctor."""
    for condition in (obj.get("status") or {}).get("conditions") or []:
        if condition.get("type") == CONDITION:
            return timestamp(condition.get("lastHeartbeatTime"))
    return None


def node_from(
    obj: Object, used: dict[str, int] | None = None, *, now: float | None = None,
    lost_grace: float = DEFAULT_LOST_GRACE, stale_after: float = DEFAULT_STALE_AFTER,
) -> Node:
    """The scheduler's Node for a Node object, less ``used`` (foreign pods' requests)."""
    meta, spec, status = obj.get("metadata", {}), obj.get("spec") or {}, obj.get("status") or {}
    allocatable = _quantities(status.get("allocatable"))
    for resource, amount in (used or {}).items():
        if resource in allocatable:
            allocatable[resource] = max(0, allocatable[resource] - amount)
    # Phalanx's own health taint restates the doctor's ERR, which the health below
    # already refuses: counting it too would keep a recovered node refused until removed.
    taints = [
        Taint(key=t["key"], value=t.get("value") or "", effect=t["effect"])
        for t in spec.get("taints") or []
        if t.get("key") and t.get("effect") in EFFECTS and not is_health_taint(t)
    ]
    health, reasons, checks = doctor_health(obj)
    now = time.time() if now is None else now
    heartbeat = doctor_heartbeat(obj)
    if heartbeat is not None and is_stale(heartbeat, now, stale_after):
        health, reasons = mark_stale(health, reasons, heartbeat, now, stale_after)
    conditions = {c.get("type"): c for c in status.get("conditions") or []}
    ready = conditions.get("Ready")
    since = lost_since(obj)
    lost = False
    if since is not None:
        why = (ready or {}).get("reason") or "NotReady"
        detail = (ready or {}).get("message") or "the node does not report Ready"
        silent = now - since
        lost = silent >= lost_grace
        if lost:
            health = NodeHealth.UNHEALTHY
            reasons.insert(0, f"NodeLost: {why}: {detail}")
        else:
            health = max(health, NodeHealth.DEGRADED, key=_SEVERITY.__getitem__)
            reasons.insert(0, f"{why}: {detail} (for {silent:.0f}s; lost after "
                              f"{lost_grace:g}s)")
    for kind in PRESSURE:
        if conditions.get(kind, {}).get("status") == "True":
            if health is NodeHealth.HEALTHY:
                health = NodeHealth.DEGRADED
            reasons.append(f"{kind}: {conditions[kind].get('message') or kind}")
    return Node(
        name=str(meta["name"]), labels=dict(meta.get("labels") or {}), taints=taints,
        # The Node parses quantities: hand it their text, not milli-units.
        allocatable={k: format_quantity(v, k) for k, v in allocatable.items()},
        unschedulable=bool(spec.get("unschedulable")),
        health=health, health_reasons=reasons, lost=lost, checks=checks,
    )


_SEVERITY = {NodeHealth.HEALTHY: 0, NodeHealth.DEGRADED: 1, NodeHealth.UNHEALTHY: 2}


class NodeInventory:
    """Nodes and foreign pods from two informers; ``snapshot()`` is the current view."""

    def __init__(
        self,
        client: KubeClient,
        *,
        namespace: str,
        on_change: Callable[[], None] | None = None,
        read_timeout: float = 60.0,
        lost_grace: float = DEFAULT_LOST_GRACE,
        stale_after: float = DEFAULT_STALE_AFTER,
        admitted: Callable[[Object], bool] | None = None,
    ) -> None:
        self.namespace = namespace
        # Whether a pod outside the namespace is one Phalanx admitted (a managed Job's):
        # its requests are in Phalanx's own accounts, not taken from the node.
        self.admitted = admitted
        self.lost_grace = lost_grace
        self.stale_after = stale_after
        self._stale: set[str] = set()  # nodes whose doctor the cached snapshot reports silent
        self._lost: set[str] = set()  # nodes the cached snapshot reports lost
        self.on_change = on_change
        self._lock = threading.Lock()
        self._nodes: dict[str, Object] = {}
        self._pods: dict[str, tuple[str, dict[str, int]]] = {}  # uid -> (node, requests)
        self._cache: list[Node] | None = None
        self.generation = 0
        self.nodes = Informer(client, "/api/v1/nodes", on_list=self._list_nodes,
                              on_event=self._node_event, name="nodes", read_timeout=read_timeout)
        self.pods = Informer(client, "/api/v1/pods", field_selector=LIVE_PODS,
                             on_list=self._list_pods, on_event=self._pod_event,
                             name="foreign-pods", read_timeout=read_timeout)

    def start(self) -> None:
        self.nodes.start()
        self.pods.start()

    def stop(self) -> None:
        self.nodes.stop()
        self.pods.stop()

    def wait_synced(self, timeout: float) -> bool:
        # Without rights to read pods cluster-wide the inventory still works (unreduced).
        return self.nodes.synced.wait(timeout) and (
            self.pods.synced.wait(timeout) or self.pods.error is not None
        )

    def snapshot(self) -> list[Node]:
        with self._lock:
            if self._cache is None:
                used: dict[str, dict[str, int]] = {}
                for node, requests in self._pods.values():
                    into = used.setdefault(node, {})
                    for k, v in requests.items():
                        into[k] = into.get(k, 0) + v
                now = time.time()
                self._cache = [node_from(obj, used.get(name), now=now,
                                         lost_grace=self.lost_grace,
                                         stale_after=self.stale_after)
                               for name, obj in sorted(self._nodes.items())]
                self._lost = {n.name for n in self._cache if n.lost}
                self._stale = self._silent(now)
            return list(self._cache)

    def expire(self) -> None:
        """Count a node whose grace ran out since the last snapshot as a change: nothing in
        the API changes when a silent node's time is up."""
        now = time.time()
        with self._lock:
            if self._cache is None:
                return
            lost = {name for name, obj in self._nodes.items()
                    if (since := lost_since(obj)) is not None and now - since >= self.lost_grace}
            if lost == self._lost and self._silent(now) == self._stale:
                return
            self._changed()
        self._notify()

    def _silent(self, now: float) -> set[str]:
        """The nodes whose doctor has not reported for longer than ``stale_after``."""
        return {name for name, obj in self._nodes.items()
                if is_stale(doctor_heartbeat(obj), now, self.stale_after)}

    def node_names(self) -> set[str]:
        with self._lock:
            return set(self._nodes)

    def node_objects(self) -> list[Object]:
        with self._lock:
            return list(self._nodes.values())

    def node_object(self, name: str) -> Object | None:
        with self._lock:
            return self._nodes.get(name)

    def node_taints(self, name: str) -> list[Taint]:
        """The taints a pod placed on ``name`` must tolerate: the scheduler's, and the health
        taint while it is still there (the node was placed on as healthy; the taint goes at
        the next reconcile, and the pod should not wait on it meanwhile)."""
        with self._lock:
            obj = self._nodes.get(name)
        if obj is None:
            return []
        taints = node_from(obj).taints
        if any(is_health_taint(t) for t in (obj.get("spec") or {}).get("taints") or []):
            taints.append(Taint(key=TAINT["key"], value=TAINT["value"], effect=TAINT["effect"]))
        return taints

    # ------------------------------------------------------------------ informer callbacks
    def _changed(self) -> None:
        self._cache = None
        self.generation += 1

    def _notify(self) -> None:
        if self.on_change is not None:
            self.on_change()

    def _list_nodes(self, items: list[Object], version: str) -> None:
        with self._lock:
            self._nodes = {str(o["metadata"]["name"]): o for o in items}
            self._changed()
        self._notify()

    def _node_event(self, kind: str, obj: Object) -> None:
        name = str(obj["metadata"]["name"])
        with self._lock:
            if kind == "DELETED":
                self._nodes.pop(name, None)
            else:
                old = self._nodes.get(name)
                self._nodes[name] = obj
                # Heartbeats rewrite a node every few seconds; only a change the scheduler
                # sees counts.
                if old is not None and node_from(old, now=0.0) == node_from(obj, now=0.0):
                    return
            self._changed()
        self._notify()

    def _foreign(self, obj: Object) -> tuple[str, dict[str, int]] | None:
        meta = obj.get("metadata", {})
        node = (obj.get("spec") or {}).get("nodeName")
        if not node:
            return None
        ours = (meta.get("labels") or {}).get(MANAGED_BY) == MANAGER
        if ours and meta.get("namespace") == self.namespace:
            return None
        if self.admitted is not None and self.admitted(obj):
            return None
        if (obj.get("status") or {}).get("phase") in ("Succeeded", "Failed"):
            return None
        return str(node), pod_requests(obj)

    def _list_pods(self, items: list[Object], version: str) -> None:
        pods = {}
        for obj in items:
            found = self._foreign(obj)
            if found is not None:
                pods[str(obj["metadata"]["uid"])] = found
        with self._lock:
            if pods != self._pods:
                self._pods = pods
                self._changed()
        self._notify()

    def _pod_event(self, kind: str, obj: Object) -> None:
        uid = str(obj["metadata"].get("uid"))
        found = None if kind == "DELETED" else self._foreign(obj)
        with self._lock:
            if self._pods.get(uid) == found:
                return
            if found is None:
                self._pods.pop(uid, None)
            else:
                self._pods[uid] = found
            self._changed()
        self._notify()
