"""Bad values are rejected before anything is rendered, naming the field and the fix."""

from __future__ import annotations

import itertools
from typing import Any

import pytest

from phalanx.deploy import Values, commented_values, load_values, load_values_yaml
from phalanx.errors import SpecError

BAD: list[tuple[dict[str, Any], str, str]] = [
    ({"worker": {"rbac": {"allowNodeRead": True}}}, "worker.rbac.allowNodeRead",
     "unknown field"),
    ({"replicas": 1}, "replicas", "unknown field"),
    ({"worker": {"rbac": {"create": False}}}, "worker.rbac.serviceAccountName",
     "no ServiceAccount"),
    ({"runs": {"rbac": {"create": False}}}, "runs.rbac.serviceAccountName",
     "no ServiceAccount"),
    ({"nodeDoctor": {"enabled": True, "rbac": {"create": False}}},
     "nodeDoctor.rbac.serviceAccountName", "no ServiceAccount"),
    ({"runs": {"namespace": "phalanx-system", "rbac": {"serviceAccountName": "phalanx"}}},
     "runs.rbac.serviceAccountName", "same ServiceAccount as worker.rbac"),
    ({"nodeDoctor": {"enabled": True, "rbac": {"serviceAccountName": "phalanx"}}},
     "nodeDoctor.rbac.serviceAccountName", "same ServiceAccount as worker.rbac"),
    ({"worker": {"replicas": 3}}, "store.kind", "3 replicas need the PostgreSQL store"),
    ({"worker": {"replicas": 2}, "store": {"kind": "postgresql"},
      "persistence": {"enabled": False}}, "persistence.enabled", "2 replicas share"),
    ({"worker": {"replicas": -1}}, "worker.replicas", "-1 replicas"),
    ({"runs": {"namespace": "ML_Runs"}}, "runs.namespace", "not a valid name"),
    ({"namespace": "x" * 64}, "namespace", "not a valid name"),
    ({"persistence": {"size": "10GB"}}, "persistence.size", "not a quantity"),
    ({"persistence": {"storageClassName": "Fast_SSD"}}, "persistence.storageClassName",
     "not a valid object name"),
    ({"persistence": {"enabled": False}}, "persistence.enabled", "SQLite"),
    ({"store": {"kind": "mysql"}}, "store.kind", "Input should be"),
    ({"store": {"kind": "postgresql", "postgresql": {"url": "mysql://db/x"}}},
     "store.postgresql.url", "not a PostgreSQL URL"),
    ({"store": {"kind": "postgresql", "postgresql": {"key": "a/b"}}}, "store.postgresql.key",
     "not a valid Secret key"),
    ({"apiKey": {"value": "  "}}, "apiKey.value", "is empty"),
    ({"worker": {"resources": {"requests": {"memory": "3Gi"}, "limits": {"memory": "2Gi"}}}},
     "worker.resources.requests.memory", "above the limit"),
    ({"nodeDoctor": {"resources": {"requests": {"cpu": "2"}, "limits": {"cpu": "500m"}}}},
     "nodeDoctor.resources.requests.cpu", "above the limit"),
    ({"worker": {"resources": {"requests": {"cpu": "lots"}}}}, "worker.resources.requests.cpu",
     "not a quantity"),
    ({"worker": {"resources": {"requests": {"gpu!": "1"}}}}, "worker.resources.requests",
     "not a resource name"),
    ({"worker": {"resources": {"request": {"cpu": "1"}}}}, "worker.resources.request",
     "unknown field"),
    ({"worker": {"nodeSelector": {"bad key": "x"}}}, "worker.nodeSelector",
     "not a valid label key"),
    ({"nodeDoctor": {"nodeSelector": {"gpu": "yes please"}}}, "nodeDoctor.nodeSelector",
     "not a valid label value"),
    ({"worker": {"tolerations": [{"operator": "Exists", "key": "a", "value": "b"}]}},
     "worker.tolerations[0].value", "takes no value"),
    ({"worker": {"tolerations": [{"value": "b"}]}}, "worker.tolerations[0].key",
     "without a key"),
    ({"worker": {"tolerations": [{"key": "a", "tolerationSeconds": 5}]}},
     "worker.tolerations[0].tolerationSeconds", "NoExecute only"),
    ({"worker": {"tolerations": [{"key": "a", "effect": "NoRun"}]}},
     "worker.tolerations[0].effect", "Input should be"),
    ({"worker": {"service": {"port": 70000}}}, "worker.service.port", "less than or equal"),
    ({"worker": {"service": {"type": "Ingress"}}}, "worker.service.type", "Input should be"),
    ({"worker": {"priorityClassName": "High Priority"}}, "worker.priorityClassName",
     "not a valid object name"),
    ({"imagePullSecrets": ["ok", "Not_OK"]}, "imagePullSecrets[1]", "not a valid object name"),
    ({"image": {"pullPolicy": "Sometimes"}}, "image.pullPolicy", "Input should be"),
    ({"runs": {"defaultImage": "my trainer"}}, "runs.defaultImage",
     "not a container image reference"),
    ({"runs": {"defaultImage": ""}}, "runs.defaultImage", "not a container image reference"),
    ({"worker": {"enableRunLogging": "maybe"}}, "worker.enableRunLogging", "valid boolean"),
    ({"runs": {"apiUrl": "phalanx:7780"}}, "runs.apiUrl", "not an http(s) URL"),
    # Checks across fields name the field to change, as a field's own check does.
    ({"runs": {"checkpoints": {"claimName": "ckpt", "hostPath": "/ckpt"}}},
     "runs.checkpoints.hostPath", "both claimName and hostPath"),
    ({"runs": {"checkpoints": {"hostPath": "ckpt"}}}, "runs.checkpoints.hostPath",
     "not an absolute path"),
]


@pytest.mark.parametrize(("data", "field", "message"), BAD)
def test_bad_values_name_the_field(data: dict[str, Any], field: str, message: str) -> None:
    with pytest.raises(SpecError) as caught:
        load_values(data)
    assert caught.value.field == field
    assert message in caught.value.message
    assert caught.value.fix  # every rejection says how to fix it


@pytest.mark.parametrize(
    ("text", "field", "message"),
    [("worker: [1, 2]\n", "worker", "Input should be"),
     ("- a\n- b\n", "my.yaml", "not a mapping"),
     ("worker: {rbac: {\n", "my.yaml", "not valid YAML")],
)
def test_bad_documents(text: str, field: str, message: str) -> None:
    with pytest.raises(SpecError) as caught:
        load_values_yaml(text, source="my.yaml")
    assert caught.value.field == field
    assert message in caught.value.message


def test_empty_document_means_the_defaults() -> None:
    assert load_values_yaml("") == Values()
    assert load_values_yaml("# only a comment\n") == Values()


def test_good_values_keep_what_was_written() -> None:
    values = load_values({"worker": {"resources": {"requests": {"cpu": 1, "memory": "1.5Gi"}}},
                          "runs": {"namespace": "ml-runs"}})
    assert values.worker.resources.requests == {"cpu": "1", "memory": "1.5Gi"}
    assert values.worker.resources.limits == {}  # a resources block replaces the default whole
    assert values.runs.namespace == "ml-runs"
    assert values.node_doctor.enabled is False


def test_commented_values_load_back_to_the_same_values() -> None:
    custom = load_values({"nodeDoctor": {"enabled": True},
                          "worker": {"tolerations": [{"key": "a", "operator": "Exists"}]},
                          "store": {"kind": "postgresql"}, "persistence": {"enabled": False}})
    for values in (Values(), custom):
        text = commented_values(values)
        lines = text.splitlines()
        for before, line in itertools.pairwise(lines):
            if not line.lstrip().startswith("#"):  # every field carries its meaning
                assert before.lstrip().startswith("# "), line
        assert load_values_yaml(text) == values
