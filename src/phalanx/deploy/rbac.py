"""Least-privilege RBAC, rule for rule the MosaicML compute plane's documented set.

The worker (the control plane) gets, in the runs namespace, every verb on pods,
configmaps, secrets, services and PodGroups of both scheduler-plugins API
groups, and read-only events; cluster-wide node and CRD reads only with
``worker.rbac.allowNodeReads``; node patch only with ``allowNodeWrites``;
ProvisioningRequests and PodTemplates in the runs namespace only with
``allowProvisioningRequests``.
Runs get ``pods get`` + ``pods/exec create`` with interactivity, ``pods get``
with logging only, nothing otherwise; with ``mode: cluster`` also ``get`` on their
plane's Lease (by name), which the fence around each rank reads. NodeDoctor gets and
patches its Node
(the ``phalanx.dev/health`` label and checks annotation; the GPUs the node
advertises) and patches ``nodes/status`` (its ``PhalanxHealthy`` condition): exactly
what ``phalanx doctor --report kubernetes`` does, and nothing in any namespace.

With ``mode: cluster`` the worker is ``phalanx worker``, and it also gets every verb on
``coordination.k8s.io`` leases in the runs namespace: it renews its plane's Lease
there, the fence that stops the cluster's pods when the worker is gone.

Replicas of the control plane that lead by a Kubernetes Lease get, in the control plane's
own namespace, ``get`` and ``patch`` on that Lease by name and ``create`` on leases.

Three additions the worker cannot do without, each tied to the switch it serves:
``pods/exec`` with ``worker.enableRunInteractivity`` (``phalanx exec`` into a run's pod),
``pods/log get`` in the runs namespace (logs are a subresource, and the control
plane streams every pod's log into its log store), and cluster-wide pod reads
with ``allowNodeReads`` (a node's free capacity is its allocatable minus what
pods Phalanx did not create already use, and those pods live in any namespace).
"""

from __future__ import annotations

from typing import Any

from phalanx.defaults import LEADER_LEASE_NAME, plane_lease_name
from phalanx.deploy.values import DOCTOR_ACCOUNT, RUNS_ACCOUNT, WORKER_ACCOUNT, Values
from phalanx.spec.manifests.native_kinds import NATIVE_KINDS

Manifest = dict[str, Any]
Rule = dict[str, list[str]]

ALL_VERBS = ["get", "list", "watch", "create", "update", "patch", "delete"]
READ_VERBS = ["get", "list", "watch"]
PODGROUP_GROUPS = ["scheduling.x-k8s.io", "scheduling.sigs.k8s.io"]
PROVISIONING_GROUP = "autoscaling.x-k8s.io"
RBAC_API = "rbac.authorization.k8s.io/v1"


def _rule(groups: list[str], resources: list[str], verbs: list[str],
          names: list[str] | None = None) -> Rule:
    rule = {"apiGroups": list(groups), "resources": list(resources), "verbs": list(verbs)}
    if names:
        rule["resourceNames"] = list(names)
    return rule


def labels(component: str) -> dict[str, str]:
    return {
        "app.kubernetes.io/name": "phalanx",
        "app.kubernetes.io/component": component,
        "app.kubernetes.io/part-of": "phalanx",
    }


def metadata(name: str, component: str, namespace: str | None = None) -> dict[str, Any]:
    """An object's metadata: its name, its namespace when it has one, the component labels."""
    meta: dict[str, Any] = {"name": name}
    if namespace is not None:
        meta["namespace"] = namespace
    meta["labels"] = labels(component)
    return meta


# --------------------------------------------------------------------------- rules
def worker_namespace_rules(values: Values) -> list[Rule]:
    """What the worker may do in the runs namespace (``pods/exec`` for ``phalanx exec``, with
    interactivity only: the WebSocket upgrade is a GET, the API server also checks create)."""
    rules = [
        _rule([""], ["pods", "configmaps", "secrets", "services"], ALL_VERBS),
        _rule([""], ["pods/log"], ["get"]),
        _rule(PODGROUP_GROUPS, ["podgroups"], ALL_VERBS),
        _rule([""], ["events"], READ_VERBS),
    ]
    if values.worker.enable_run_interactivity:
        rules.insert(2, _rule([""], ["pods/exec"], ["get", "create"]))
    if values.ray.use_kube_ray != "never":  # Ray jobs as KubeRay RayClusters
        rules.append(_rule(["ray.io"], ["rayclusters"], ALL_VERBS))
    if values.worker.rbac.allow_provisioning_requests:  # node pools asked of the autoscaler
        rules.append(_rule([""], ["podtemplates"], ALL_VERBS))
        rules.append(_rule([PROVISIONING_GROUP], ["provisioningrequests"], ALL_VERBS))
    if values.mode == "cluster":
        rules.insert(-1, _rule(["coordination.k8s.io"], ["leases"], ALL_VERBS))
    return rules


def worker_cluster_rules(values: Values) -> list[Rule]:
    """What the worker may do cluster-wide: nothing unless a switch allows it."""
    rbac = values.worker.rbac
    rules: list[Rule] = []
    if rbac.allow_node_reads:
        rules.append(_rule([""], ["nodes"], READ_VERBS))
        rules.append(_rule(["apiextensions.k8s.io"], ["customresourcedefinitions"], READ_VERBS))
        rules.append(_rule([""], ["pods"], READ_VERBS))
    if rbac.allow_node_writes:
        rules.append(_rule([""], ["nodes"], ["patch"]))  # cordon, health taint: merge patches
    rules += native_rules(values)
    return rules


def native_rules(values: Values) -> list[Rule]:
    """Kubernetes-native admission (``manageNamespaces``), verb for verb what it does: each
    managed kind's objects (``NATIVE_KINDS``, one rule per API group) it follows (list,
    watch), reads afresh and patches (suspend, templates); their status, read and patched for
    its conditions; the namespaces its selector picks; the pods of the batch Jobs it
    admitted, followed and patched to remove their scheduling gate (their controllers make
    and delete the pods); the Events it records on the objects. Kubernetes RBAC cannot name
    namespaces by label, so these are cluster-wide; Phalanx touches only objects in the
    namespaces the selector picks."""
    if values.manage_namespaces is None:
        return []
    groups: dict[str, list[str]] = {}
    for adapter in NATIVE_KINDS.values():
        groups.setdefault(adapter.group, []).append(adapter.plural)
    rules = []
    for group, plurals in groups.items():
        # followed (list, watch), read afresh and patched (suspend, templates); their
        # status read and patched (conditions)
        rules.append(_rule([group], plurals, ["get", "list", "watch", "patch"]))
        rules.append(_rule([group], [f"{p}/status" for p in plurals], ["get", "patch"]))
    return [
        *rules,
        _rule([""], ["namespaces"], ["list", "watch"]),
        _rule([""], ["pods"], ["list", "watch", "patch"]),
        _rule([""], ["events"], ["create"]),
    ]


def leader_rules(values: Values) -> list[Rule]:
    """Replicas leading by a Kubernetes Lease (``worker.leaderLease: kubernetes``), in the
    control plane's own namespace: read and renew that one Lease by name, and create it
    (``create`` cannot be limited to a name: the API server knows none before the object)."""
    if values.mode != "full" or values.worker.replicas < 2 or \
            values.worker.leader_lease != "kubernetes":
        return []
    return [_rule(["coordination.k8s.io"], ["leases"], ["get", "patch"],
                  names=[LEADER_LEASE_NAME]),
            _rule(["coordination.k8s.io"], ["leases"], ["create"])]


def runs_rules(values: Values) -> list[Rule]:
    """What the runs' own ServiceAccount may do in the runs namespace.

    With ``mode: cluster`` every rank runs under the fence, which reads its plane's
    Lease: ``get`` on that one Lease, by name."""
    rules: list[Rule] = []
    if values.worker.enable_run_interactivity:
        rules = [_rule([""], ["pods"], ["get"]), _rule([""], ["pods/exec"], ["create"])]
    elif values.worker.enable_run_logging:
        rules = [_rule([""], ["pods"], ["get"])]
    if values.mode == "cluster" and values.plane.name is not None:
        rules.append(_rule(["coordination.k8s.io"], ["leases"], ["get"],
                           names=[plane_lease_name(values.plane.name)]))
    return rules


def doctor_cluster_rules() -> list[Rule]:
    return [_rule([""], ["nodes"], ["get", "patch"]), _rule([""], ["nodes/status"], ["patch"])]


# --------------------------------------------------------------------------- accounts
def worker_account(values: Values) -> str:
    return values.worker.rbac.service_account_name or WORKER_ACCOUNT


def runs_account(values: Values) -> str:
    return values.runs.rbac.service_account_name or RUNS_ACCOUNT


def doctor_account(values: Values) -> str:
    return values.node_doctor.rbac.service_account_name or DOCTOR_ACCOUNT


def _account(name: str, namespace: str, component: str, automount: bool) -> Manifest:
    return {
        "apiVersion": "v1",
        "kind": "ServiceAccount",
        "metadata": metadata(name, component, namespace),
        "automountServiceAccountToken": automount,
    }


def _role(name: str, namespace: str, component: str, rules: list[Rule]) -> Manifest:
    return {"apiVersion": RBAC_API, "kind": "Role",
            "metadata": metadata(name, component, namespace), "rules": rules}


def _cluster_role(name: str, component: str, rules: list[Rule]) -> Manifest:
    return {"apiVersion": RBAC_API, "kind": "ClusterRole", "metadata": metadata(name, component),
            "rules": rules}


def _binding(
    kind: str, name: str, namespace: str | None, component: str, account: str,
    account_namespace: str,
) -> Manifest:
    return {
        "apiVersion": RBAC_API,
        "kind": kind,
        "metadata": metadata(name, component, namespace),
        "roleRef": {
            "apiGroup": "rbac.authorization.k8s.io",
            "kind": "ClusterRole" if kind == "ClusterRoleBinding" else "Role",
            "name": name,
        },
        "subjects": [{"kind": "ServiceAccount", "name": account, "namespace": account_namespace}],
    }


def worker_component(values: Values) -> str:
    """The component label of the worker's objects: what the Deployment runs."""
    return "worker" if values.mode == "cluster" else "control-plane"


def cluster_name(values: Values, component: str) -> str:
    # Cluster-scoped names carry the main namespace so two installations never collide.
    return f"{values.namespace}-{component}"


def worker_rbac(values: Values) -> list[Manifest]:
    if not values.worker.rbac.create:
        return []
    ns, runs_ns, account = values.namespace, values.runs.namespace, worker_account(values)
    name, component = "phalanx-worker", worker_component(values)
    objects = [
        _account(account, ns, component, automount=True),
        _role(name, runs_ns, component, worker_namespace_rules(values)),
        _binding("RoleBinding", name, runs_ns, component, account, ns),
    ]
    lease_rules = leader_rules(values)
    if lease_rules:
        objects.append(_role("phalanx-leader", ns, component, lease_rules))
        objects.append(_binding("RoleBinding", "phalanx-leader", ns, component, account, ns))
    cluster_rules = worker_cluster_rules(values)
    if cluster_rules:
        cname = cluster_name(values, "worker")
        objects.append(_cluster_role(cname, component, cluster_rules))
        objects.append(_binding("ClusterRoleBinding", cname, None, component, account, ns))
    return objects


def runs_rbac(values: Values) -> list[Manifest]:
    if not values.runs.rbac.create:
        return []
    runs_ns, account = values.runs.namespace, runs_account(values)
    rules = runs_rules(values)
    # A run with no permissions has no use for an API token: do not mount one.
    objects = [_account(account, runs_ns, "runs", automount=bool(rules))]
    if rules:
        objects.append(_role(RUNS_ACCOUNT, runs_ns, "runs", rules))
        objects.append(_binding("RoleBinding", RUNS_ACCOUNT, runs_ns, "runs", account, runs_ns))
    return objects


def doctor_rbac(values: Values) -> list[Manifest]:
    if not values.node_doctor.enabled or not values.node_doctor.rbac.create:
        return []
    ns, account = values.namespace, doctor_account(values)
    cname = cluster_name(values, "node-doctor")
    return [
        _account(account, ns, "node-doctor", automount=True),
        _cluster_role(cname, "node-doctor", doctor_cluster_rules()),
        _binding("ClusterRoleBinding", cname, None, "node-doctor", account, ns),
    ]
