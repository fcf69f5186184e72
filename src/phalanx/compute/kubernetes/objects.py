"""The Kubernetes objects of one job attempt, built as plain dicts (no I/O).

Per attempt: an anchor ConfigMap (the attempt's plan, and the owner of
everything else, so deleting it cascades), a headless Service whose name is the
pods' subdomain, one Pod per admitted replica, and a scheduler-plugins PodGroup
when that API is served. Every name is a DNS-1123 label of at most 63
characters (shortened with a hash when the job's names are long) and every
label value is valid, so the real API server accepts what the plane sends.
"""

from __future__ import annotations

import hashlib
import json
import re
from dataclasses import dataclass, field
from typing import Any

from phalanx.compute.base import CONTROL_PLANE_LABEL, owner_tag
from phalanx.compute.kubernetes import checkpoints, volumes
from phalanx.errors import SpecError
from phalanx.kinds import DEFAULT_MASTER_PORT, OwnAddressNetwork, PodRef, framework_of
from phalanx.scheduler.types import Admission
from phalanx.spec.quantity import MILLI, format_quantity
from phalanx.spec.resources import JobSpec, PodSet, Taint, Toleration

Object = dict[str, Any]

MANAGED_BY = "app.kubernetes.io/managed-by"
MANAGER = "phalanx"
JOB = "phalanx.dev/job"
ATTEMPT = "phalanx.dev/attempt"
POD_SET = "phalanx.dev/pod-set"
INDEX = "phalanx.dev/index"
RANK = "phalanx.dev/rank"
COMPONENT = "phalanx.dev/component"  # anchor | service | pod | pod-group | ray-cluster
TERMINATE = "phalanx.dev/terminate-requested-at"  # anchor annotation: a stop was asked for
LAUNCHED = "phalanx.dev/launched"  # anchor annotation: every object was created
RAY_CLUSTER = "rayCluster"  # anchor data: "true" when KubeRay makes the attempt's pods
ATTEMPT_KEY = "attemptKey"  # anchor data: the key the attempt's shared secrets derive from
POD_GROUP_LABEL = "scheduling.x-k8s.io/pod-group"
POD_GROUP_API = "scheduling.x-k8s.io/v1alpha1"
CONTAINER = "main"
MASTER_PORT = DEFAULT_MASTER_PORT
SELECTOR = f"{MANAGED_BY}={MANAGER}"
# Behind a worker: the compute plane and the control plane an object belongs to. The plane
# selects by them, so it never acts on a same-named object of another plane's or control
# plane's in a shared namespace.
PLANE = "phalanx.dev/plane"
CONTROL_PLANE = CONTROL_PLANE_LABEL

_NOT_LABEL = re.compile(r"[^a-z0-9-]+")
NO_IMAGE_FIX = ("give the pod set an image, or start the control plane with a default "
                "(`phalanx up --default-image IMAGE`; runs.defaultImage in the deployment values)")
# Taints the node lifecycle controller sets (not-ready, unreachable, pressure...): pods
# must not tolerate them, or they would stay bound to a failing node.
_SYSTEM_TAINT_PREFIX = "node.kubernetes.io/"


def dns_label(text: str, *, letter_first: bool = False) -> str:
    """``text`` as a DNS-1123 label (DNS-1035 with ``letter_first``), at most 63 characters.

    Names that must change are shortened with a hash of the original, so two
    different inputs never meet in one name.
    """
    clean = _NOT_LABEL.sub("-", text.lower()).strip("-") or "x"
    if letter_first and not clean[0].isalpha():
        clean = "p-" + clean
    if clean == text and len(clean) <= 63:
        return clean
    digest = hashlib.sha256(text.encode()).hexdigest()[:8]
    return f"{clean[:54].rstrip('-')}-{digest}"


def control_plane_of(identity: dict[str, str] | None) -> dict[str, str]:
    """Of the identity labels, the control plane's only."""
    return {k: v for k, v in (identity or {}).items() if k == CONTROL_PLANE}


def checkpoint_tag(identity: dict[str, str] | None) -> str:
    """The tag of a job's checkpoint directory: its control plane's (not its plane's: the
    job keeps its checkpoints when it moves between planes that share the volume)."""
    return owner_tag(control_plane_of(identity))


def attempt_name(job: str, attempt: int, identity: dict[str, str] | None = None) -> str:
    """Name of the attempt's anchor ConfigMap, Service (the pods' subdomain) and PodGroup."""
    return dns_label(f"{job}-{attempt}{owner_tag(identity)}", letter_first=True)


def pod_name(ref: PodRef, identity: dict[str, str] | None = None) -> str:
    return dns_label(f"{ref.job}-{ref.attempt}-{ref.pod_set}-{ref.index}{owner_tag(identity)}")


def hostname(ref: PodRef) -> str:
    return dns_label(f"{ref.pod_set}-{ref.index}")


def identity_labels(plane: str | None, control_plane: str | None) -> dict[str, str]:
    """The labels naming whose objects these are; empty for an in-process plane."""
    labels = {}
    if plane is not None:
        labels[PLANE] = plane
    if control_plane is not None:
        labels[CONTROL_PLANE] = dns_label(control_plane)
    return labels


def selector(identity: dict[str, str]) -> str:
    """The label selector of this plane's objects."""
    return ",".join([SELECTOR, *(f"{k}={v}" for k, v in sorted(identity.items()))])


def attempt_labels(job: str, attempt: int, component: str,
                   identity: dict[str, str] | None = None) -> dict[str, str]:
    # Job and pod-set names are DNS labels of at most 63 characters: valid label values.
    return {MANAGED_BY: MANAGER, **(identity or {}), JOB: job, ATTEMPT: str(attempt),
            COMPONENT: component}


def owner_reference(anchor: Object) -> Object:
    meta = anchor["metadata"]
    return {"apiVersion": "v1", "kind": "ConfigMap", "name": meta["name"], "uid": meta["uid"],
            "controller": True, "blockOwnerDeletion": True}


@dataclass(frozen=True, slots=True)
class PlannedPod:
    ref: PodRef
    node: str
    name: str
    hostname: str
    env: dict[str, str]
    command: list[str] = field(default_factory=list)
    ports: dict[str, int] = field(default_factory=dict)


@dataclass(slots=True)
class AttemptPlan:
    job: str
    attempt: int
    namespace: str
    name: str
    master_addr: str
    pods: list[PlannedPod] = field(default_factory=list)
    endpoints: dict[str, str] = field(default_factory=dict)  # the kind's (a dashboard's URL)
    identity: dict[str, str] = field(default_factory=dict)  # identity_labels of the plane

    def pods_json(self) -> str:
        return json.dumps([
            {"name": p.name, "podSet": p.ref.pod_set, "index": p.ref.index, "rank": p.ref.rank,
             "node": p.node}
            for p in self.pods
        ])


def plan_attempt(
    job: JobSpec, attempt: int, admission: Admission, namespace: str, key: bytes,
    identity: dict[str, str] | None = None, *, tagged: bool = True,
) -> AttemptPlan:
    """Names, nodes and environments of the attempt's pods (raises SpecError on bad input).

    ``key`` is the attempt's (kept on its anchor): the secrets its pods share derive from
    it, so a launch completed by another plane gives them the same ones. ``identity``: the
    labels of the plane and control plane a worker drives it for, and (``tagged``) a tag
    of them in the names; an attempt whose anchor was made with untagged names keeps
    them.
    """
    named = identity if tagged else None
    name = attempt_name(job.name, attempt, named)
    domain = f"{name}.{namespace}.svc"
    # Ranks, nodes, commands and env come from the job's kind: the same contract on every plane.
    framework = framework_of(job)
    count = sum(p.count for p in admission.pod_sets)
    refs = framework.plan(job, attempt, admission, OwnAddressNetwork([""] * count, key=key))
    hosts = [f"{hostname(p.ref)}.{domain}" for p in refs]
    if len(set(hosts)) != len(hosts):  # only with pod-set names that clash once shortened
        raise SpecError("two pods of the job would share a hostname", field="podSets",
                        fix="give the pod sets names that differ in their first 50 characters")
    pods = framework.plan(job, attempt, admission, OwnAddressNetwork(hosts, key=key))
    plan = AttemptPlan(job=job.name, attempt=attempt, namespace=namespace, name=name,
                       master_addr=hosts[0], endpoints=framework.endpoints(job, pods),
                       identity=dict(identity or {}))
    for p in pods:
        plan.pods.append(PlannedPod(ref=p.ref, node=p.node, name=pod_name(p.ref, named),
                                    hostname=hostname(p.ref), env=p.env, command=p.command,
                                    ports=p.ports))
    return plan


def anchor(
    plan: AttemptPlan, admission: Admission, launched_at: float, key: bytes,
    ray_cluster: bool = False,
) -> Object:
    return {
        "apiVersion": "v1", "kind": "ConfigMap",
        "metadata": {"name": plan.name, "namespace": plan.namespace,
                     "labels": attempt_labels(plan.job, plan.attempt, "anchor", plan.identity)},
        "data": {
            "job": plan.job, "attempt": str(plan.attempt),
            "admission": json.dumps(admission.to_dict()),
            "pods": plan.pods_json(), "launchedAt": repr(launched_at),
            "masterAddr": plan.master_addr,
            # The pods' env shows the secrets derived from it to whoever may read them.
            ATTEMPT_KEY: key.hex(),
            # Its pods are a KubeRay RayCluster's: a restarted plane finds them so too.
            RAY_CLUSTER: "true" if ray_cluster else "false",
        },
    }


def service(plan: AttemptPlan, owner: Object) -> Object:
    labels = attempt_labels(plan.job, plan.attempt, "service", plan.identity)
    return {
        "apiVersion": "v1", "kind": "Service",
        "metadata": {"name": plan.name, "namespace": plan.namespace, "labels": labels,
                     "ownerReferences": [owner]},
        "spec": {
            "clusterIP": "None",
            # Rendezvous happens before any pod is ready: publish the names at once.
            "publishNotReadyAddresses": True,
            "selector": {JOB: plan.job, ATTEMPT: str(plan.attempt), COMPONENT: "pod"},
            "ports": [{"name": "master", "port": MASTER_PORT, "targetPort": MASTER_PORT,
                       "protocol": "TCP"}],
        },
    }


def pod_group(plan: AttemptPlan, owner: Object) -> Object:
    return {
        "apiVersion": POD_GROUP_API, "kind": "PodGroup",
        "metadata": {"name": plan.name, "namespace": plan.namespace,
                     "labels": attempt_labels(plan.job, plan.attempt, "pod-group", plan.identity),
                     "ownerReferences": [owner]},
        "spec": {"minMember": len(plan.pods)},
    }


def image_of(job: JobSpec, index: int, default_image: str | None = None) -> str:
    """The image the pods of ``job``'s pod set ``index`` run: its own, else the default."""
    pod_set = job.pod_sets[index]
    image = pod_set.image or default_image
    if not image:
        raise SpecError(
            f"pod set {pod_set.name!r} names no image and this control plane has no default "
            "image", field=f"podSets[{index}].image", fix=NO_IMAGE_FIX,
        )
    return image


def pod(
    plan: AttemptPlan,
    planned: PlannedPod,
    job: JobSpec,
    owner: Object,
    *,
    service_account: str | None = None,
    priority_class: str | None = None,
    node_taints: list[Taint] | None = None,
    with_pod_group: bool = False,
    default_image: str | None = None,
    checkpoint_volume: Object | None = None,
    consume: tuple[dict[str, str], dict[str, str]] | None = None,
) -> Object:
    """The pod of ``planned``. ``consume``: the annotations and node selector of the
    ProvisioningRequest whose node the pod is placed on (``provisioning.consumes``)."""
    ref = planned.ref
    index, pod_set = next((i, p) for i, p in enumerate(job.pod_sets) if p.name == ref.pod_set)
    where = f"podSets[{index}]"
    image = image_of(job, index, default_image)
    labels = attempt_labels(plan.job, plan.attempt, "pod", plan.identity)
    labels.update({POD_SET: ref.pod_set, INDEX: str(ref.index), RANK: str(ref.rank)})
    if with_pod_group:
        labels[POD_GROUP_LABEL] = plan.name
    container: Object = {
        "name": CONTAINER,
        "image": image,
        "env": [{"name": k, "value": str(v)} for k, v in planned.env.items()],
        "resources": _resources(pod_set, where),
        "ports": [{"name": dns_label(purpose)[:15], "containerPort": port, "protocol": "TCP"}
                  for purpose, port in (planned.ports or {"master": MASTER_PORT}).items()],
    }
    if planned.command:
        container["command"] = list(planned.command)
    if pod_set.working_dir:
        container["workingDir"] = pod_set.working_dir
    spec: Object = {
        "restartPolicy": "Never",
        "hostname": planned.hostname,
        "subdomain": plan.name,
        "enableServiceLinks": False,
        "containers": [container],
        "affinity": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {
            "nodeSelectorTerms": [{"matchFields": [
                {"key": "metadata.name", "operator": "In", "values": [planned.node]},
            ]}],
        }}},
    }
    tolerated = tolerations(pod_set.tolerations, node_taints or [])
    if tolerated:
        spec["tolerations"] = tolerated
    extra_annotations, extra_selector = consume or ({}, {})
    if pod_set.node_selector or extra_selector:
        spec["nodeSelector"] = {**extra_selector, **pod_set.node_selector}
    if pod_set.image_pull_policy is not None:
        container["imagePullPolicy"] = pod_set.image_pull_policy
    # The pod set's own account was checked against the install's list (check_job).
    if pod_set.service_account_name or service_account:
        spec["serviceAccountName"] = pod_set.service_account_name or service_account
    if priority_class:
        spec["priorityClassName"] = priority_class
    if job.termination_grace is not None:  # the kubelet's SIGTERM-to-SIGKILL wait
        spec["terminationGracePeriodSeconds"] = round(job.termination_grace)
    volumes.mount(spec, container, job, pod_set, plan.name)
    if checkpoint_volume is not None:
        checkpoints.mount(spec, container, job.name, checkpoint_volume,
                          checkpoint_tag(plan.identity))
    return {
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {
            "name": planned.name, "namespace": plan.namespace, "labels": labels,
            "annotations": {"phalanx.dev/pod": ref.name, "phalanx.dev/node": planned.node,
                            **({"phalanx.dev/cpu-pinning": "exclusive"}
                               if pod_set.cpu_pinning == "exclusive" else {}),
                            **extra_annotations},
            "ownerReferences": [owner],
        },
        "spec": spec,
    }


def check_service_accounts(job: JobSpec, allowed: frozenset[str]) -> None:
    """A pod set runs as another ServiceAccount than the runs account only if the install
    allows that account: an account may hold rights in the cluster its users do not."""
    for i, pod_set in enumerate(job.pod_sets):
        name = pod_set.service_account_name
        if name is not None and name not in allowed:
            shown = ", ".join(sorted(allowed)) or "none"
            raise SpecError(
                f"ServiceAccount {name!r} is not one this install lets jobs run as (allowed: "
                f"{shown})", field=f"podSets[{i}].serviceAccountName",
                fix="remove serviceAccountName (pods run as the install's runs account), or "
                    "ask the platform team to allow it (phalanx up --allow-service-account, "
                    "or runs.allowedServiceAccounts in the values)")


def check_cpu_pinning(job: JobSpec) -> None:
    """A pinned pod set must be able to get the Guaranteed QoS class, which the kubelet's
    static CPU manager needs to give a container CPUs of its own: integer cpu (checked by
    the schema) and a memory request, as limits equal requests in every pod Phalanx makes."""
    for i, pod_set in enumerate(job.pod_sets):
        if pod_set.cpu_pinning == "exclusive" and not pod_set.resources.get("memory"):
            raise SpecError(
                "cpuPinning exclusive needs the Guaranteed QoS class on Kubernetes, which "
                "takes a memory request as well as cpu", field=f"podSets[{i}].resources.memory",
                fix='request memory too, e.g. resources: {cpu: "4", memory: 16Gi}')


def _resources(pod_set: PodSet, where: str) -> Object:
    amounts: dict[str, str] = {}
    for name, millis in sorted(pod_set.resources.items()):
        if millis == 0:
            continue
        if "/" in name and not name.startswith(("kubernetes.io/", "requests.")) and millis % MILLI:
            raise SpecError(f"{millis / MILLI:g} {name} requested; extended resources are whole",
                            field=f"{where}.resources.{name}", fix="request a whole number")
        amounts[name] = format_quantity(millis, name)
    # requests == limits: the pod gets what the scheduler accounted for, no more (and the
    # Guaranteed QoS class when cpu and memory are both given; with integer cpu, which
    # cpuPinning exclusive asks for, the static CPU manager gives it CPUs of its own).
    return {"requests": dict(amounts), "limits": dict(amounts)} if amounts else {}


def tolerations(own: list[Toleration], taints: list[Taint]) -> list[Object]:
    """What a pod with tolerations ``own`` placed on a node with ``taints`` tolerates."""
    out: list[Object] = []
    for t in own:
        item: Object = {"operator": t.operator}
        if t.key is not None:
            item["key"] = t.key
        if t.operator == "Equal":
            item["value"] = t.value
        if t.effect is not None:
            item["effect"] = t.effect
        out.append(item)
    # The scheduler placed the pod on this node knowing its taints (its flavor tolerates
    # them): the pod tolerates exactly those, so the kubelet and kube-scheduler agree.
    for taint in taints:
        if taint.key.startswith(_SYSTEM_TAINT_PREFIX) or taint.effect == "PreferNoSchedule":
            continue
        item = {"key": taint.key, "operator": "Equal", "value": taint.value,
                "effect": taint.effect}
        if item not in out:
            out.append(item)
    return out
