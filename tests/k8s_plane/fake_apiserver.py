"""A small Kubernetes API server over real HTTP on loopback, for the plane's tests.

It keeps objects in memory and speaks the API's wire protocol for what the
plane uses: namespaced pods, services, configmaps, secrets, events and scheduler-plugins
podgroups, coordination.k8s.io leases, batch/v1 jobs, JobSets (``jobset.x-k8s.io/v1alpha2``)
PyTorchJobs (``kubeflow.org/v1``) and AppWrappers (``workload.codeflare.dev/v1beta2``, their
components immutable as AppWrapper's webhook keeps them) (cluster-wide list and watch, a
status subresource;
``fake_jobs.py`` plays the Job and JobSet controllers and the training operator), KubeRay
rayclusters, podtemplates and cluster-autoscaler provisioningrequests (``autoscaling.x-k8s.io/v1``: validated as the CRD
is, spec immutable, status written only through its status subresource); cluster-scoped
nodes and namespaces; list with label and field
selectors; watch (chunked JSON lines from a resourceVersion, objects entering or
leaving a selector as ADDED/DELETED, an ERROR 410 event when the version was
compacted away); create (409 when it exists), get, merge patch, delete (with
graceful pod deletion and ownerReference cascade); pods/log with follow;
discovery of the podgroups API, and KubeRay's ray.io/v1 rayclusters when installed
(``kuberay=True``; ``fake_kuberay.py`` plays its operator); and fault injection (the next N requests to a
path answer 429, 500, 410, ...).

A built-in kubelet plays pods: ``run_pod`` binds a pod to the node its affinity
names, marks it Running, writes its log, and finishes it; ``autopilot`` does
that to every pod created. As the kube-scheduler, it never binds a pod that carries
scheduling gates: autopilot waits until they are all removed (or the pod is gone).
"""

from __future__ import annotations

import copy
import itertools
import json
import re
import threading
import time
import uuid
from dataclasses import dataclass
from datetime import UTC, datetime
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from tests.k8s_plane.audit import Access

Object = dict[str, Any]
NAMESPACED = ("pods", "services", "configmaps", "secrets", "events", "podgroups", "rayclusters",
              "podtemplates", "provisioningrequests", "leases", "jobs", "jobsets", "pytorchjobs",
              "appwrappers")
KINDS = {"pods": "Pod", "services": "Service", "configmaps": "ConfigMap", "secrets": "Secret",
         "events": "Event", "podgroups": "PodGroup", "nodes": "Node", "namespaces": "Namespace",
         "rayclusters": "RayCluster", "podtemplates": "PodTemplate",
         "provisioningrequests": "ProvisioningRequest", "leases": "Lease", "jobs": "Job",
         "jobsets": "JobSet", "pytorchjobs": "PyTorchJob", "appwrappers": "AppWrapper"}
_NAME = re.compile(r"^[a-z0-9]([-a-z0-9.]*[a-z0-9])?$")


def now_iso() -> str:
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def status_body(code: int, reason: str, message: str) -> Object:
    return {"kind": "Status", "apiVersion": "v1", "status": "Failure", "code": code,
            "reason": reason, "message": message}


def merge_patch(target: Any, patch: Any) -> Any:
    """RFC 7386."""
    if not isinstance(patch, dict):
        return copy.deepcopy(patch)
    out = dict(target) if isinstance(target, dict) else {}
    for key, value in patch.items():
        if value is None:
            out.pop(key, None)
        else:
            out[key] = merge_patch(out.get(key), value)
    return out


def _lookup(obj: Object, path: str) -> str:
    value: Any = obj
    for part in path.split("."):
        value = value.get(part) if isinstance(value, dict) else None
    return "" if value is None else str(value)


def matches(obj: Object, labels: str | None, fields: str | None) -> bool:
    have = obj.get("metadata", {}).get("labels") or {}
    for term in filter(None, (t.strip() for t in (labels or "").split(","))):
        if "!=" in term:
            k, v = term.split("!=", 1)
            if have.get(k) == v:
                return False
        elif "=" in term:
            k, v = term.replace("==", "=").split("=", 1)
            if have.get(k) != v:
                return False
        elif term.startswith("!"):
            if term[1:] in have:
                return False
        elif term not in have:
            return False
    for term in filter(None, (t.strip() for t in (fields or "").split(","))):
        if "!=" in term:
            k, v = term.split("!=", 1)
            if _lookup(obj, k) == v:
                return False
        else:
            k, v = term.replace("==", "=").split("=", 1)
            if _lookup(obj, k) != v:
                return False
    return True


@dataclass
class Fault:
    pattern: re.Pattern[str]
    status: int
    count: int
    method: str | None
    watch: bool | None
    retry_after: str | None


@dataclass
class Change:
    rv: int
    plural: str
    namespace: str
    old: Object | None
    new: Object | None  # None: deleted (old is the last state)


class FakeAPIServer:
    def __init__(self, *, pod_groups: bool = False, namespaces: tuple[str, ...] = ("default",),
                 kill_delay: float = 0.2, kuberay: bool = False,
                 provisioning_requests: bool = True) -> None:
        self.pod_groups = pod_groups
        self.kuberay = kuberay  # KubeRay's CRDs installed: ray.io/v1 rayclusters served
        self.provisioning_requests = provisioning_requests  # the CRD is installed
        self.kill_delay = kill_delay
        self.lock = threading.RLock()
        self.changed = threading.Condition(self.lock)
        self.objects: dict[tuple[str, str, str], Object] = {}
        self.history: list[Change] = []
        self.compacted = 0  # versions at or below this are gone from the history
        self.rv = 1
        self.faults: list[Fault] = []
        self.requests: list[tuple[str, str, int]] = []
        self.accesses: list[Access] = []  # each request as RBAC sees it (audit.py)
        self.logs: dict[tuple[str, str], bytearray] = {}
        self.autopilot: dict[str, Any] | None = None
        self.closing = False
        self.hold_watches = False  # end open watches and hold new ones until cleared
        for ns in namespaces:
            self.add("namespaces", {"metadata": {"name": ns}})
        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), _handler(self))
        self.httpd.daemon_threads = True
        self.thread = threading.Thread(target=self.httpd.serve_forever, args=(0.05,),
                                       daemon=True)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.httpd.server_address[1]}"

    def start(self) -> FakeAPIServer:
        self.thread.start()
        return self

    def stop(self) -> None:
        with self.lock:
            self.closing = True
            self.changed.notify_all()
        self.httpd.shutdown()
        self.httpd.server_close()

    def kubeconfig(self, namespace: str = "default") -> str:
        return json.dumps({
            "apiVersion": "v1", "kind": "Config", "current-context": "fake",
            "clusters": [{"name": "fake", "cluster": {"server": self.url}}],
            "users": [{"name": "fake", "user": {"token": "fake-token"}}],
            "contexts": [{"name": "fake", "context": {"cluster": "fake", "user": "fake",
                                                      "namespace": namespace}}],
        })

    # ------------------------------------------------------------------ store
    def _record(self, plural: str, ns: str, old: Object | None, new: Object | None) -> None:
        self.history.append(Change(self.rv, plural, ns, old, new))
        self.changed.notify_all()

    def add(self, plural: str, obj: Object, namespace: str = "") -> Object:
        """Create an object directly (test setup); returns the stored copy."""
        with self.lock:
            obj = copy.deepcopy(obj)
            meta = obj.setdefault("metadata", {})
            if namespace:
                meta["namespace"] = namespace
            ns = meta.get("namespace", "") if plural in NAMESPACED else ""
            key = (plural, ns, meta["name"])
            if key in self.objects:
                raise KeyError(key)
            self.rv += 1
            meta.update(uid=str(uuid.uuid4()), resourceVersion=str(self.rv),
                        creationTimestamp=now_iso())
            obj.setdefault("kind", KINDS.get(plural, plural))
            if plural == "pods":
                obj.setdefault("status", {"phase": "Pending"})
            self.objects[key] = obj
            self._record(plural, ns, None, copy.deepcopy(obj))
            stored = copy.deepcopy(obj)
        if plural == "pods" and self.autopilot is not None:
            pilot = dict(self.autopilot)
            threading.Thread(target=self._autopilot, args=(ns, meta["name"], pilot),
                             daemon=True).start()
        return stored

    def get(self, plural: str, name: str, namespace: str = "") -> Object | None:
        with self.lock:
            found = self.objects.get((plural, namespace, name))
            return copy.deepcopy(found) if found else None

    def list(self, plural: str, namespace: str | None = None) -> list[Object]:
        with self.lock:
            return [copy.deepcopy(o) for (p, ns, _), o in sorted(self.objects.items())
                    if p == plural and (namespace is None or ns == namespace)]

    def update(self, plural: str, name: str, patch: Object, namespace: str = "") -> Object:
        with self.lock:
            key = (plural, namespace, name)
            old = self.objects[key]
            new = merge_patch(old, patch)
            self.rv += 1
            new["metadata"]["resourceVersion"] = str(self.rv)
            self.objects[key] = new
            self._record(plural, namespace, copy.deepcopy(old), copy.deepcopy(new))
            return copy.deepcopy(new)

    def remove(self, plural: str, name: str, namespace: str = "") -> Object | None:
        """Delete at once, and cascade to dependents (as the garbage collector would)."""
        with self.lock:
            obj = self.objects.pop((plural, namespace, name), None)
            if obj is None:
                return None
            self.rv += 1
            last = copy.deepcopy(obj)
            last["metadata"]["resourceVersion"] = str(self.rv)
            last["metadata"].setdefault("deletionTimestamp", now_iso())
            self._record(plural, namespace, obj, None)
            self.history[-1].old = last
            uid = obj["metadata"]["uid"]
            for (p, ns, n), other in list(self.objects.items()):
                owners = other.get("metadata", {}).get("ownerReferences") or []
                if any(o.get("uid") == uid for o in owners):
                    self.delete(p, n, ns, grace=None)
            return last

    def delete(self, plural: str, name: str, namespace: str = "",
               grace: float | None = None) -> Object | None:
        """Delete as the API does: a pod with a grace period is stopped by the kubelet first."""
        with self.lock:
            obj = self.objects.get((plural, namespace, name))
            if obj is None:
                return None
            phase = (obj.get("status") or {}).get("phase")
            running = plural == "pods" and phase not in ("Succeeded", "Failed") \
                and obj.get("spec", {}).get("nodeName")
            if not running or grace == 0:
                return self.remove(plural, name, namespace)
            if obj["metadata"].get("deletionTimestamp"):
                return copy.deepcopy(obj)
            updated = self.update(plural, name, {"metadata": {
                "deletionTimestamp": now_iso(), "deletionGracePeriodSeconds": int(grace or 30),
            }}, namespace)
        timer = threading.Timer(self.kill_delay, self._kill, args=(namespace, name))
        timer.daemon = True
        timer.start()
        return updated

    def _kill(self, namespace: str, name: str) -> None:
        with self.lock:
            if ("pods", namespace, name) not in self.objects:
                return
            self.finish_pod(namespace, name, exit_code=143, reason="Error")
            self.remove("pods", name, namespace)

    def compact(self) -> None:
        """Forget the change history: watches from an older version get 410 Gone."""
        with self.lock:
            self.history.clear()
            self.compacted = self.rv

    def set_hold_watches(self, hold: bool) -> None:
        with self.lock:
            self.hold_watches = hold
            self.changed.notify_all()

    def inject(self, path: str, status: int, count: int = 1, *, method: str | None = None,
               watch: bool | None = None, retry_after: str | None = None) -> None:
        """The next ``count`` requests whose path matches the regex ``path`` answer ``status``."""
        with self.lock:
            self.faults.append(Fault(re.compile(path), status, count, method, watch,
                                     retry_after))

    def count(self, method: str, path: str, status: int | None = None) -> int:
        with self.lock:
            return sum(1 for m, p, s in self.requests
                       if m == method and re.fullmatch(path, p) and (status is None or s == status))

    # ------------------------------------------------------------------ the kubelet
    def add_node(self, name: str, *, cpu: str = "8", memory: str = "32Gi", gpus: int = 0,
                 labels: dict[str, str] | None = None, taints: list[Object] | None = None,
                 ready: bool = True, unschedulable: bool = False, pods: str = "110") -> Object:
        allocatable = {"cpu": cpu, "memory": memory, "pods": pods, "ephemeral-storage": "100Gi"}
        if gpus:
            allocatable["nvidia.com/gpu"] = str(gpus)
        spec: Object = {"taints": taints} if taints else {}
        if unschedulable:
            spec["unschedulable"] = True
        return self.add("nodes", {
            "metadata": {"name": name, "labels": {"kubernetes.io/hostname": name, **(labels or {})}},
            "spec": spec,
            "status": {"allocatable": allocatable, "capacity": allocatable, "conditions": [
                {"type": "Ready", "status": "True" if ready else "False",
                 "reason": "KubeletReady" if ready else "KubeletNotReady",
                 "message": "kubelet is posting ready status" if ready else "PLEG is not healthy"},
            ]},
        })

    def bind(self, namespace: str, name: str) -> str:
        pod = self.objects[("pods", namespace, name)]
        if pod["spec"].get("schedulingGates"):
            raise AssertionError(f"pod {namespace}/{name} is gated: no scheduler binds it")
        terms = (pod["spec"].get("affinity", {}).get("nodeAffinity", {})
                 .get("requiredDuringSchedulingIgnoredDuringExecution", {})
                 .get("nodeSelectorTerms", [{}]))
        allowed: set[str] | None = None  # every requirement of the first term holds
        for field in terms[0].get("matchFields") or []:
            values = set(field.get("values") or [])
            allowed = values if allowed is None else allowed & values
        node = pod["spec"].get("nodeName") or min(allowed or {"node-0"})
        return str(node)

    def start_pod(self, namespace: str, name: str) -> None:
        with self.lock:
            node = self.bind(namespace, name)
            self.update("pods", name, {
                "spec": {"nodeName": node},
                "status": {"phase": "Running", "podIP": "10.0.0.1", "hostIP": "10.1.0.1",
                           "startTime": now_iso(), "containerStatuses": [{
                               "name": "main", "ready": True, "restartCount": 0,
                               "image": "img", "imageID": "", "started": True,
                               "state": {"running": {"startedAt": now_iso()}}}]},
            }, namespace)

    def write_log(self, namespace: str, name: str, data: bytes) -> None:
        with self.lock:
            self.logs.setdefault((namespace, name), bytearray()).extend(data)
            self.changed.notify_all()

    def finish_pod(self, namespace: str, name: str, *, exit_code: int = 0,
                   reason: str | None = None, pod_reason: str | None = None) -> None:
        with self.lock:
            pod = self.objects[("pods", namespace, name)]
            started = (pod.get("status", {}).get("containerStatuses") or [{}])[0] \
                .get("state", {}).get("running", {}).get("startedAt", now_iso())
            terminated = {"exitCode": exit_code, "startedAt": started, "finishedAt": now_iso(),
                          "reason": reason or ("Completed" if exit_code == 0 else "Error")}
            status: Object = {
                "phase": "Succeeded" if exit_code == 0 and not pod_reason else "Failed",
                "containerStatuses": [{"name": "main", "ready": False, "restartCount": 0,
                                       "image": "img", "imageID": "", "started": False,
                                       "state": {"terminated": terminated}}],
            }
            if pod_reason:
                status["reason"] = pod_reason
            self.update("pods", name, {"status": status}, namespace)

    def set_waiting(self, namespace: str, name: str, reason: str) -> None:
        with self.lock:
            node = self.bind(namespace, name)
            self.update("pods", name, {"spec": {"nodeName": node}, "status": {
                "phase": "Pending", "containerStatuses": [{
                    "name": "main", "ready": False, "restartCount": 0, "image": "img",
                    "imageID": "", "state": {"waiting": {"reason": reason}}}]}}, namespace)

    def _autopilot(self, namespace: str, name: str, pilot: dict[str, Any]) -> None:
        with self.lock:  # gated: not scheduled until its gates are removed
            while not self.closing:
                pod = self.objects.get(("pods", namespace, name))
                if pod is None or not pod["spec"].get("schedulingGates"):
                    break
                self.changed.wait(1.0)
        time.sleep(pilot.get("start_after", 0.1))
        try:
            self.start_pod(namespace, name)
            self.write_log(namespace, name, f"hello from {name}\n".encode())
            time.sleep(pilot.get("run_for", 0.3))
            self.finish_pod(namespace, name, exit_code=pilot.get("exit_code", 0))
        except KeyError:  # deleted meanwhile
            pass

    # ------------------------------------------------------------------ HTTP side
    def take_fault(self, method: str, path: str, is_watch: bool) -> Fault | None:
        with self.lock:
            for fault in self.faults:
                if fault.count > 0 and fault.pattern.search(path) and (
                    fault.method in (None, method)
                ) and (fault.watch is None or fault.watch == is_watch):
                    fault.count -= 1
                    return fault
        return None


_seq = itertools.count()


def _handler(api: FakeAPIServer) -> type[BaseHTTPRequestHandler]:
    from tests.k8s_plane.fake_routes import Handler

    return type(f"Handler{next(_seq)}", (Handler,), {"api": api})
