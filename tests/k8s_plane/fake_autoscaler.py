"""A small cluster autoscaler for the fake API server: it reads ProvisioningRequests and
their PodTemplates, adds Nodes of one node group for them, and sets their conditions as
the cluster autoscaler does (Accepted, then Provisioned; Provisioned=False with
CapacityIsNotFound while out of stock; Failed; BookingExpired; CapacityRevoked), and
removes a request's nodes once the request is deleted (scale-down)."""

from __future__ import annotations

import math
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from phalanx.spec.quantity import parse_quantity
from tests.k8s_plane.fake_apiserver import FakeAPIServer, now_iso

Object = dict[str, Any]


@dataclass
class NodeGroup:
    """What one node of the group holds, and the taints it comes with."""

    cpu: str = "8"
    memory: str = "32Gi"
    gpus: int = 0
    taints: list[Object] = field(default_factory=list)
    max_nodes: int = 100

    def holds(self) -> dict[str, int]:
        have = {"cpu": parse_quantity(self.cpu, "cpu"),
                "memory": parse_quantity(self.memory, "memory")}
        if self.gpus:
            have["nvidia.com/gpu"] = self.gpus * 1000
        return have


class FakeAutoscaler:
    """``mode`` says what it does with a new request: ``provision`` (nodes, then
    Provisioned=True), ``stockout`` (Provisioned=False, CapacityIsNotFound, for ever),
    ``fail`` (Failed=True), ``book`` (check-capacity: Provisioned=True, no node made);
    ``decide``, when given, says it per request (from its name and its templates' node
    selector). Nodes come up NotReady and turn Ready ``ready_after``
    seconds later, as a cloud's VMs do."""

    def __init__(self, api: FakeAPIServer, namespace: str, group: NodeGroup | None = None, *,
                 mode: str = "provision", delay: float = 0.2, ready_after: float = 0.3,
                 interval: float = 0.05,
                 decide: Callable[[str, dict[str, str]], str] | None = None) -> None:
        self.api = api
        self.namespace = namespace
        self.group = group or NodeGroup()
        self.mode = mode
        self.decide = decide
        self.delay = delay
        self.ready_after = ready_after
        self.interval = interval
        self.seen: dict[str, float] = {}  # request -> when first seen (monotonic-free count)
        self.nodes: dict[str, list[str]] = {}  # request -> the nodes made for it
        self.handled: set[str] = set()
        self.created = 0  # requests ever seen
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="fake-autoscaler", daemon=True)

    def start(self) -> FakeAutoscaler:
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(timeout=5)

    # ------------------------------------------------------------------ conditions
    def set_condition(self, name: str, kind: str, status: str, reason: str,
                      message: str) -> None:
        """Set one condition (merged by type, as the autoscaler's status update does)."""
        with self.api.lock:
            found = self.api.get("provisioningrequests", name, self.namespace)
            if found is None:
                return
            conditions = {c["type"]: c for c in (found.get("status") or {}).get(
                "conditions") or []}
            conditions[kind] = {"type": kind, "status": status, "reason": reason,
                                "message": message, "lastTransitionTime": now_iso()}
            self.api.update("provisioningrequests", name,
                            {"status": {"conditions": list(conditions.values())}},
                            self.namespace)

    def revoke(self, name: str, nodes_go_after: float = 5.0) -> None:
        """The capacity is taken back: CapacityRevoked now, the nodes some seconds later
        (as a cloud's preemption notice comes before the VMs stop)."""
        self.set_condition(name, "CapacityRevoked", "True", "CapacityRevoked",
                           "the VMs were preempted")

        def remove() -> None:
            for node in self.nodes.pop(name, []):
                self.api.remove("nodes", node)
        timer = threading.Timer(nodes_go_after, remove)
        timer.daemon = True
        timer.start()

    def expire(self, name: str) -> None:
        self.set_condition(name, "BookingExpired", "True", "BookingExpired",
                           "the booking of 10 minutes ran out")

    # ------------------------------------------------------------------ the loop
    def _run(self) -> None:
        ticks = 0
        while not self._stop.wait(self.interval):
            ticks += 1
            requests = {r["metadata"]["name"]: r
                        for r in self.api.list("provisioningrequests", self.namespace)}
            for name in list(self.nodes):
                if name not in requests:  # deleted: scale the nodes down
                    for node in self.nodes.pop(name):
                        self.api.remove("nodes", node)
            for name in requests:
                if name not in self.seen:
                    self.seen[name] = ticks * self.interval
                    self.created += 1
                    self.set_condition(name, "Accepted", "True", "Accepted",
                                       "the request was accepted")
                elif name not in self.handled and \
                        ticks * self.interval - self.seen[name] >= self.delay:
                    self.handled.add(name)
                    self._decide(name, requests[name])

    def _decide(self, name: str, request: Object) -> None:
        mode = self.mode
        if self.decide is not None:
            first = self.api.get("podtemplates",
                                 request["spec"]["podSets"][0]["podTemplateRef"]["name"],
                                 self.namespace) or {}
            selector = (first.get("template") or {}).get("spec", {}).get("nodeSelector") or {}
            mode = self.decide(name, selector)
        if mode == "stockout":
            self.set_condition(name, "Provisioned", "False", "CapacityIsNotFound",
                               "no zone has the machines asked for")
            return
        if mode == "book":  # check-capacity: existing nodes have room; none is made
            self.set_condition(name, "Provisioned", "True", "CapacityIsFound",
                               "capacity is booked for 10 minutes")
            return
        if mode == "fail":
            self.set_condition(name, "Failed", "True", "FailedToCreateNodes",
                               "the cloud refused to create the VMs")
            return
        pods = []  # (requests, node selector) of every pod the request asks for
        for pod_set in request["spec"]["podSets"]:
            template = self.api.get("podtemplates", pod_set["podTemplateRef"]["name"],
                                    self.namespace)
            if template is None:
                self.set_condition(name, "Failed", "True", "PodTemplateNotFound",
                                   "a pod template is missing")
                return
            spec = template["template"]["spec"]
            wanted = {k: parse_quantity(v, k) for k, v in
                      spec["containers"][0]["resources"].get("requests", {}).items()}
            pods.extend([(wanted, spec.get("nodeSelector") or {})] * int(pod_set["count"]))
        holds = self.group.holds()
        per_node = min((holds.get(k, 0) // v for k, v in pods[0][0].items() if v),
                       default=1) if pods else 1
        if per_node < 1:
            self.set_condition(name, "Failed", "True", "NoNodeGroupFits",
                               "no node group can hold the pods")
            return
        count = math.ceil(len(pods) / per_node)
        names = []
        for i in range(count):
            node = f"{name}-node-{i}"
            self.api.add_node(node, cpu=self.group.cpu, memory=self.group.memory,
                              gpus=self.group.gpus, labels=dict(pods[0][1]),
                              taints=list(self.group.taints) or None, ready=False)
            names.append(node)
        self.nodes[name] = names
        # best-effort-atomic: Provisioned as soon as the scale-up is asked for.
        self.set_condition(name, "Provisioned", "True", "Provisioned",
                           f"scale-up of {count} node(s) requested")
        timer = threading.Timer(self.ready_after, self._ready, args=(names,))
        timer.daemon = True
        timer.start()

    def _ready(self, names: list[str]) -> None:
        for node in names:
            with self.api.lock:
                found = self.api.get("nodes", node)
                if found is None:
                    continue
                conditions = [{**c, "status": "True", "reason": "KubeletReady"}
                              if c["type"] == "Ready" else c
                              for c in found["status"]["conditions"]]
                self.api.update("nodes", node, {"status": {"conditions": conditions}})
