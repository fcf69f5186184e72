"""Kubernetes-native admission: workloads created with kubectl, queued and admitted by Phalanx.

Namespaces opt in by a label selector (as Kueue's ``managedJobsNamespaceSelector``); in
them an object of a managed kind (Job, JobSet, PyTorchJob, MPIJob, RayJob, RayCluster,
AppWrapper: ``phalanx.spec.manifests.native_kinds``, one adapter per kind) is managed when
it carries ``kueue.x-k8s.io/queue-name`` or its namespace names a default queue (annotation
``phalanx.dev/default-queue``, as ``manageJobsWithoutQueueName``), and no managed object
controls it (a JobSet's Jobs are the JobSet's). Informers (list, then watch resumed from
the last resourceVersion) follow the namespaces and each kind the API server serves. A
managed object that runs without Phalanx's admission is suspended at once (what the
admission webhook does at creation, for objects created while it was down or before
Phalanx started); the control plane makes each managed object a Phalanx job
(``control/native.py``) and stores it before anything else.

When the control plane launches that job's admitted attempt, the object is unsuspended
with every pod template it has pinned (a required node affinity) to the nodes Phalanx
placed the gang on, tolerating their taints, which is what the flavor's node labels and
tolerations select; the kind's controller then makes the pods. Each template also gets a
scheduling gate and the pod set it became, so its pods are gated (``schedulingGates``)
until all of the gang's exist, then Phalanx un-gates each onto its own node of its pod
set's (``gates.py``); an AppWrapper, whose templates may not change, is not gated. The
attempt's state is read from the object's status, as its adapter reads it. Stopping the
attempt (preemption, cancel) suspends the object again and restores its templates (and
gates), as Kueue's eviction does; deleting the object ends the Phalanx job.
Conditions (``QuotaReserved``, ``Admitted``, ``Evicted``) and Events on the object say what
Phalanx did, where kubectl looks.

Nothing here decides anything: ``phalanx.spec.manifests.native`` says what an object
means, the scheduler admits it, the control loop launches and stops it.
"""

from __future__ import annotations

import copy
import json
import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from functools import partial
from typing import Any
from urllib.parse import quote

from phalanx.compute.base import PodPhase, PodRef, PodState
from phalanx.compute.kubernetes.client import KubeClient, KubeError, Object
from phalanx.compute.kubernetes.gates import (
    ATTEMPT_LABEL,
    GATE,
    POD_LABEL,
    POD_SET_LABEL,
    Gang,
    GangGates,
    pinned,
    with_gate,
)
from phalanx.compute.kubernetes.health import now_rfc3339
from phalanx.compute.kubernetes.patches import (
    add_ops,
    merge_diff,
    nested,
    pointer,
    put,
    set_or_drop,
)
from phalanx.compute.kubernetes.status import TERMINATED, timestamp
from phalanx.compute.kubernetes.watch import Informer
from phalanx.scheduler.types import Admission
from phalanx.spec.manifests.native import (
    ADMITTED_ANNOTATION,
    DEFAULT_QUEUE_ANNOTATION,
    JOB_ANNOTATION,
    OWNER_ANNOTATION,
    job_name,
    queue_of,
)
from phalanx.spec.manifests.native_kinds import (
    FAILED,
    NATIVE_KINDS,
    SUCCEEDED,
    NativeKind,
    Progress,
    at,
    kind_of,
    owned_by_managed,
)
from phalanx.spec.resources import JobSpec

log = logging.getLogger("phalanx.compute.kubernetes")

# The templates' scheduling fields as they were before Phalanx injected its own (JSON: a
# list, one {affinity, tolerations} per template in the adapter's order; a Job's once was
# the one mapping).
ORIGINAL_ANNOTATION = "phalanx.dev/original-scheduling"
# How often a patch that lost a race (409) is tried again on the object read afresh.
PATCH_TRIES = 3


@dataclass(frozen=True, slots=True)
class ObjectKey:
    """A managed object: its kind's (apiVersion, kind), namespace and name."""

    kind: tuple[str, str]
    namespace: str
    name: str

    @property
    def adapter(self) -> NativeKind:
        return NATIVE_KINDS[self.kind]

    @property
    def path(self) -> str:
        return (f"{self.adapter.collection(quote(self.namespace, safe=''))}/"
                f"{quote(self.name, safe='')}")

    @property
    def job(self) -> str:
        return job_name(self.namespace, self.name, self.kind[1])

    def __str__(self) -> str:
        return f"{self.kind[1]} {self.namespace}/{self.name}"


def key_of(obj: Object) -> ObjectKey:
    meta = obj["metadata"]
    return ObjectKey((str(obj.get("apiVersion")), str(obj.get("kind"))),
                     str(meta.get("namespace") or ""), str(meta["name"]))


@dataclass(frozen=True, slots=True)
class ManagedObject:
    """A managed object, the job it runs as, and the queue its namespace gives it."""

    job: str
    obj: Object
    default_queue: str | None


@dataclass
class _Launched:
    attempt: int
    key: ObjectKey
    pod_sets: list[tuple[str, int]]  # the job's pod sets: (name, replicas)
    stopped_at: float | None = None


class NativeJobs:
    """Follows the managed objects; suspends, unsuspends and reports them for the plane."""

    def __init__(self, client: KubeClient, selector: str, *,
                 on_change: Callable[[], None] = lambda: None,
                 read_timeout: float = 60.0) -> None:
        self.client = client
        self.selector = selector
        self.on_change = on_change
        self.read_timeout = read_timeout
        self._lock = threading.RLock()
        self._namespaces: dict[str, str | None] = {}  # managed namespace -> its default queue
        self._objects: dict[ObjectKey, Object] = {}  # every object of a managed kind seen
        self._by_job: dict[str, ObjectKey] = {}  # Phalanx job -> its managed object
        self._deleted: set[str] = set()  # jobs whose object was deleted, not yet taken
        self._launched: dict[str, _Launched] = {}
        self.namespace_informer = Informer(
            client, "/api/v1/namespaces", label_selector=selector, name="managed-namespaces",
            on_list=self._list_namespaces, on_event=self._namespace_event,
            read_timeout=read_timeout)
        self.informers: dict[tuple[str, str], Informer] = {}  # one per kind served
        self.gates = GangGates(client, on_waiting=self._gang_waiting,
                               on_released=self._gang_released, read_timeout=read_timeout)

    def start(self, timeout: float = 30.0) -> None:
        self.namespace_informer.start()
        self.namespace_informer.synced.wait(timeout)
        for adapter in NATIVE_KINDS.values():
            if adapter.builtin or self._served(adapter):
                self.informers[adapter.key] = Informer(
                    self.client, adapter.collection(), name=f"managed-{adapter.plural}",
                    on_list=partial(self._list_objects, adapter),
                    on_event=partial(self._object_event, adapter),
                    read_timeout=self.read_timeout)
        for informer in [*self.informers.values(), self.gates.informer]:
            informer.start()
        for informer in [*self.informers.values(), self.gates.informer]:
            informer.synced.wait(timeout)

    def stop(self) -> None:
        self.gates.informer.stop()
        for informer in self.informers.values():
            informer.stop()
        self.namespace_informer.stop()

    @property
    def synced(self) -> bool:
        return self.namespace_informer.synced.is_set() and bool(self.informers) and all(
            i.synced.is_set() for i in self.informers.values())

    @property
    def kinds(self) -> list[tuple[str, str]]:
        """The (apiVersion, kind) of each kind followed: those the API server served at
        the start (a kind whose CRD is installed later is followed after a restart)."""
        return list(self.informers)

    def _served(self, adapter: NativeKind) -> bool:
        try:
            found = self.client.get(f"/apis/{adapter.api_version}")
        except KubeError as exc:
            if exc.status not in (403, 404):
                log.warning("cannot tell whether %s is served: %s", adapter.api_version, exc)
            return False
        return any(r.get("name") == adapter.plural for r in found.get("resources") or [])

    # ------------------------------------------------------------------ what is managed
    def managed(self) -> list[ManagedObject]:
        """Every managed object now in the cluster, with the job it runs as."""
        with self._lock:
            return [ManagedObject(key.job, obj, self._namespaces.get(key.namespace))
                    for key, obj in sorted(self._objects.items(), key=lambda i: (
                        i[0].namespace, i[0].name, i[0].kind)) if self._is_managed(obj)]

    def take_deleted(self) -> set[str]:
        """The jobs whose managed object was deleted since the last call."""
        with self._lock:
            deleted, self._deleted = self._deleted, set()
            return deleted

    def admission_patch(self, obj: Object, user: str | None) -> list[Object]:
        """The JSONPatch a mutating admission webhook answers for ``obj`` (with its
        apiVersion and kind) being created: a managed object is created suspended, its
        owner the user who created it; nothing for any other object."""
        adapter = kind_of(obj)
        with self._lock:
            if adapter is None or not self._is_managed(obj):
                return []
        meta = obj.get("metadata") or {}
        patch = add_ops(obj, adapter.suspend, True)
        namespace, name = str(meta.get("namespace") or ""), str(meta.get("name") or "")
        annotations = {JOB_ANNOTATION: job_name(namespace, name, adapter.kind)} if name else {}
        if user:
            annotations[OWNER_ANNOTATION] = user
        if not annotations:
            return patch
        if not isinstance(meta.get("annotations"), dict):
            patch.append({"op": "add", "path": "/metadata/annotations", "value": annotations})
        else:
            patch += [{"op": "add", "path": "/metadata/annotations/" + pointer(key),
                       "value": value} for key, value in annotations.items()]
        return patch

    def refuse(self, job: str, message: str) -> None:
        """Say on the object why Phalanx cannot queue it (a condition and a Warning)."""
        with self._lock:
            key = self._by_job.get(job)
        if key is None:
            return
        self.set_conditions(key, {"QuotaReserved": ("False", "Inadmissible", message)})
        self.event(key, "Warning", "Inadmissible", message)

    def owns(self, job: str) -> bool:
        with self._lock:
            return job in self._by_job or job in self._launched

    def _is_managed(self, obj: Object) -> bool:
        namespace = (obj.get("metadata") or {}).get("namespace") or ""
        if namespace not in self._namespaces or kind_of(obj) is None or owned_by_managed(obj):
            return False
        return queue_of(obj, self._namespaces[namespace]) is not None

    # ------------------------------------------------------------------ informers
    def _list_namespaces(self, items: list[Object], version: str) -> None:
        with self._lock:
            self._namespaces = {i["metadata"]["name"]: _default_queue(i) for i in items}
            objects = list(self._objects.values())
        for obj in objects:
            self._seen(obj)

    def _namespace_event(self, kind: str, obj: Object) -> None:
        name = obj["metadata"]["name"]
        with self._lock:
            if kind == "DELETED":
                self._namespaces.pop(name, None)
                return
            self._namespaces[name] = _default_queue(obj)
            objects = [o for k, o in self._objects.items() if k.namespace == name]
        for found in objects:  # a namespace that opts in now: its objects are managed now
            self._seen(found)

    def _list_objects(self, adapter: NativeKind, items: list[Object], version: str) -> None:
        with self._lock:
            mine = {k for k in self._objects if k.kind == adapter.key}
            before = {k.job for k in mine if k.job in self._by_job}
            for key in mine:
                self._objects.pop(key)
                self._by_job.pop(key.job, None)
        for obj in items:
            obj.setdefault("apiVersion", adapter.api_version)
            obj.setdefault("kind", adapter.kind)
            self._seen(obj)
        with self._lock:
            self._deleted |= before - set(self._by_job)
        self.on_change()

    def _object_event(self, adapter: NativeKind, kind: str, obj: Object) -> None:
        obj.setdefault("apiVersion", adapter.api_version)
        obj.setdefault("kind", adapter.kind)
        key = key_of(obj)
        if kind == "DELETED":
            with self._lock:
                self._objects.pop(key, None)
                if self._by_job.pop(key.job, None) is not None:
                    self._deleted.add(key.job)
        else:
            self._seen(obj)
        self.on_change()

    def _seen(self, obj: Object) -> None:
        key = key_of(obj)
        with self._lock:
            self._objects[key] = obj
            if not self._is_managed(obj):
                return
            self._by_job[key.job] = key
        meta = obj["metadata"]
        annotations = meta.get("annotations") or {}
        if not key.adapter.suspended(obj) and ADMITTED_ANNOTATION not in annotations \
                and not meta.get("deletionTimestamp"):
            self._suspend_unadmitted(key, obj)

    def _suspend_unadmitted(self, key: ObjectKey, obj: Object) -> None:
        """Hold an object Phalanx has not admitted (the webhook's work, had it seen it)."""
        patch = nested(key.adapter.suspend, True)
        patch["metadata"] = {"annotations": {JOB_ANNOTATION: key.job},
                             "resourceVersion": obj["metadata"].get("resourceVersion")}
        try:
            self.client.patch(key.path, patch)
        except KubeError as exc:  # 409: changed meanwhile; the watch brings it back
            if exc.status not in (404, 409):
                log.warning("could not suspend %s: %s", key, exc)
            return
        log.info("suspended %s until Phalanx admits it (job %s)", key, key.job)
        self.event(key, "Normal", "Suspended", f"held until Phalanx admits job {key.job}")

    # ------------------------------------------------------------------ the plane's side
    def launch(self, job: JobSpec, attempt: int, admission: Admission,
               tolerations: list[Object]) -> None:
        """Unsuspend the object for ``attempt``: every pod template pinned to the placed
        nodes, tolerating their taints."""
        with self._lock:
            key = self._by_job.get(job.name)
            known = self._launched.get(job.name)
        if known is not None and known.attempt == attempt:
            return
        if key is None:
            raise KubeError(404, "NotFound", f"the object of job {job.name} is gone")
        tracked = _Launched(attempt, key, [(p.name, p.replicas) for p in job.pod_sets])
        placed = tuple(n for ps in admission.pod_sets for n in ps.nodes)
        nodes = sorted(set(placed))
        gated = key.adapter.pod_set_infos is None  # its templates are Phalanx's to edit

        def admitted(obj: Object) -> Object | None:
            annotations = obj["metadata"].get("annotations") or {}
            if annotations.get(ADMITTED_ANNOTATION) == str(attempt):
                return None  # launched before a restart
            new = copy.deepcopy(obj)
            paths = key.adapter.templates(new)
            original = annotations.get(ORIGINAL_ANNOTATION) or json.dumps(
                [_scheduling(at(new, path)) for path in paths])
            infos = key.adapter.pod_set_infos
            if infos is not None:  # its templates are immutable: what its controller adds
                put(new, infos, [{"labels": {POD_LABEL: job.name}, "tolerations": tolerations}
                                 for _ in paths])
                paths = []
            befores = _originals(original, len(paths))
            names = key.adapter.pod_sets(new)
            for path, before, pod_set in zip(paths, befores, names[:len(paths)], strict=True):
                merged = list(before.get("tolerations") or [])
                merged += [t for t in tolerations if t not in merged]
                template = at(new, path)
                labels = template.setdefault("metadata", {}).setdefault("labels", {})
                labels[POD_LABEL] = job.name
                set_or_drop(template.setdefault("spec", {}), "affinity",
                            pinned(before.get("affinity"), nodes))
                set_or_drop(template["spec"], "tolerations", merged or None)
                if gated:  # held until the whole gang exists (gates.py)
                    labels[ATTEMPT_LABEL] = str(attempt)
                    labels[POD_SET_LABEL] = pod_set
                    template["spec"]["schedulingGates"] = with_gate(
                        before.get("schedulingGates"))
            put(new, key.adapter.suspend, False)
            new["metadata"].setdefault("annotations", {}).update({
                ADMITTED_ANNOTATION: str(attempt), JOB_ANNOTATION: job.name,
                ORIGINAL_ANNOTATION: original})
            return new

        with self._lock:  # before its pods can appear: they are Phalanx's, not foreign
            self._launched[job.name] = tracked
        if gated:  # (after a restart too: what the last run left gated is released)
            self.gates.expect(Gang(job.name, key.namespace, attempt, len(placed), placed,
                                   tuple((ps.name, tuple(ps.nodes))
                                         for ps in admission.pod_sets)))
        try:
            changed = self._rewrite(key, admitted)
        except KubeError:
            with self._lock:
                self._launched.pop(job.name, None)
            self.gates.drop(job.name, attempt)
            raise
        if not changed:
            return
        where = ", ".join(nodes) or "no node"
        message = (f"Phalanx admitted job {job.name} (attempt {attempt}) in ClusterQueue "
                   f"{admission.cluster_queue}{' borrowing' if admission.borrowing else ''}; "
                   f"placed on {where}")
        self.set_conditions(key, {"QuotaReserved": ("True", "QuotaReserved", message),
                                  "Admitted": ("True", "Admitted", message),
                                  "Evicted": ("False", "Admitted", message)})
        self.event(key, "Normal", "Admitted", message)

    def terminate(self, job: str, attempt: int) -> None:
        """Suspend the object again (its controller deletes the pods), its templates
        restored."""
        with self._lock:
            known = self._launched.get(job)
            if known is None or known.attempt != attempt or known.stopped_at is not None:
                return
            known.stopped_at = time.time()
            key = known.key
        self.gates.drop(job, attempt)
        with self._lock:
            if key not in self._objects:  # deleted: nothing left to stop
                return

        def restored(obj: Object) -> Object | None:
            new = copy.deepcopy(obj)
            annotations = new["metadata"].get("annotations") or {}
            original = annotations.pop(ORIGINAL_ANNOTATION, None)
            annotations.pop(ADMITTED_ANNOTATION, None)
            # no record of the templates before: Phalanx never changed them
            paths = key.adapter.templates(new) if original else []
            infos = key.adapter.pod_set_infos
            if infos is not None and original:
                put(new, infos, None)
                paths = []
            befores = _originals(original, len(paths))
            for path, before in zip(paths, befores, strict=True):
                template = at(new, path)
                labels = (template.get("metadata") or {}).get("labels") or {}
                labels.pop(POD_LABEL, None)
                labels.pop(ATTEMPT_LABEL, None)
                labels.pop(POD_SET_LABEL, None)
                if not labels:
                    (template.get("metadata") or {}).pop("labels", None)
                if template.get("metadata") == {}:
                    template.pop("metadata")
                set_or_drop(template.setdefault("spec", {}), "affinity", before.get("affinity"))
                set_or_drop(template["spec"], "tolerations", before.get("tolerations"))
                if infos is None:
                    set_or_drop(template["spec"], "schedulingGates",
                                before.get("schedulingGates"))
            put(new, key.adapter.suspend, True)
            return new

        if not self._rewrite(key, restored):
            return
        message = (f"Phalanx stopped job {job} (attempt {attempt}): preempted, evicted or "
                   f"cancelled; `phalanx describe {job}` says why and what it waits for")
        self.set_conditions(key, {"QuotaReserved": ("False", "Pending", message),
                                  "Admitted": ("False", "Evicted", message),
                                  "Evicted": ("True", "Preempted", message)})
        self.event(key, "Normal", "Evicted", message)

    def _rewrite(self, key: ObjectKey, change: Callable[[Object], Object | None]) -> bool:
        """Patch the object as ``change`` makes it of the object read afresh (None: as it
        is), guarded by its resourceVersion; False when it is gone or left as it is."""
        for tries in range(PATCH_TRIES):
            try:
                obj = self.client.get(key.path)
            except KubeError as exc:
                if exc.status == 404:
                    return False
                raise
            obj.setdefault("apiVersion", key.kind[0])
            obj.setdefault("kind", key.kind[1])
            new = change(obj)
            if new is None:
                return False
            patch = merge_diff(obj, new)
            patch.setdefault("metadata", {})["resourceVersion"] = \
                obj["metadata"]["resourceVersion"]
            try:
                self.client.patch(key.path, patch)
                return True
            except KubeError as exc:
                if exc.status == 404:
                    return False
                if exc.status != 409 or tries == PATCH_TRIES - 1:
                    raise
        return False

    def admitted_pod(self, pod: Object) -> bool:
        """Whether ``pod`` is one of an object Phalanx admitted (made from its templates,
        in its namespace): the node inventory counts it as Phalanx's."""
        meta = pod.get("metadata") or {}
        job = (meta.get("labels") or {}).get(POD_LABEL)
        with self._lock:
            known = self._launched.get(str(job)) if job else None
            return known is not None and known.key.namespace == meta.get("namespace")

    def forget(self, job: str, attempt: int) -> None:
        with self._lock:
            known = self._launched.get(job)
            if known is not None and known.attempt == attempt:
                del self._launched[job]
        self.gates.drop(job, attempt)

    def observe(self) -> list[PodState]:
        """The launched attempts' pods, as their objects' status counts them."""
        with self._lock:
            launched = [(job, k, self._objects.get(k.key)) for job, k in self._launched.items()]
        states: list[PodState] = []
        for job, known, obj in launched:
            progress = known.key.adapter.progress(obj) if obj is not None else Progress()
            states.extend(_pods_of(job, known, progress, gone=obj is None))
        return states

    def _gang_waiting(self, job: str, have: int, size: int) -> None:
        self._say(job, "GangWaiting", f"{have} of the {size} pods of job {job} exist; Phalanx "
                  f"keeps them gated ({GATE}) until the whole gang does")

    def _gang_released(self, job: str, nodes: list[str]) -> None:
        self._say(job, "GangReleased", f"all pods of job {job} exist: un-gated onto "
                  f"{', '.join(nodes) or 'the placed nodes'}")

    def _say(self, job: str, reason: str, message: str) -> None:
        with self._lock:
            known = self._launched.get(job)
        if known is not None:
            self.event(known.key, "Normal", reason, message)

    # ------------------------------------------------------------------ status and events
    def set_conditions(self, key: ObjectKey,
                       wanted: dict[str, tuple[str, str, str]]) -> None:
        """Write Phalanx's conditions on the object's status (others left as they are)."""
        now = now_rfc3339()
        for _ in range(PATCH_TRIES):
            try:
                current = self.client.get(f"{key.path}/status")
            except KubeError as exc:
                log.info("cannot read the status of %s: %s", key, exc)
                return
            conditions = [c for c in (current.get("status") or {}).get("conditions") or []
                          if c.get("type") not in wanted]
            for kind, (status, reason, message) in wanted.items():
                conditions.append({"type": kind, "status": status, "reason": reason,
                                   "message": message, "lastTransitionTime": now,
                                   "lastProbeTime": now})
            try:
                self.client.patch(f"{key.path}/status", {
                    "metadata": {"resourceVersion": current["metadata"]["resourceVersion"]},
                    "status": {"conditions": conditions}})
                return
            except KubeError as exc:
                if exc.status != 409:  # 409: its controller wrote first; read again
                    log.info("cannot write the status of %s: %s", key, exc)
                    return

    def event(self, key: ObjectKey, kind: str, reason: str, message: str) -> None:
        now = now_rfc3339()
        try:
            self.client.create(f"/api/v1/namespaces/{quote(key.namespace, safe='')}/events", {
                "apiVersion": "v1", "kind": "Event",
                "metadata": {"name": f"{key.name}.{time.time_ns():x}",
                             "namespace": key.namespace},
                "involvedObject": {"apiVersion": key.kind[0], "kind": key.kind[1],
                                   "name": key.name, "namespace": key.namespace},
                "type": kind, "reason": reason, "message": message[:1024],
                "source": {"component": "phalanx"}, "reportingComponent": "phalanx",
                "firstTimestamp": now, "lastTimestamp": now, "count": 1,
            })
        except KubeError as exc:  # an event is a courtesy: never fails what it reports
            log.info("cannot record an event on %s: %s", key, exc)


def _scheduling(template: Any) -> Object:
    spec = (template or {}).get("spec") or {}
    return {"affinity": spec.get("affinity"), "tolerations": spec.get("tolerations"),
            "schedulingGates": spec.get("schedulingGates")}


def _originals(annotation: str | None, count: int) -> list[Object]:
    """The templates' scheduling fields kept in ``ORIGINAL_ANNOTATION`` (a Job's as one
    mapping, as it once was), one per template."""
    found = json.loads(annotation) if annotation else []
    found = [found] if isinstance(found, dict) else list(found)
    return (found + [{}] * count)[:count]


def _default_queue(namespace: Object) -> str | None:
    value = ((namespace.get("metadata") or {}).get("annotations") or {}).get(
        DEFAULT_QUEUE_ANNOTATION)
    return str(value) if value else None


def _pods_of(job: str, known: _Launched, progress: Progress, *, gone: bool) -> list[PodState]:
    """One state per pod of the gang, from what the object's status says."""
    started = timestamp(progress.started)
    refs = [(name, index) for name, replicas in known.pod_sets for index in range(replicas)]

    def state(rank: int, phase: PodPhase, **extra: Any) -> PodState:
        name, index = refs[rank]
        ref = PodRef(job=job, attempt=known.attempt, pod_set=name, index=index, rank=rank)
        return PodState(ref=ref, node="", phase=phase, started_at=started, **extra)

    ranks = range(len(refs))
    if progress.finished == SUCCEEDED:
        return [state(i, PodPhase.SUCCEEDED, exit_code=0, reason="Completed",
                      finished_at=timestamp(progress.completed)) for i in ranks]
    if progress.finished == FAILED:
        return [state(i, PodPhase.FAILED, reason=progress.reason or FAILED, failure="user")
                for i in ranks]
    if known.stopped_at is not None and (gone or progress.running == 0):
        return [state(i, PodPhase.FAILED, reason=TERMINATED) for i in ranks]
    running = len(refs) if progress.all_running else min(len(refs), progress.running)
    return [state(i, PodPhase.RUNNING if i < running else PodPhase.PENDING) for i in ranks]
