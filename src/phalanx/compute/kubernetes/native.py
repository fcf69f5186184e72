"""Kubernetes-native admission: Jobs created with kubectl, queued and admitted by Phalanx.

Namespaces opt in by a label selector (as Kueue's ``managedJobsNamespaceSelector``); in
them a Job is managed when it carries ``kueue.x-k8s.io/queue-name`` or its namespace names
a default queue (annotation ``phalanx.dev/default-queue``, as
``manageJobsWithoutQueueName``). Two informers (list, then watch resumed from the last
resourceVersion) follow the namespaces and the Jobs. A managed Job that runs without
Phalanx's admission is suspended at once (what the admission webhook does at creation, for
Jobs created while it was down or before Phalanx started); the control plane makes each
managed Job a Phalanx job (``control/native.py``) and stores it before anything else.

When the control plane launches that job's admitted attempt, the Job is unsuspended with its
pods pinned (a required node affinity) to the nodes Phalanx placed the gang on, tolerating
their taints, which is what the flavor's node labels and tolerations select, and gated
(``schedulingGates``); the Job controller then makes the pods, and once all of the gang's
exist Phalanx un-gates each onto its own placed node (``gates.py``). The attempt's state is
read from the Job's status (active, ready, succeeded, conditions). Stopping the attempt
(preemption, cancel) suspends the Job again and restores its template, as Kueue's eviction
does; deleting the Job ends the Phalanx job. Conditions (``QuotaReserved``,
``Admitted``, ``Evicted``) and Events on the Job say what Phalanx did, where kubectl looks.

Nothing here decides anything: ``phalanx.spec.manifests.native`` says what a Job means,
the scheduler admits it, the control loop launches and stops it.
"""

from __future__ import annotations

import json
import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any
from urllib.parse import quote

from phalanx.compute.base import PodPhase, PodRef, PodState
from phalanx.compute.kubernetes.client import KubeClient, KubeError, Object
from phalanx.compute.kubernetes.gates import (
    ATTEMPT_LABEL,
    GATE,
    POD_LABEL,
    Gang,
    GangGates,
    pinned,
    with_gate,
)
from phalanx.compute.kubernetes.health import now_rfc3339
from phalanx.compute.kubernetes.status import TERMINATED, timestamp
from phalanx.compute.kubernetes.watch import Informer
from phalanx.scheduler.types import Admission
from phalanx.spec.manifests.native import (
    ADMITTED_ANNOTATION,
    DEFAULT_QUEUE_ANNOTATION,
    JOB_ANNOTATION,
    OWNER_ANNOTATION,
    job_name,
    managed_kind,
    queue_of,
)
from phalanx.spec.resources import JobSpec

log = logging.getLogger("phalanx.compute.kubernetes")

JOBS = "/apis/batch/v1/jobs"
# The template's scheduling fields as they were before Phalanx injected its own (JSON).
ORIGINAL_ANNOTATION = "phalanx.dev/original-scheduling"


def job_path(namespace: str, name: str) -> str:
    return f"/apis/batch/v1/namespaces/{quote(namespace, safe='')}/jobs/{quote(name, safe='')}"


@dataclass(frozen=True, slots=True)
class ManagedObject:
    """A managed object, the job it runs as, and the queue its namespace gives it."""

    job: str
    obj: Object
    default_queue: str | None


@dataclass
class _Launched:
    attempt: int
    namespace: str
    name: str
    pod_set: str
    replicas: int
    stopped_at: float | None = None


class NativeJobs:
    """Follows managed Jobs; suspends, unsuspends and reports them for the plane."""

    def __init__(self, client: KubeClient, selector: str, *,
                 on_change: Callable[[], None] = lambda: None,
                 read_timeout: float = 60.0) -> None:
        self.client = client
        self.selector = selector
        self.on_change = on_change
        self._lock = threading.RLock()
        self._namespaces: dict[str, str | None] = {}  # managed namespace -> its default queue
        self._jobs: dict[tuple[str, str], Object] = {}  # every Job seen, by (namespace, name)
        self._by_job: dict[str, tuple[str, str]] = {}  # Phalanx job -> (namespace, name)
        self._deleted: set[str] = set()  # jobs whose object was deleted, not yet taken
        self._launched: dict[str, _Launched] = {}
        self.namespace_informer = Informer(
            client, "/api/v1/namespaces", label_selector=selector, name="managed-namespaces",
            on_list=self._list_namespaces, on_event=self._namespace_event,
            read_timeout=read_timeout)
        self.job_informer = Informer(client, JOBS, name="managed-jobs", on_list=self._list_jobs,
                                     on_event=self._job_event, read_timeout=read_timeout)
        self.gates = GangGates(client, on_waiting=self._gang_waiting,
                               on_released=self._gang_released, read_timeout=read_timeout)

    def start(self, timeout: float = 30.0) -> None:
        self.namespace_informer.start()
        self.namespace_informer.synced.wait(timeout)
        self.job_informer.start()
        self.job_informer.synced.wait(timeout)
        self.gates.informer.start()
        self.gates.informer.synced.wait(timeout)

    def stop(self) -> None:
        self.gates.informer.stop()
        self.job_informer.stop()
        self.namespace_informer.stop()

    @property
    def synced(self) -> bool:
        return self.namespace_informer.synced.is_set() and self.job_informer.synced.is_set()

    # ------------------------------------------------------------------ what is managed
    def managed(self) -> list[ManagedObject]:
        """Every managed object now in the cluster, with the job it runs as."""
        with self._lock:
            out = []
            for (namespace, name), obj in sorted(self._jobs.items()):
                if self._is_managed(obj):
                    out.append(ManagedObject(job_name(namespace, name), obj,
                                             self._namespaces.get(namespace)))
            return out

    def take_deleted(self) -> set[str]:
        """The jobs whose managed object was deleted since the last call."""
        with self._lock:
            deleted, self._deleted = self._deleted, set()
            return deleted

    def admission_patch(self, obj: Object, user: str | None) -> list[Object]:
        """The JSONPatch a mutating admission webhook answers for ``obj`` being created:
        a managed Job is created suspended, its owner the user who created it; nothing for
        any other object."""
        obj = {"apiVersion": "batch/v1", "kind": "Job", **obj}
        with self._lock:
            if not self._is_managed(obj):
                return []
        meta = obj.get("metadata") or {}
        patch: list[Object] = [{"op": "add", "path": "/spec/suspend", "value": True}]
        namespace, name = str(meta.get("namespace") or ""), str(meta.get("name") or "")
        annotations = {JOB_ANNOTATION: job_name(namespace, name)} if name else {}
        if user:
            annotations[OWNER_ANNOTATION] = user
        if not annotations:
            return patch
        if not isinstance(meta.get("annotations"), dict):
            patch.append({"op": "add", "path": "/metadata/annotations", "value": annotations})
        else:
            patch += [{"op": "add", "path": "/metadata/annotations/" + _pointer(key),
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
        if namespace not in self._namespaces or not managed_kind(obj):
            return False
        return queue_of(obj, self._namespaces[namespace]) is not None

    # ------------------------------------------------------------------ informers
    def _list_namespaces(self, items: list[Object], version: str) -> None:
        with self._lock:
            self._namespaces = {i["metadata"]["name"]: _default_queue(i) for i in items}
            jobs = list(self._jobs.values())
        for obj in jobs:
            self._seen(obj)

    def _namespace_event(self, kind: str, obj: Object) -> None:
        name = obj["metadata"]["name"]
        with self._lock:
            if kind == "DELETED":
                self._namespaces.pop(name, None)
                return
            self._namespaces[name] = _default_queue(obj)
            jobs = [o for (ns, _), o in self._jobs.items() if ns == name]
        for job in jobs:  # a namespace that opts in now: its Jobs are managed from now on
            self._seen(job)

    def _list_jobs(self, items: list[Object], version: str) -> None:
        with self._lock:
            before = set(self._by_job)
            self._jobs = {}
            self._by_job = {}
        for obj in items:
            obj.setdefault("apiVersion", "batch/v1")
            obj.setdefault("kind", "Job")
            self._seen(obj)
        with self._lock:
            self._deleted |= before - set(self._by_job)
        self.on_change()

    def _job_event(self, kind: str, obj: Object) -> None:
        obj.setdefault("apiVersion", "batch/v1")
        obj.setdefault("kind", "Job")
        meta = obj["metadata"]
        key = (meta.get("namespace") or "", meta["name"])
        if kind == "DELETED":
            with self._lock:
                self._jobs.pop(key, None)
                job = job_name(*key)
                if self._by_job.pop(job, None) is not None:
                    self._deleted.add(job)
        else:
            self._seen(obj)
        self.on_change()

    def _seen(self, obj: Object) -> None:
        meta = obj["metadata"]
        key = (meta.get("namespace") or "", meta["name"])
        with self._lock:
            self._jobs[key] = obj
            if not self._is_managed(obj):
                return
            self._by_job[job_name(*key)] = key
        annotations = meta.get("annotations") or {}
        running = not (obj.get("spec") or {}).get("suspend")
        if running and ADMITTED_ANNOTATION not in annotations and not meta.get(
                "deletionTimestamp"):
            self._suspend_unadmitted(key, obj)

    def _suspend_unadmitted(self, key: tuple[str, str], obj: Object) -> None:
        """Hold a Job Phalanx has not admitted (the webhook's work, had it seen it)."""
        job = job_name(*key)
        try:
            self.client.patch(job_path(*key), {
                "metadata": {"annotations": {JOB_ANNOTATION: job},
                             "resourceVersion": obj["metadata"].get("resourceVersion")},
                "spec": {"suspend": True},
            })
        except KubeError as exc:  # 409: changed meanwhile; the watch brings it back
            if exc.status not in (404, 409):
                log.warning("could not suspend Job %s/%s: %s", *key, exc)
            return
        log.info("suspended Job %s/%s until Phalanx admits it (job %s)", *key, job)
        self.event(key, "Normal", "Suspended", f"held until Phalanx admits job {job}")

    # ------------------------------------------------------------------ the plane's side
    def launch(self, job: JobSpec, attempt: int, admission: Admission,
               tolerations: list[Object]) -> None:
        """Unsuspend the Job for ``attempt``: pods pinned to the placed nodes."""
        with self._lock:
            key = self._by_job.get(job.name)
            known = self._launched.get(job.name)
            obj = self._jobs.get(key) if key else None
        if known is not None and known.attempt == attempt:
            return
        if key is None or obj is None:
            raise KubeError(404, "NotFound", f"the object of job {job.name} is gone")
        tracked = _Launched(attempt, key[0], key[1], job.pod_sets[0].name,
                            sum(p.replicas for p in job.pod_sets))
        placed = tuple(n for ps in admission.pod_sets for n in ps.nodes)
        gang = Gang(job.name, key[0], attempt, tracked.replicas, placed)
        annotations = (obj.get("metadata") or {}).get("annotations") or {}
        if annotations.get(ADMITTED_ANNOTATION) == str(attempt):  # launched before a restart
            with self._lock:
                self._launched[job.name] = tracked
            self.gates.expect(gang)  # what the last run left gated is released
            return
        nodes = sorted(set(placed))
        template_spec = ((obj.get("spec") or {}).get("template") or {}).get("spec") or {}
        original = annotations.get(ORIGINAL_ANNOTATION) or json.dumps({
            "affinity": template_spec.get("affinity"),
            "tolerations": template_spec.get("tolerations"),
            "schedulingGates": template_spec.get("schedulingGates")})
        before = json.loads(original)
        merged = list(before.get("tolerations") or [])
        merged += [t for t in tolerations if t not in merged]
        with self._lock:  # before its pods can appear: they are Phalanx's, not foreign
            self._launched[job.name] = tracked
        self.gates.expect(gang)
        self.client.patch(job_path(*key), {
            "metadata": {"annotations": {ADMITTED_ANNOTATION: str(attempt),
                                         JOB_ANNOTATION: job.name,
                                         ORIGINAL_ANNOTATION: original}},
            "spec": {"suspend": False, "template": {
                "metadata": {"labels": {POD_LABEL: job.name, ATTEMPT_LABEL: str(attempt)}},
                "spec": {"affinity": pinned(before.get("affinity"), nodes),
                         "tolerations": merged or None,
                         "schedulingGates": with_gate(before.get("schedulingGates"))}}},
        })
        where = ", ".join(nodes) or "no node"
        message = (f"Phalanx admitted job {job.name} (attempt {attempt}) in ClusterQueue "
                   f"{admission.cluster_queue}{' borrowing' if admission.borrowing else ''}; "
                   f"placed on {where}")
        self.set_conditions(key, {"QuotaReserved": ("True", "QuotaReserved", message),
                                  "Admitted": ("True", "Admitted", message),
                                  "Evicted": ("False", "Admitted", message)})
        self.event(key, "Normal", "Admitted", message)

    def terminate(self, job: str, attempt: int) -> None:
        """Suspend the Job again (its controller deletes the pods), its template restored."""
        with self._lock:
            known = self._launched.get(job)
            if known is None or known.attempt != attempt or known.stopped_at is not None:
                return
            known.stopped_at = time.time()
            key = (known.namespace, known.name)
            obj = self._jobs.get(key)
        self.gates.drop(job, attempt)
        if obj is None:  # deleted: nothing left to stop
            return
        annotations = (obj.get("metadata") or {}).get("annotations") or {}
        before = json.loads(annotations.get(ORIGINAL_ANNOTATION) or "{}")
        try:
            self.client.patch(job_path(*key), {
                "metadata": {"annotations": {ADMITTED_ANNOTATION: None,
                                             ORIGINAL_ANNOTATION: None}},
                "spec": {"suspend": True, "template": {
                    "metadata": {"labels": {POD_LABEL: None, ATTEMPT_LABEL: None}},
                    "spec": {"affinity": before.get("affinity"),
                             "tolerations": before.get("tolerations"),
                             "schedulingGates": before.get("schedulingGates")}}},
            })
        except KubeError as exc:
            if exc.status != 404:
                raise
            return
        message = (f"Phalanx stopped job {job} (attempt {attempt}): preempted, evicted or "
                   f"cancelled; `phalanx describe {job}` says why and what it waits for")
        self.set_conditions(key, {"QuotaReserved": ("False", "Pending", message),
                                  "Admitted": ("False", "Evicted", message),
                                  "Evicted": ("True", "Preempted", message)})
        self.event(key, "Normal", "Evicted", message)

    def admitted_pod(self, pod: Object) -> bool:
        """Whether ``pod`` is one of a Job Phalanx admitted (made from its template, in its
        namespace): the node inventory counts it as Phalanx's."""
        meta = pod.get("metadata") or {}
        job = (meta.get("labels") or {}).get(POD_LABEL)
        with self._lock:
            known = self._launched.get(str(job)) if job else None
            return known is not None and known.namespace == meta.get("namespace")

    def forget(self, job: str, attempt: int) -> None:
        with self._lock:
            known = self._launched.get(job)
            if known is not None and known.attempt == attempt:
                del self._launched[job]
        self.gates.drop(job, attempt)

    def observe(self) -> list[PodState]:
        """The launched attempts' pods, as the Jobs' status counts them."""
        with self._lock:
            launched = [(job, k, self._jobs.get((k.namespace, k.name)))
                        for job, k in self._launched.items()]
        states: list[PodState] = []
        for job, known, obj in launched:
            states.extend(_pods_of(job, known, obj))
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
            self.event((known.namespace, known.name), "Normal", reason, message)

    # ------------------------------------------------------------------ status and events
    def set_conditions(self, key: tuple[str, str],
                       wanted: dict[str, tuple[str, str, str]]) -> None:
        """Write Phalanx's conditions on the Job's status (others are left as they are)."""
        now = now_rfc3339()
        for _ in range(3):
            try:
                current = self.client.get(f"{job_path(*key)}/status")
            except KubeError as exc:
                log.info("cannot read the status of Job %s/%s: %s", *key, exc)
                return
            conditions = [c for c in (current.get("status") or {}).get("conditions") or []
                          if c.get("type") not in wanted]
            for kind, (status, reason, message) in wanted.items():
                conditions.append({"type": kind, "status": status, "reason": reason,
                                   "message": message, "lastTransitionTime": now,
                                   "lastProbeTime": now})
            try:
                self.client.patch(f"{job_path(*key)}/status", {
                    "metadata": {"resourceVersion": current["metadata"]["resourceVersion"]},
                    "status": {"conditions": conditions}})
                return
            except KubeError as exc:
                if exc.status != 409:  # 409: the Job controller wrote first; read again
                    log.info("cannot write the status of Job %s/%s: %s", *key, exc)
                    return

    def event(self, key: tuple[str, str], kind: str, reason: str, message: str) -> None:
        namespace, name = key
        now = now_rfc3339()
        try:
            self.client.create(f"/api/v1/namespaces/{quote(namespace, safe='')}/events", {
                "apiVersion": "v1", "kind": "Event",
                "metadata": {"name": f"{name}.{time.time_ns():x}", "namespace": namespace},
                "involvedObject": {"apiVersion": "batch/v1", "kind": "Job", "name": name,
                                   "namespace": namespace},
                "type": kind, "reason": reason, "message": message[:1024],
                "source": {"component": "phalanx"}, "reportingComponent": "phalanx",
                "firstTimestamp": now, "lastTimestamp": now, "count": 1,
            })
        except KubeError as exc:  # an event is a courtesy: never fails what it reports
            log.info("cannot record an event on Job %s/%s: %s", namespace, name, exc)


def _pointer(key: str) -> str:
    """``key`` as one JSON Pointer token (RFC 6901)."""
    return key.replace("~", "~0").replace("/", "~1")


def _default_queue(namespace: Object) -> str | None:
    value = ((namespace.get("metadata") or {}).get("annotations") or {}).get(
        DEFAULT_QUEUE_ANNOTATION)
    return str(value) if value else None


def _pods_of(job: str, known: _Launched, obj: Object | None) -> list[PodState]:
    """One state per pod of the gang, from the Job's counts and conditions."""
    status = (obj or {}).get("status") or {}
    conditions = {c.get("type"): c for c in status.get("conditions") or []
                  if c.get("status") == "True"}
    active = int(status.get("active") or 0)
    ready = int(status.get("ready") or 0)
    started = timestamp(status.get("startTime"))
    finished = timestamp(status.get("completionTime"))

    def state(index: int, phase: PodPhase, **extra: Any) -> PodState:
        ref = PodRef(job=job, attempt=known.attempt, pod_set=known.pod_set, index=index,
                     rank=index)
        return PodState(ref=ref, node="", phase=phase, started_at=started, **extra)

    indexes = range(known.replicas)
    if "Complete" in conditions:
        return [state(i, PodPhase.SUCCEEDED, exit_code=0, reason="Completed",
                      finished_at=finished) for i in indexes]
    if "Failed" in conditions:
        reason = str(conditions["Failed"].get("reason") or "Failed")
        return [state(i, PodPhase.FAILED, reason=reason, failure="user") for i in indexes]
    if known.stopped_at is not None and (obj is None or active == 0):
        return [state(i, PodPhase.FAILED, reason=TERMINATED) for i in indexes]
    running = min(known.replicas, ready or active)
    return [state(i, PodPhase.RUNNING if i < running else PodPhase.PENDING) for i in indexes]
