"""Gang placement of managed objects' pods through scheduling gates.

An admitted managed object is unsuspended with a scheduling gate (``phalanx.dev/gang``) on
each of its pod templates, so the pods its controller makes are created gated: the
kube-scheduler leaves a gated pod alone (no binding, no partial gang holding nodes). Each
template is labelled with the Phalanx pod set it became (``phalanx.dev/pod-set``). Once
every pod of the gang exists, Phalanx patches each one: the gate removed, and its node
affinity narrowed to one node Phalanx placed its pod set on (adding a requirement is what a
gated pod's spec allows): within a pod set, the pod of completion index i the i-th node,
the others the nodes left in a stable order (a JobSet's Job index, the completion index,
the pod's name).
A gang that fits only whole is thereby never half-bound; a pod made later (a replacement
after a failure) is released at once, its mates already run.

Level-triggered: what to release is worked out from the pods as the informer sees them,
so a restarted control plane releases what the last one left gated. Only pods labelled as
an admitted attempt's, in the namespace of the object Phalanx launched, are touched.
"""

from __future__ import annotations

import json
import logging
import threading
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any
from urllib.parse import quote

from phalanx.compute.kubernetes.client import KubeClient, KubeError, Object
from phalanx.compute.kubernetes.watch import Informer

log = logging.getLogger("phalanx.compute.kubernetes")

GATE = "phalanx.dev/gang"
# On the pod template of an admitted object: the Phalanx job and the attempt its pods are.
POD_LABEL = "phalanx.dev/admitted-job"
ATTEMPT_LABEL = "phalanx.dev/admitted-attempt"
# The Phalanx pod set a template became: its pods go to that pod set's placed nodes.
POD_SET_LABEL = "phalanx.dev/pod-set"
# The Job controller's index of a pod of an Indexed Job: the pod the n-th node is for.
INDEX_ANNOTATION = "batch.kubernetes.io/job-completion-index"
# JobSet's index of a child Job among its replicated Job's: its pods' completion indexes
# repeat from one child Job to the next, so they order the pod set's pods, no more.
JOB_INDEX_LABEL = "jobset.sigs.k8s.io/job-index"

# (job, pods existing, pods the gang needs) while the gang is incomplete; (job, nodes) once
# released.
OnWaiting = Callable[[str, int, int], None]
OnReleased = Callable[[str, list[str]], None]


@dataclass
class Gang:
    """An admitted attempt's pods: where they go, and whether they were let go."""

    job: str
    namespace: str
    attempt: int
    size: int
    nodes: tuple[str, ...]  # one per pod, in index order (the admission's)
    # Each pod set's nodes (the admission's); a pod without a known pod set label may go
    # to any of ``nodes``.
    pod_sets: tuple[tuple[str, tuple[str, ...]], ...] = ()
    released: bool = False
    waiting_said: bool = False


def with_gate(gates: Any) -> list[Object]:
    """A pod template's ``schedulingGates`` with Phalanx's added."""
    out = [g for g in gates or [] if isinstance(g, dict)]
    return out if any(g.get("name") == GATE for g in out) else [*out, {"name": GATE}]


def pinned(affinity: Any, nodes: list[str]) -> Object:
    """``affinity`` with every required node term also asking for one of ``nodes`` (an
    added requirement: the existing ones are left exactly as they were)."""
    pin = {"key": "metadata.name", "operator": "In", "values": nodes}
    out = json.loads(json.dumps(affinity or {}))
    node_affinity = out.setdefault("nodeAffinity", {})
    required = node_affinity.setdefault("requiredDuringSchedulingIgnoredDuringExecution", {})
    terms = required.get("nodeSelectorTerms") or [{}]
    for term in terms:
        term["matchFields"] = [*(term.get("matchFields") or []), pin]
    required["nodeSelectorTerms"] = terms
    return out


def gated(pod: Object) -> bool:
    return any(g.get("name") == GATE for g in (pod.get("spec") or {}).get("schedulingGates")
               or [] if isinstance(g, dict))


class GangGates:
    """Follows the admitted attempts' pods and releases each gang once it is whole."""

    def __init__(self, client: KubeClient, *, on_waiting: OnWaiting, on_released: OnReleased,
                 read_timeout: float = 60.0) -> None:
        self.client = client
        self.on_waiting = on_waiting
        self.on_released = on_released
        self._lock = threading.RLock()
        self._gangs: dict[str, Gang] = {}  # job -> its launched attempt's gang
        self._pods: dict[str, Object] = {}  # uid -> pod, every admitted attempt's
        self.informer = Informer(client, "/api/v1/pods", label_selector=POD_LABEL,
                                 name="gated-pods", on_list=self._list, on_event=self._event,
                                 read_timeout=read_timeout)

    def expect(self, gang: Gang) -> None:
        """Hold ``gang``'s pods until all exist (called before its object is unsuspended)."""
        with self._lock:
            known = self._gangs.get(gang.job)
            if known is not None and known.attempt == gang.attempt:
                return
            self._gangs[gang.job] = gang
        self._reconcile(gang.job)

    def drop(self, job: str, attempt: int) -> None:
        with self._lock:
            known = self._gangs.get(job)
            if known is not None and known.attempt == attempt:
                del self._gangs[job]

    # ------------------------------------------------------------------ informer
    def _list(self, items: list[Object], version: str) -> None:
        with self._lock:
            self._pods = {str(p["metadata"]["uid"]): p for p in items}
            jobs = list(self._gangs)
        for job in jobs:
            self._reconcile(job)

    def _event(self, kind: str, pod: Object) -> None:
        meta = pod.get("metadata") or {}
        uid = str(meta.get("uid"))
        with self._lock:
            if kind == "DELETED":
                self._pods.pop(uid, None)
            else:
                self._pods[uid] = pod
        job = (meta.get("labels") or {}).get(POD_LABEL)
        if job and kind != "DELETED":
            self._reconcile(str(job))

    # ------------------------------------------------------------------ releasing
    def _reconcile(self, job: str) -> None:
        first = False
        with self._lock:
            gang = self._gangs.get(job)
            if gang is None:
                return
            pods = [p for p in self._pods.values() if _of(p, gang)]
            if not gang.released and len(pods) < gang.size:
                if pods and not gang.waiting_said:
                    gang.waiting_said = True
                    waiting: tuple[int, int] | None = (len(pods), gang.size)
                else:
                    waiting = None
                release: list[tuple[Object, str | None]] = []
            else:
                first = not gang.released
                gang.released = True
                waiting = None
                release = _placements(pods, gang)
        if waiting is not None:
            self.on_waiting(job, *waiting)
            return
        released = [node for pod, node in release if self._release(pod, node)]
        if release and released and first:
            self.on_released(job, sorted(n for n in released if n))

    def _release(self, pod: Object, node: str | None) -> bool:
        meta, spec = pod["metadata"], pod.get("spec") or {}
        gates = [g for g in spec.get("schedulingGates") or [] if g.get("name") != GATE]
        body: Object = {"metadata": {"resourceVersion": meta.get("resourceVersion")},
                        "spec": {"schedulingGates": gates or None}}
        if node is not None:
            body["spec"]["affinity"] = pinned(spec.get("affinity"), [node])
        path = (f"/api/v1/namespaces/{quote(meta['namespace'], safe='')}/pods/"
                f"{quote(meta['name'], safe='')}")
        try:
            self.client.patch(path, body)
        except KubeError as exc:  # 409: changed meanwhile, its event brings it back
            if exc.status not in (404, 409):
                log.warning("could not release pod %s/%s: %s", meta["namespace"],
                            meta["name"], exc)
            return False
        log.info("released pod %s/%s of job %s onto %s", meta["namespace"], meta["name"],
                 meta["labels"][POD_LABEL], node or "any placed node")
        return True


def _of(pod: Object, gang: Gang) -> bool:
    """Whether ``pod`` is a live pod of ``gang`` (made for its attempt, in its namespace)."""
    meta = pod.get("metadata") or {}
    labels = meta.get("labels") or {}
    return (labels.get(POD_LABEL) == gang.job and labels.get(ATTEMPT_LABEL) == str(gang.attempt)
            and meta.get("namespace") == gang.namespace and not meta.get("deletionTimestamp")
            and (pod.get("status") or {}).get("phase") not in ("Succeeded", "Failed"))


def _placements(pods: list[Object], gang: Gang) -> list[tuple[Object, str | None]]:
    """Each gated pod with the node it goes to, pod set by pod set (``_placed``)."""
    sets = dict(gang.pod_sets)
    groups: dict[str | None, list[Object]] = {}
    for pod in pods:
        name = ((pod.get("metadata") or {}).get("labels") or {}).get(POD_SET_LABEL)
        groups.setdefault(name if name in sets else None, []).append(pod)
    out: list[tuple[Object, str | None]] = []
    for name, members in groups.items():
        out += _placed(members, sets[name] if name is not None else gang.nodes)
    return out


def _placed(pods: list[Object], nodes: tuple[str, ...]) -> list[tuple[Object, str | None]]:
    """Each gated pod of one pod set with its node: an indexed pod the node of its index,
    the others, in a stable order, the placed nodes the released pods do not hold (None:
    the nodes, any)."""
    free = list(nodes)
    for pod in pods:
        if not gated(pod):
            node = (pod.get("spec") or {}).get("nodeName")
            if node in free:
                free.remove(node)
    out: list[tuple[Object, str | None]] = []
    unindexed = []
    for pod in sorted((p for p in pods if gated(p)), key=_order):
        index = _index(pod)
        if index is not None and index < len(nodes):
            node = nodes[index]
            if node in free:
                free.remove(node)
            out.append((pod, node))
        else:
            unindexed.append(pod)
    for pod in unindexed:
        out.append((pod, free.pop(0) if free else None))
    return out


def _number(value: Any) -> int | None:
    return int(value) if isinstance(value, str) and value.isdigit() else None


def _index(pod: Object) -> int | None:
    """The pod's index in its pod set, when it alone says it: a completion index, unless a
    JobSet's Job index says the pod set has more Jobs than this pod's."""
    meta = pod.get("metadata") or {}
    if _number((meta.get("labels") or {}).get(JOB_INDEX_LABEL)) is not None:
        return None
    return _number((meta.get("annotations") or {}).get(INDEX_ANNOTATION))


def _order(pod: Object) -> tuple[int, int, str]:
    """A pod's place among its pod set's: its Job's index, its completion index, its name."""
    meta = pod.get("metadata") or {}
    job = _number((meta.get("labels") or {}).get(JOB_INDEX_LABEL))
    index = _number((meta.get("annotations") or {}).get(INDEX_ANNOTATION))
    return (-1 if job is None else job, -1 if index is None else index, str(meta["name"]))
