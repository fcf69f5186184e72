"""KubeRay's RayCluster: how the Kubernetes plane runs a ``kind: ray`` job when KubeRay
is installed and the deployment asks for it (``ray.useKubeRay``).

Phalanx still decides everything a scheduler decides; KubeRay only makes the pods.
The RayCluster is created when Phalanx admits the job (the launch), never before,
so nothing runs while the job queues: that is what Kueue gets by creating a
RayCluster suspended and unsuspending it at admission. Each pod is a group of its
own: the head group, and one worker group of one replica per admitted worker, whose
template is the pod Phalanx would have created itself (its node affinity pinning it
to the node the scheduler placed it on, its requests and limits from the pod set,
the PodGroup and gang labels, its environment and hostname). The RayCluster carries
``ray.io/overwrite-container-cmd``, so KubeRay keeps Phalanx's commands: the same
``ray start`` flags, and for a Ray job the same submitter in the head pod, on every
plane (a RayJob would add a submitter pod Phalanx does not place nor count).

KubeRay names its pods itself: the plane knows them by their labels (job, attempt,
rank) instead (``PodBinding``). A pod KubeRay makes again after one failed is not
the attempt's: the failure already ended the gang. Stopping deletes the RayCluster
(KubeRay's pods go with it) and then each pod with the grace period.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from typing import Literal, cast

from phalanx.compute.kubernetes import objects
from phalanx.compute.kubernetes.client import KubeClient, KubeError, Object
from phalanx.compute.kubernetes.watch import Informer
from phalanx.errors import SpecError
from phalanx.kinds import PodRef
from phalanx.kinds.ray import RAY_CLUSTER
from phalanx.spec.ray import HEAD

log = logging.getLogger("phalanx.compute.kubernetes")

GROUP, VERSION = "ray.io", "v1"
RESOURCE = RAY_CLUSTER  # what a framework names (operator_resource) to run as one
PLURAL = "rayclusters"
OVERWRITE_COMMAND = "ray.io/overwrite-container-cmd"
HEAD_GROUP = "headgroup"  # KubeRay's name for the head's group (its pods' ray.io/group)
DASHBOARD_PORT = "8265"

UseKubeRay = Literal["auto", "always", "never"]
MODES: tuple[UseKubeRay, ...] = ("auto", "always", "never")
VALUES_FIELD = "ray.useKubeRay"


def check_mode(text: str, field: str) -> UseKubeRay:
    mode = text.strip().lower()
    if mode not in MODES:
        raise SpecError(f"{text!r} is not auto, always or never", field=field,
                        fix="write auto (a RayCluster when KubeRay's CRDs are installed), "
                            "always (refuse to start without them) or never")
    return cast(UseKubeRay, mode)


def collection(namespace: str) -> str:
    return f"/apis/{GROUP}/{VERSION}/namespaces/{namespace}/{PLURAL}"


def served(client: KubeClient) -> bool:
    """Whether the API server serves KubeRay's RayCluster (``/apis/ray.io/v1``)."""
    try:
        found = client.get(f"/apis/{GROUP}/{VERSION}")
    except KubeError as exc:
        if exc.status not in (403, 404):
            log.warning("cannot tell whether KubeRay is installed: %s", exc)
        return False
    return any(r.get("name") == PLURAL for r in found.get("resources") or [])


def decide(mode: UseKubeRay, client: KubeClient) -> bool:
    """Whether Ray jobs run as RayClusters here (``always`` without KubeRay: refused)."""
    if mode == "never":
        return False
    if served(client):
        return True
    if mode == "always":
        raise SpecError(
            f"{VALUES_FIELD} is always, but the API server serves no RayCluster "
            f"({GROUP}/{VERSION})", field=VALUES_FIELD,
            fix="install KubeRay's operator and CRDs (v1.1 or later), or set "
                f"{VALUES_FIELD} to auto or never")
    return False


def group_name(ref: PodRef) -> str:
    """The KubeRay group of the pod of ``ref``: the head's, or a worker group of its own."""
    if ref.pod_set == HEAD:
        return HEAD_GROUP
    return objects.dns_label(f"{ref.pod_set}-{ref.index}")


def ray_cluster(plan: objects.AttemptPlan, pods: list[Object], owner: Object) -> Object:
    """The attempt's RayCluster, from the pods Phalanx would have created (rank order)."""
    head: Object | None = None
    workers = []
    for planned, pod in zip(plan.pods, pods, strict=True):
        meta = pod["metadata"]
        template = {"metadata": {"labels": dict(meta["labels"]),
                                 "annotations": dict(meta.get("annotations") or {})},
                    "spec": pod["spec"]}
        if planned.ref.pod_set == HEAD:
            head = {"serviceType": "ClusterIP", "rayStartParams": {}, "template": template}
        else:
            workers.append({"groupName": group_name(planned.ref), "replicas": 1,
                            "minReplicas": 1, "maxReplicas": 1, "rayStartParams": {},
                            "template": template})
    if head is None:
        raise SpecError("a Ray job needs a head pod", field="podSets",
                        fix=f"name one pod set {HEAD!r}")
    return {
        "apiVersion": f"{GROUP}/{VERSION}", "kind": "RayCluster",
        "metadata": {"name": plan.name, "namespace": plan.namespace,
                     "labels": objects.attempt_labels(plan.job, plan.attempt, "ray-cluster",
                                                     plan.identity),
                     # KubeRay runs the containers' own commands (Phalanx's `ray start`).
                     "annotations": {OVERWRITE_COMMAND: "true"},
                     "ownerReferences": [owner]},
        "spec": {"enableInTreeAutoscaling": False, "headGroupSpec": head,
                 "workerGroupSpecs": workers},
    }


def dashboard(cluster: Object, namespace: str) -> str | None:
    """The dashboard's URL from the RayCluster's status (KubeRay's head Service)."""
    status = cluster.get("status") or {}
    service = (status.get("head") or {}).get("serviceName")
    if not service:
        return None
    port = (status.get("endpoints") or {}).get("dashboard") or DASHBOARD_PORT
    return f"http://{service}.{namespace}.svc:{port}"


class RayClusters:
    """The RayClusters of this plane's attempts, as the API server last showed them."""

    def __init__(self, client: KubeClient, namespace: str, *, on_change: Callable[[], None],
                 read_timeout: float) -> None:
        self.client = client
        self.namespace = namespace
        self._on_change = on_change
        self._lock = threading.Lock()
        self._seen: dict[str, Object] = {}
        self._deleted: set[str] = set()  # seen, then gone
        self.informer = Informer(
            client, collection(namespace), label_selector=objects.SELECTOR,
            on_list=self._listed, on_event=self._event, name=PLURAL,
            read_timeout=read_timeout)

    def start(self) -> None:
        self.informer.start()

    def stop(self) -> None:
        self.informer.stop()

    def create(self, body: Object) -> Object:
        found, _ = self.client.create_or_get(collection(self.namespace), body)
        return found

    def delete(self, name: str) -> None:
        self.client.delete(f"{collection(self.namespace)}/{name}")

    def get(self, name: str) -> Object | None:
        with self._lock:
            return self._seen.get(name)

    def gone(self, name: str) -> bool:
        """Whether the RayCluster was seen, then deleted (by someone else, if not stopping)."""
        with self._lock:
            return self.informer.synced.is_set() and name in self._deleted

    def _listed(self, items: list[Object], version: str) -> None:
        with self._lock:
            before = set(self._seen)
            self._seen = {str(o["metadata"]["name"]): o for o in items}
            self._deleted |= before - set(self._seen)
        self._on_change()

    def _event(self, kind: str, obj: Object) -> None:
        name = str(obj["metadata"]["name"])
        with self._lock:
            if kind == "DELETED":
                self._seen.pop(name, None)
                self._deleted.add(name)
            else:
                self._seen[name] = obj
        self._on_change()
