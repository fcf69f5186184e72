"""Helpers shared by the deployment tests: value combinations and manifest lookups."""

from __future__ import annotations

from typing import Any

from phalanx.deploy import Values, load_values, render

Manifest = dict[str, Any]

# Value sets that between them switch every optional object on and off.
COMBINATIONS: dict[str, dict[str, Any]] = {
    "defaults": {},
    "everything-on": {
        "apiKey": {"value": "s3cret-token"},
        "store": {"kind": "postgresql",
                  "postgresql": {"url": "postgresql://phalanx:pw@db.example:5432/phalanx"}},
        "persistence": {"size": "50Gi", "storageClassName": "fast-ssd"},
        "imagePullSecrets": ["registry-creds"],
        "image": {"repository": "registry.example/ml/phalanx", "tag": "1.2.3",
                  "pullPolicy": "Always"},
        "worker": {
            "nodeSelector": {"node.kubernetes.io/instance-type": "m5.large"},
            "tolerations": [{"key": "dedicated", "operator": "Equal", "value": "control",
                             "effect": "NoSchedule"},
                            {"key": "node.kubernetes.io/not-ready", "operator": "Exists",
                             "effect": "NoExecute", "tolerationSeconds": 30}],
            "priorityClassName": "phalanx-critical",
            "resources": {"requests": {"cpu": 1, "memory": "2Gi"},
                          "limits": {"cpu": "2", "memory": "4Gi"}},
            "rbac": {"allowNodeReads": True, "allowNodeWrites": True},
            "service": {"type": "LoadBalancer", "port": 443,
                        "annotations": {"service.beta.kubernetes.io/aws-load-balancer-internal":
                                        "true"}},
        },
        "nodeDoctor": {"enabled": True},
        "runs": {"defaultImage": "registry.example/ml/train:2024.1"},
    },
    "bring-your-own-rbac": {
        "worker": {"rbac": {"create": False, "serviceAccountName": "platform-phalanx"}},
        "runs": {"rbac": {"create": False, "serviceAccountName": "my-aws-iam-serviceaccount"}},
        "nodeDoctor": {"enabled": True,
                       "rbac": {"create": False, "serviceAccountName": "doctor-sa"}},
    },
    "one-namespace-postgres-no-volume": {
        "namespace": "ml",
        "runs": {"namespace": "ml"},
        "createNamespaces": False,
        "store": {"kind": "postgresql"},
        "persistence": {"enabled": False},
        "worker": {"enableRunInteractivity": False, "enableRunLogging": False,
                   "rbac": {"allowNodeReads": False}},
    },
    "replicas-with-a-leader": {
        "store": {"kind": "postgresql",
                  "postgresql": {"url": "postgresql://phalanx:pw@db.example:5432/phalanx"}},
        "persistence": {"storageClassName": "nfs-client"},
        "worker": {"replicas": 3},
    },
    "native-admission": {  # the webhook, its generated certificate, the native RBAC
        "namespace": "ml-platform",
        "manageNamespaces": "phalanx.dev/managed=true,team=research",
    },
    "existing-claim-stopped": {
        "persistence": {"existingClaim": "old-phalanx-state"},
        "worker": {"replicas": 0, "enableRunInteractivity": False},
        "nodeDoctor": {"enabled": True, "tolerations": [], "nodeSelector": {},
                       "priorityClassName": None},
    },
}


def rendered(data: dict[str, Any]) -> list[Manifest]:
    return render(load_values(data))


def values_of(data: dict[str, Any]) -> Values:
    return load_values(data)


def find(manifests: list[Manifest], kind: str, name: str | None = None) -> list[Manifest]:
    return [m for m in manifests
            if m["kind"] == kind and (name is None or m["metadata"]["name"] == name)]


def one(manifests: list[Manifest], kind: str, name: str | None = None) -> Manifest:
    found = find(manifests, kind, name)
    assert len(found) == 1, f"expected one {kind} {name or ''}, found {len(found)}"
    return found[0]
