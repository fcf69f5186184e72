"""RBAC for every switch combination, checked as effective permissions.

Roles and bindings are resolved the way the API server's authorizer does (a
RoleBinding grants its Role in its own namespace, a ClusterRoleBinding grants its
ClusterRole everywhere), then compared with the permissions the MosaicML compute
plane documents, written out here independently of the renderer.
"""

from __future__ import annotations

import itertools
from typing import Any

import pytest

from tests.deploy.conftest import Manifest, find, one, rendered

CLUSTER = "*"
ALL = ("get", "list", "watch", "create", "update", "patch", "delete")
READ = ("get", "list", "watch")
MAIN, RUNS = "phalanx-system", "phalanx-runs"

Permission = tuple[str, str, str, str]  # (namespace or CLUSTER, apiGroup, resource, verb)


def effective(manifests: list[Manifest]) -> dict[tuple[str, str], set[Permission]]:
    """ServiceAccount (namespace, name) -> every permission its bindings grant."""
    roles: dict[tuple[str, str, str], list[dict[str, Any]]] = {}
    for m in manifests:
        if m["kind"] in ("Role", "ClusterRole"):
            scope = m["metadata"].get("namespace", CLUSTER)
            roles[(m["kind"], scope, m["metadata"]["name"])] = m["rules"]
    grants: dict[tuple[str, str], set[Permission]] = {}
    for m in manifests:
        if m["kind"] not in ("RoleBinding", "ClusterRoleBinding"):
            continue
        ref = m["roleRef"]
        assert ref["apiGroup"] == "rbac.authorization.k8s.io"
        scope = m["metadata"].get("namespace", CLUSTER)
        key = (ref["kind"], CLUSTER if ref["kind"] == "ClusterRole" else scope, ref["name"])
        assert key in roles, f"{m['kind']} {m['metadata']['name']} points at a missing {key}"
        for subject in m["subjects"]:
            assert subject["kind"] == "ServiceAccount"
            perms = grants.setdefault((subject["namespace"], subject["name"]), set())
            for rule in roles[key]:
                assert "nonResourceURLs" not in rule
                # A rule limited to named objects grants "resource/name" only.
                resources = [f"{r}/{n}" for r in rule["resources"]
                             for n in rule["resourceNames"]] if "resourceNames" in rule \
                    else rule["resources"]
                for group, resource, verb in itertools.product(
                    rule["apiGroups"], resources, rule["verbs"]
                ):
                    perms.add((scope, group, resource, verb))
    return grants


def _grant(scope: str, group: str, resources: tuple[str, ...], verbs: tuple[str, ...]
           ) -> set[Permission]:
    return {(scope, group, r, v) for r in resources for v in verbs}


def expected_worker(reads: bool, writes: bool, interactive: bool, cluster: bool = False
                    ) -> set[Permission]:
    perms = _grant(RUNS, "", ("pods", "configmaps", "secrets", "services"), ALL)
    if cluster:  # the worker of a cluster-only install renews its plane's Lease
        perms |= _grant(RUNS, "coordination.k8s.io", ("leases",), ALL)
    perms |= _grant(RUNS, "scheduling.sigs.k8s.io", ("podgroups",), ALL)
    perms |= _grant(RUNS, "scheduling.x-k8s.io", ("podgroups",), ALL)
    perms |= _grant(RUNS, "", ("events",), READ)
    perms |= _grant(RUNS, "", ("pods/log",), ("get",))  # log streaming: a subresource
    if interactive:  # phalanx exec: the WebSocket upgrade is a GET, also checked as create
        perms |= _grant(RUNS, "", ("pods/exec",), ("get", "create"))
    if reads:
        perms |= _grant(CLUSTER, "", ("nodes",), READ)
        perms |= _grant(CLUSTER, "apiextensions.k8s.io", ("customresourcedefinitions",), READ)
        perms |= _grant(CLUSTER, "", ("pods",), READ)  # usage of pods Phalanx did not create
    if writes:
        perms |= _grant(CLUSTER, "", ("nodes",), ("patch",))
    return perms


def expected_runs(interactive: bool, logging: bool, cluster: bool = False) -> set[Permission]:
    perms: set[Permission] = set()
    if interactive:
        perms = {(RUNS, "", "pods", "get"), (RUNS, "", "pods/exec", "create")}
    elif logging:
        perms = {(RUNS, "", "pods", "get")}
    if cluster:  # the fence around each rank reads its plane's Lease, and only that one
        perms.add((RUNS, "coordination.k8s.io", "leases/phalanx-plane-gcp-a", "get"))
    return perms


def expected_doctor() -> set[Permission]:
    # What `phalanx doctor --report kubernetes` does to its own Node, and nothing else.
    return (_grant(CLUSTER, "", ("nodes",), ("get", "patch"))
            | _grant(CLUSTER, "", ("nodes/status",), ("patch",)))


SWITCHES = list(itertools.product([False, True], repeat=7))
CLUSTER_MODE = {"mode": "cluster", "controlPlane": {"url": "https://cp.example.com"},
                "plane": {"name": "gcp-a"}}


@pytest.mark.parametrize(
    ("reads", "writes", "interactive", "logging", "worker_create", "runs_create", "cluster"),
    SWITCHES,
)
def test_worker_and_runs_permissions(
    reads: bool, writes: bool, interactive: bool, logging: bool, worker_create: bool,
    runs_create: bool, cluster: bool,
) -> None:
    worker_rbac: dict[str, Any] = {"allowNodeReads": reads, "allowNodeWrites": writes,
                                   "create": worker_create}
    if not worker_create:
        worker_rbac["serviceAccountName"] = "own-worker"
    runs_rbac: dict[str, Any] = {"create": runs_create}
    if not runs_create:
        runs_rbac["serviceAccountName"] = "own-runs"
    manifests = rendered({
        **(CLUSTER_MODE if cluster else {}),
        "worker": {"rbac": worker_rbac, "enableRunInteractivity": interactive,
                   "enableRunLogging": logging},
        "runs": {"rbac": runs_rbac},
    })
    grants = effective(manifests)
    worker_sa = "phalanx" if worker_create else "own-worker"
    runs_sa = "phalanx-run" if runs_create else "own-runs"

    expected: dict[tuple[str, str], set[Permission]] = {}
    if worker_create:
        expected[(MAIN, worker_sa)] = expected_worker(reads, writes, interactive, cluster)
    if runs_create and expected_runs(interactive, logging, cluster):
        expected[(RUNS, runs_sa)] = expected_runs(interactive, logging, cluster)
    assert grants == expected

    # Nothing cluster-scoped exists unless a switch asks for it.
    cluster_objects = find(manifests, "ClusterRole") + find(manifests, "ClusterRoleBinding")
    assert bool(cluster_objects) == (worker_create and (reads or writes))

    # The pods run as the accounts the RBAC was made for, and those accounts exist iff created.
    pod = one(manifests, "Deployment")["spec"]["template"]["spec"]
    assert pod["serviceAccountName"] == worker_sa
    env = {e["name"]: e.get("value") for e in pod["containers"][0]["env"]}
    assert env["PHALANX_RUNS_SERVICE_ACCOUNT"] == runs_sa
    accounts = {(m["metadata"]["namespace"], m["metadata"]["name"]): m
                for m in find(manifests, "ServiceAccount")}
    assert ((MAIN, worker_sa) in accounts) == worker_create
    assert ((RUNS, runs_sa) in accounts) == runs_create
    if runs_create:
        # A run with no permissions gets no API token mounted either.
        automount = accounts[(RUNS, runs_sa)]["automountServiceAccountToken"]
        assert automount == bool(expected_runs(interactive, logging, cluster))


@pytest.mark.parametrize(("enabled", "create"), list(itertools.product([False, True], repeat=2)))
def test_node_doctor_permissions(enabled: bool, create: bool) -> None:
    rbac: dict[str, Any] = {"create": create}
    if not create:
        rbac["serviceAccountName"] = "own-doctor"
    manifests = rendered({"nodeDoctor": {"enabled": enabled, "rbac": rbac}})
    grants = effective(manifests)
    doctor_grants = {k: v for k, v in grants.items() if k[1] in ("phalanx-node-doctor",
                                                                  "own-doctor")}
    daemonsets = find(manifests, "DaemonSet")
    if not enabled:
        assert doctor_grants == {} and daemonsets == []
        return
    account = "phalanx-node-doctor" if create else "own-doctor"
    assert doctor_grants == ({(MAIN, account): expected_doctor()} if create else {})
    assert daemonsets[0]["spec"]["template"]["spec"]["serviceAccountName"] == account
    assert daemonsets[0]["spec"]["template"]["spec"]["containers"][0]["args"] == [
        "doctor", "--report", "kubernetes"]


def test_created_account_takes_the_given_name() -> None:
    manifests = rendered({"worker": {"rbac": {"serviceAccountName": "phalanx-cp"}},
                          "runs": {"rbac": {"serviceAccountName": "trainer"}}})
    grants = effective(manifests)
    assert set(grants) == {(MAIN, "phalanx-cp"), (RUNS, "trainer")}


def test_two_installations_do_not_share_cluster_roles() -> None:
    a = rendered({"namespace": "phalanx-a", "runs": {"namespace": "runs-a"}})
    b = rendered({"namespace": "phalanx-b", "runs": {"namespace": "runs-b"}})
    names_a = {m["metadata"]["name"] for m in find(a, "ClusterRole")}
    names_b = {m["metadata"]["name"] for m in find(b, "ClusterRole")}
    assert names_a and names_b and not names_a & names_b


@pytest.mark.parametrize("allowed", [False, True])
def test_provisioning_requests_are_granted_in_the_runs_namespace_only_when_allowed(
    allowed: bool,
) -> None:
    grants = effective(rendered({"worker": {"rbac": {"allowProvisioningRequests": allowed}}}))
    worker = grants[(MAIN, "phalanx")]
    extra = (_grant(RUNS, "autoscaling.x-k8s.io", ("provisioningrequests",), ALL)
             | _grant(RUNS, "", ("podtemplates",), ALL))
    assert worker == expected_worker(True, False, True) | (extra if allowed else set())
