"""The ``kubernetes-provisioningrequest`` provider: node pools asked of the cluster
autoscaler (or GKE's queued provisioning) through ``ProvisioningRequest`` objects
(``autoscaling.x-k8s.io/v1``), as Kueue's provisioning admission check asks for them.

One request per provisioning attempt, named as the pool is (``<job>-<attempt>``): its spec
is immutable, so a retry is a new request and never an edit. Each pod set of the gang
becomes a PodTemplate (at most 32), owned by the request so that deleting the request
deletes them. The class is the flavor's ``provisioning.options.className`` with its
``options.parameters``; pods consume the request through the annotations
``autoscaling.x-k8s.io/consume-provisioning-request`` and
``autoscaling.x-k8s.io/provisioning-class-name``.

The API names no nodes. Once the request says ``Provisioned``, the provider claims as many
Ready nodes as the pool was sized for among those the templates select (the flavor's node
labels) that no pool owns and no pod uses: it labels them with the pool and its job and
taints them for that job (``phalanx.dev/reserved-for``), so that nothing else is placed on
them, and writes the request's name and class on them for the pods to consume. The claim
lives on the nodes, so a restarted control plane finds it. ``best-effort-atomic`` says
Provisioned as soon as the scale-up is asked for, so the pool is Ready only when every
claimed node is Ready; ``check-capacity`` creates no nodes and books existing ones for
about ten minutes, claimed the same way.

Conditions are read as Kueue reads them: ``Failed`` and, before the pool was Ready,
``BookingExpired`` fail the pool (a transient error: the controller retries with backoff);
``BookingExpired`` after that is ignored (the nodes are claimed); ``CapacityRevoked`` fails
a pool even once Ready, so that its job, when not finished, is evicted; ``Provisioned=False``
(``CapacityIsNotFound``) means still trying, and ``Accepted`` is information.

Automatic upgrades: a ProvisioningRequest names no node pool and has no upgrade setting;
the node groups it scales are the cluster operator's, so opting them out of automatic node
upgrades is done there (docs/provisioning.md says how on GKE). What the request can say,
it says: its templates and the gang's pods carry
``cluster-autoscaler.kubernetes.io/safe-to-evict: "false"``, so the autoscaler never drains a
pool's node under a running gang to scale it down.
"""

from __future__ import annotations

import builtins
import json
import threading
from collections.abc import Iterable
from typing import Any
from urllib.parse import quote

from phalanx.compute.base import ComputePlane
from phalanx.compute.kubernetes import objects
from phalanx.compute.kubernetes.client import KubeClient, KubeError, Object
from phalanx.compute.kubernetes.nodes import LIVE_PODS
from phalanx.compute.kubernetes.plane import KubernetesPlane
from phalanx.compute.kubernetes.provreq import (
    CONFIG_HASH,
    DEFAULT_CLASS,
    GROUP_VERSION,
    KIND,
    MAX_POD_SETS,
    NAME,
    NODE_CLASS,
    NODE_COUNT,
    NODE_REQUEST,
    NODE_SELECTOR,
    PODS_API_FIX,
    POOL,
    SAFE_TO_EVICT,
    TEMPLATE_IMAGE,
    Conditions,
)
from phalanx.provisioning.base import (
    POOL_LABEL,
    RESERVED_FOR,
    ConfigurationError,
    PodSetShape,
    PoolRequest,
    PoolState,
    PoolStatus,
    Provider,
    ProvisioningError,
    TransientError,
)
from phalanx.spec.quantity import format_quantity


def request_class(options: dict[str, Any]) -> tuple[str, dict[str, str]]:
    """The class and parameters a flavor's ``provisioning.options`` ask for."""
    name = str(options.get("className") or DEFAULT_CLASS)
    parameters = {str(k): str(v) for k, v in (options.get("parameters") or {}).items()}
    return name, parameters


def _selector_of(request: PoolRequest, pod_set: PodSetShape) -> dict[str, str]:
    """What a template's pods select: the flavor's node labels (the autoscaler's node
    groups carry them) and the pod set's own; never the per-job labels, which only the
    claim puts on nodes."""
    labels = {k: v for k, v in request.node_labels.items() if k not in (RESERVED_FOR, POOL_LABEL)}
    return {**labels, **pod_set.node_selector}


def _tolerations(request: PoolRequest) -> list[Object]:
    return [{"key": key, "operator": "Equal", "value": value, "effect": effect}
            for key, value, effect in request.node_taints]


def _labels(request: PoolRequest, component: str) -> dict[str, str]:
    labels = objects.attempt_labels(request.job, request.attempt, component)
    labels[POOL] = objects.dns_label(request.name)[:63].strip("-")
    return labels


def template_name(request: str, index: int) -> str:
    return f"{request}-ps{index}"


def pod_template(request: PoolRequest, index: int) -> Object:
    pod_set = request.pod_sets[index]
    amounts = {k: format_quantity(v, k) for k, v in sorted(pod_set.requests.items()) if v}
    return {
        "apiVersion": "v1", "kind": "PodTemplate",
        "metadata": {"name": template_name(request.name, index),
                     "labels": _labels(request, "pod-template")},
        "template": {
            "metadata": {"labels": {objects.JOB: request.job, objects.POD_SET: pod_set.name},
                         "annotations": {SAFE_TO_EVICT: "false"}},
            "spec": {
                "restartPolicy": "Never",
                "nodeSelector": _selector_of(request, pod_set),
                "tolerations": _tolerations(request),
                "containers": [{"name": objects.CONTAINER, "image": TEMPLATE_IMAGE,
                                "resources": {"requests": amounts, "limits": dict(amounts)}}],
            },
        },
    }


def provisioning_request(request: PoolRequest) -> Object:
    class_name, parameters = request_class(dict(request.options))
    return {
        "apiVersion": GROUP_VERSION, "kind": KIND,
        "metadata": {
            "name": request.name, "labels": _labels(request, "provisioning-request"),
            "annotations": {CONFIG_HASH: request.config_hash,
                            NODE_COUNT: str(request.node_count)},
        },
        "spec": {
            "provisioningClassName": class_name,
            "parameters": parameters,
            "podSets": [{"podTemplateRef": {"name": template_name(request.name, i)},
                         "count": p.count} for i, p in enumerate(request.pod_sets)],
        },
    }


def check_request(request: PoolRequest) -> None:
    """What the API would refuse, refused before anything is created (the options were
    checked at apply; a gang's pod sets at submit, but a queue may gain such a flavor
    after)."""
    if len(request.pod_sets) > MAX_POD_SETS:
        raise ConfigurationError(f"the gang has {len(request.pod_sets)} pod sets and a "
                                 f"ProvisioningRequest carries at most {MAX_POD_SETS}")


def classify(exc: KubeError, doing: str, *, collection: bool = False) -> ProvisioningError:
    """A refusal of the API as the controller acts on it. ``collection``: the request was
    made of the ProvisioningRequest collection, which answers 404 only when not served."""
    text = f"{doing}: {exc.status} {exc.reason}: {exc.message}".rstrip(": ")
    if exc.status == 404 and collection:
        return ConfigurationError(f"{doing}: the cluster does not serve ProvisioningRequests "
                                  f"({GROUP_VERSION}); {PODS_API_FIX}")
    if exc.status in (400, 401, 403, 422):
        return ConfigurationError(text)
    return TransientError(text)


class ProvisioningRequestProvider(Provider):
    """Pools as ProvisioningRequests in the runs namespace (see the module's docstring)."""

    name = NAME

    def __init__(self, client: KubeClient, namespace: str) -> None:
        self.client = client
        self.namespace = namespace
        self._base = f"/apis/{GROUP_VERSION}/namespaces/{namespace}/provisioningrequests"
        self._templates = f"/api/v1/namespaces/{namespace}/podtemplates"
        self._claiming = threading.Lock()

    # ------------------------------------------------------------------ Provider
    def create(self, request: PoolRequest) -> PoolStatus:
        check_request(request)
        templates = [pod_template(request, i) for i in range(len(request.pod_sets))]
        doing = f"creating ProvisioningRequest {request.name}"
        try:
            # The templates first, as Kueue makes them: the autoscaler reads them as soon as
            # it sees the request. They then pass to the request's ownership, so deleting it
            # deletes them; templates a crash left unowned go with the request's delete.
            for template in templates:
                self.client.create_or_get(self._templates, template)
        except KubeError as exc:
            raise classify(exc, doing) from None
        try:
            found, _ = self.client.create_or_get(self._base, provisioning_request(request))
        except KubeError as exc:
            raise classify(exc, doing, collection=True) from None
        owner_job = (found["metadata"].get("labels") or {}).get(objects.JOB)
        if owner_job != request.job:
            raise ConfigurationError(
                f"ProvisioningRequest {request.name} exists and belongs to "
                f"{owner_job or 'something other than Phalanx'}; delete it, or rename the job")
        owner = {"apiVersion": GROUP_VERSION, "kind": KIND,
                 "name": found["metadata"]["name"], "uid": found["metadata"]["uid"],
                 "blockOwnerDeletion": True}
        try:
            for template in templates:
                self.client.patch(f"{self._templates}/{template['metadata']['name']}",
                                  {"metadata": {"ownerReferences": [owner]}})
        except KubeError as exc:
            raise classify(exc, doing) from None
        return self._status(found)

    def status(self, name: str) -> PoolStatus | None:
        try:
            found = self.client.get(f"{self._base}/{quote(name, safe='')}")
        except KubeError as exc:
            if exc.status == 404:
                return None
            raise classify(exc, f"reading ProvisioningRequest {name}") from None
        return self._status(found)

    def list(self) -> list[PoolStatus]:
        try:
            answer = self.client.get(self._base, labelSelector=objects.SELECTOR)
        except KubeError as exc:
            raise classify(exc, "listing ProvisioningRequests", collection=True) from None
        return [self._status(item) for item in answer.get("items") or []]

    def delete(self, name: str) -> None:
        """Delete the request and its templates; the autoscaler then scales the pool's nodes
        down (they stay reserved for the finished job meanwhile, so nothing lands on them)."""
        quoted = quote(name, safe="")
        try:
            self.client.delete(f"{self._base}/{quoted}", propagation="Background")
            listed = self.client.get(self._templates,
                                     labelSelector=f"{objects.SELECTOR},{POOL}="
                                     f"{objects.dns_label(name)[:63].strip('-')}")
            for template in listed.get("items") or []:
                self.client.delete(f"{self._templates}/{template['metadata']['name']}")
        except KubeError as exc:
            raise classify(exc, f"deleting ProvisioningRequest {name}") from None

    def reassign(self, name: str, job: str) -> bool:
        """Reserve an idle pool's claimed nodes for ``job`` (its label and taint), and say
        so on the request (its labels may change; its spec may not)."""
        quoted = quote(name, safe="")
        try:
            request = self.client.get(f"{self._base}/{quoted}")
        except KubeError as exc:
            if exc.status == 404:
                return False
            raise classify(exc, f"reading ProvisioningRequest {name}") from None
        annotations = request["metadata"].get("annotations") or {}
        nodes = self._claimed(name)
        if not nodes or len(nodes) < int(annotations.get(NODE_COUNT) or 0):
            return False
        try:
            for node in nodes:
                self.client.patch(f"/api/v1/nodes/{quote(node['metadata']['name'], safe='')}",
                                  _reservation(node, job))
            self.client.patch(f"{self._base}/{quoted}",
                              {"metadata": {"labels": {objects.JOB: job}}})
        except KubeError as exc:
            raise classify(exc, f"reserving pool {name} for {job}") from None
        return True

    # ------------------------------------------------------------------ reading a request
    def _status(self, request: Object) -> PoolStatus:
        meta = request.get("metadata") or {}
        annotations = meta.get("annotations") or {}
        node_count = int(annotations.get(NODE_COUNT) or 0)

        def pool(state: PoolState, message: str, nodes: builtins.list[Object],
                 error: ProvisioningError | None = None) -> PoolStatus:
            return PoolStatus(
                name=str(meta["name"]), state=state, message=message, error=error,
                nodes=tuple(sorted(str(n["metadata"]["name"]) for n in nodes)),
                ready_nodes=sum(1 for n in nodes if _is_ready(n)), node_count=node_count,
                config_hash=str(annotations.get(CONFIG_HASH) or ""))

        if meta.get("deletionTimestamp"):
            return pool(PoolState.DELETING, "being deleted", [])
        seen = Conditions.of(request)
        nodes = self._claimed(str(meta["name"]))
        failed = ""
        if "Failed" in seen.true:
            failed = f"the autoscaler failed the request: {seen.true['Failed']}"
        elif "CapacityRevoked" in seen.true:  # even once placed: the job is evicted
            failed = f"capacity revoked: {seen.true['CapacityRevoked']}"
        elif "BookingExpired" in seen.true and len(nodes) < node_count:
            # Once every node is claimed the gang has them (reserved for it): ignored.
            failed = f"the booking expired before the gang was placed: " \
                     f"{seen.true['BookingExpired']}"
        if failed:
            return pool(PoolState.FAILED, failed, nodes, TransientError(failed))
        if "Provisioned" in seen.true:
            if len(nodes) < node_count:
                nodes = self._claim(request, node_count)
            ready = sum(1 for n in nodes if _is_ready(n))
            if node_count and len(nodes) >= node_count and ready >= node_count:
                return pool(PoolState.READY, f"provisioned: {ready} node(s) Ready", nodes)
            # best-effort-atomic says Provisioned when the scale-up is asked for.
            return pool(PoolState.CREATING, f"provisioned; {len(nodes)}/{node_count} node(s) "
                        f"there, {ready} Ready", nodes)
        if seen.provisioned_reason:  # Provisioned=False: CapacityIsNotFound means still trying
            text = seen.provisioned_message or seen.provisioned_reason
            return pool(PoolState.CREATING, f"still trying ({seen.provisioned_reason}): {text}",
                        nodes)
        if "Accepted" in seen.true:
            return pool(PoolState.CREATING, "accepted by the autoscaler", nodes)
        return pool(PoolState.CREATING, "waiting for the autoscaler", nodes)

    # ------------------------------------------------------------------ claiming nodes
    def _claimed(self, pool: str) -> builtins.list[Object]:
        try:
            answer = self.client.get("/api/v1/nodes", labelSelector=f"{POOL_LABEL}={pool}")
        except KubeError as exc:
            raise classify(exc, f"listing the nodes of pool {pool}") from None
        return list(answer.get("items") or [])

    def _claim(self, request: Object, node_count: int) -> builtins.list[Object]:
        """Claim Ready, unowned, unused nodes the templates select until the pool has
        ``node_count``; one claim at a time, so two pools never take the same node."""
        name = str(request["metadata"]["name"])
        labels = request["metadata"].get("labels") or {}
        job = str(labels.get(objects.JOB) or "")
        selector, tolerated = self._template_terms(request)
        with self._claiming:
            nodes = self._claimed(name)
            if len(nodes) >= node_count:
                return nodes
            try:
                listed = self.client.get("/api/v1/nodes",
                                         labelSelector=_label_selector(selector))
            except KubeError as exc:
                raise classify(exc, "listing nodes to claim") from None
            since = str(request["metadata"].get("creationTimestamp") or "")
            candidates = [n for n in listed.get("items") or []
                          if _claimable(n, tolerated, since) and not self._in_use(n)]
            candidates.sort(key=lambda n: str(n["metadata"].get("creationTimestamp") or ""),
                            reverse=True)  # the newest first: those the scale-up made
            class_name = str((request.get("spec") or {}).get("provisioningClassName") or "")
            for node in candidates:
                if len(nodes) >= node_count:
                    break
                claimed = self._patch_claim(node, name, job, class_name, selector)
                if claimed is not None:
                    nodes.append(claimed)
        return nodes

    def _template_terms(self, request: Object) -> tuple[dict[str, str], builtins.list[Object]]:
        """The node selector every template shares, and the tolerations of the first."""
        selector: dict[str, str] | None = None
        tolerations: builtins.list[Object] = []
        for pod_set in (request.get("spec") or {}).get("podSets") or []:
            ref = str((pod_set.get("podTemplateRef") or {}).get("name") or "")
            try:
                template = self.client.get(f"{self._templates}/{quote(ref, safe='')}")
            except KubeError as exc:
                raise classify(exc, f"reading PodTemplate {ref}") from None
            spec = (template.get("template") or {}).get("spec") or {}
            own = dict(spec.get("nodeSelector") or {})
            selector = own if selector is None else {k: v for k, v in selector.items()
                                                    if own.get(k) == v}
            tolerations = tolerations or list(spec.get("tolerations") or [])
        return selector or {}, tolerations

    def _in_use(self, node: Object) -> bool:
        """Whether a pod other than a DaemonSet's lives on the node."""
        fields = f"spec.nodeName={node['metadata']['name']},{LIVE_PODS}"
        try:
            answer = self.client.get("/api/v1/pods", fieldSelector=fields)
        except KubeError as exc:
            raise classify(exc, "listing the pods of a node to claim") from None
        return any(not _daemon(p) for p in answer.get("items") or [])

    def _patch_claim(self, node: Object, pool: str, job: str, class_name: str,
                     selector: dict[str, str]) -> Object | None:
        """The node as claimed; None when it changed since it was listed (it is looked at
        again at the next status)."""
        patch = _reservation(node, job)
        patch["metadata"]["labels"][POOL_LABEL] = pool
        patch["metadata"].update({
            "annotations": {NODE_REQUEST: pool, NODE_CLASS: class_name,
                            NODE_SELECTOR: json.dumps(selector, sort_keys=True)},
            # The claim holds only while the node is as listed: a concurrent writer
            # (another control plane) makes the patch fail instead of both winning.
            "resourceVersion": node["metadata"].get("resourceVersion"),
        })
        name = quote(str(node["metadata"]["name"]), safe="")
        try:
            return self.client.patch(f"/api/v1/nodes/{name}", patch)
        except KubeError as exc:
            if exc.status == 409:
                return None
            if exc.status == 403:
                raise ConfigurationError(
                    f"claiming node {node['metadata']['name']} for pool {pool} was refused "
                    f"({exc.message or exc.reason}); let the control plane patch nodes "
                    "(worker.rbac.allowNodeWrites)") from None
            raise classify(exc, f"claiming node {node['metadata']['name']}") from None


def _reservation(node: Object, job: str) -> Object:
    """The merge patch that reserves ``node`` for ``job``: its label, and its NoSchedule
    taint in place of any other job's (a merge patch replaces the whole taint list)."""
    taints = [t for t in (node.get("spec") or {}).get("taints") or []
              if t.get("key") != RESERVED_FOR]
    taints.append({"key": RESERVED_FOR, "value": job, "effect": "NoSchedule"})
    return {"metadata": {"labels": {RESERVED_FOR: job}}, "spec": {"taints": taints}}


_LIFECYCLE_TAINTS = ("node.kubernetes.io/", "node.cloudprovider.kubernetes.io/")


def _label_selector(labels: dict[str, str]) -> str:
    terms = [f"{k}={v}" for k, v in sorted(labels.items())]
    return ",".join([*terms, f"!{POOL_LABEL}"])


def _is_ready(node: Object) -> bool:
    return any(c.get("type") == "Ready" and c.get("status") == "True"
               for c in (node.get("status") or {}).get("conditions") or [])


def _claimable(node: Object, tolerated: Iterable[Object], since: str) -> bool:
    """Schedulable, Ready or made since the request (a node of the scale-up is claimed
    while it comes up, so that nothing else is placed on it first), and with every
    NoSchedule/NoExecute taint tolerated by the templates, bar the node lifecycle's own
    (not-ready, uninitialized)."""
    if (node.get("spec") or {}).get("unschedulable"):
        return False
    created = str(node["metadata"].get("creationTimestamp") or "")
    if not _is_ready(node) and not (since and created >= since):
        return False
    allowed = builtins.list(tolerated)
    for taint in (node.get("spec") or {}).get("taints") or []:
        key = str(taint.get("key") or "")
        if taint.get("effect") == "PreferNoSchedule" or key.startswith(_LIFECYCLE_TAINTS):
            continue
        if not any(_tolerates(t, taint) for t in allowed):
            return False
    return True


def _tolerates(toleration: Object, taint: Object) -> bool:
    if toleration.get("effect") and toleration.get("effect") != taint.get("effect"):
        return False
    if toleration.get("operator") == "Exists":
        return not toleration.get("key") or toleration.get("key") == taint.get("key")
    return (toleration.get("key") == taint.get("key")
            and (toleration.get("value") or "") == (taint.get("value") or ""))


def _daemon(pod: Object) -> bool:
    owners = (pod.get("metadata") or {}).get("ownerReferences") or []
    return any(o.get("kind") == "DaemonSet" for o in owners) or bool(
        ((pod.get("metadata") or {}).get("annotations") or {}).get("kubernetes.io/config.mirror"))


def build(plane: ComputePlane) -> Provider:
    """The provider of the Kubernetes plane ``plane`` (its ``ProviderInfo.build``)."""
    assert isinstance(plane, KubernetesPlane)
    return ProvisioningRequestProvider(plane.client, plane.namespace)
