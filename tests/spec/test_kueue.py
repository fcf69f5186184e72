"""Kueue's own objects read as Phalanx's configuration and written back (spec/kueue.py)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import jsonschema
import pytest
import yaml

from phalanx.errors import SpecError
from phalanx.spec import QueueConfig, load_config_yaml, parse_config_documents
from phalanx.spec.kueue import to_kueue

SCHEMAS = Path(__file__).parent / "data" / "kueue"
EXAMPLES = Path(__file__).parents[2] / "examples" / "kueue"
VERSIONS = ["v1beta1", "v1beta2"]


def kueue(version: str, kind: str, name: str, spec: dict[str, Any] | None = None,
          **meta: Any) -> dict[str, Any]:
    doc: dict[str, Any] = {"apiVersion": f"kueue.x-k8s.io/{version}", "kind": kind,
                           "metadata": {"name": name, **meta}}
    if spec is not None:
        doc["spec"] = spec
    return doc


def parsed(*docs: dict[str, Any]) -> list[dict[str, Any]]:
    return [obj.to_dict() for obj in parse_config_documents(list(docs))]


GROUPS = [{"coveredResources": ["cpu", "nvidia.com/gpu"], "flavors": [
    {"name": "h100", "resources": [
        {"name": "cpu", "nominalQuota": "64"},
        {"name": "nvidia.com/gpu", "nominalQuota": 16, "borrowingLimit": 8,
         "lendingLimit": 4}]}]}]
SHORT_GROUPS = [{"coveredResources": ["cpu", "nvidia.com/gpu"], "flavors": [
    {"name": "h100", "resources": [
        {"name": "cpu", "nominalQuota": "64"},
        {"name": "nvidia.com/gpu", "nominalQuota": "16", "borrowingLimit": "8",
         "lendingLimit": "4"}]}]}]
CQ_SPEC = {
    "resourceGroups": GROUPS, "namespaceSelector": {}, "queueingStrategy": "StrictFIFO",
    "preemption": {"withinClusterQueue": "LowerPriority", "reclaimWithinCohort": "Any",
                   "borrowWithinCohort": {"policy": "LowerPriority",
                                          "maxPriorityThreshold": 100}},
    "stopPolicy": "Hold", "fairSharing": {"weight": "500m"},
}
CQ_PHALANX = {
    "kind": "ClusterQueue", "name": "team-a", "cohort": "research",
    "resourceGroups": SHORT_GROUPS, "queueingStrategy": "StrictFIFO",
    "preemption": {"withinClusterQueue": "LowerPriority", "reclaimWithinCohort": "Any",
                   "borrowWithinCohort": {"policy": "LowerPriority",
                                          "maxPriorityThreshold": 100}},
    "flavorFungibility": {"whenCanBorrow": "TryNextFlavor", "whenCanPreempt": "Preempt"},
    "fairSharing": {"weight": 0.5}, "stopPolicy": "Hold", "capacityFollowsHealth": False,
    "avoidDegradedNodes": False,
}

# (Kueue document, Phalanx's short form it becomes), by kind and version.
TRANSLATIONS = [
    pytest.param(
        kueue(v, "ResourceFlavor", "h100", {
            "nodeLabels": {"gpu": "h100"},
            "nodeTaints": [{"key": "gpu", "value": "true", "effect": "NoSchedule"}],
            "tolerations": [{"key": "spot", "operator": "Exists", "effect": "NoSchedule"}]}),
        {"kind": "ResourceFlavor", "name": "h100", "nodeLabels": {"gpu": "h100"},
         "nodeTaints": [{"key": "gpu", "value": "true", "effect": "NoSchedule"}],
         "tolerations": [{"key": "spot", "operator": "Exists", "value": "",
                          "effect": "NoSchedule"}]},
        id=f"ResourceFlavor-{v}")
    for v in VERSIONS
] + [
    pytest.param(
        kueue("v1beta1", "ClusterQueue", "team-a", {
            **CQ_SPEC, "cohort": "research",
            "flavorFungibility": {"whenCanBorrow": "TryNextFlavor", "whenCanPreempt": "Preempt"}}),
        CQ_PHALANX, id="ClusterQueue-v1beta1"),
    pytest.param(
        kueue("v1beta2", "ClusterQueue", "team-a", {
            **CQ_SPEC, "cohortName": "research",
            "flavorFungibility": {"whenCanBorrow": "TryNextFlavor",
                                  "whenCanPreempt": "MayStopSearch"}}),
        CQ_PHALANX, id="ClusterQueue-v1beta2"),
] + [
    pytest.param(
        kueue(v, "Cohort", "research", {"parentName": "org", "resourceGroups": GROUPS,
                                        "fairSharing": {"weight": 3}}),
        {"kind": "Cohort", "name": "research", "parent": "org", "resourceGroups": SHORT_GROUPS,
         "fairSharing": {"weight": 3.0}},
        id=f"Cohort-{v}")
    for v in VERSIONS
] + [
    pytest.param(
        kueue(v, "LocalQueue", "user-queue", {"clusterQueue": "team-a", "stopPolicy":
                                              "HoldAndDrain"}, namespace="nlp"),
        {"kind": "LocalQueue", "name": "nlp", "clusterQueue": "team-a",
         "stopPolicy": "HoldAndDrain"},
        id=f"LocalQueue-{v}")
    for v in VERSIONS
] + [
    pytest.param(
        {**kueue(v, "WorkloadPriorityClass", "production"), "value": 1000,
         "description": "serving"},
        {"kind": "PriorityClass", "name": "production", "value": 1000,
         "description": "serving"},
        id=f"WorkloadPriorityClass-{v}")
    for v in VERSIONS
] + [
    pytest.param(
        {"apiVersion": "scheduling.k8s.io/v1", "kind": "PriorityClass",
         "metadata": {"name": "urgent"}, "value": 500, "globalDefault": False,
         "preemptionPolicy": "PreemptLowerPriority", "description": "pages someone"},
        {"kind": "PriorityClass", "name": "urgent", "value": 500,
         "description": "pages someone"},
        id="PriorityClass-scheduling.k8s.io/v1"),
]

CONTEXT = [
    {"kind": "ResourceFlavor", "name": "h100"},
    {"kind": "Cohort", "name": "org"},
    {"kind": "ClusterQueue", "name": "team-a"},
]


@pytest.mark.parametrize(("document", "expected"), TRANSLATIONS)
def test_each_kind_and_version_becomes_phalanx_form(
        document: dict[str, Any], expected: dict[str, Any]) -> None:
    [obj] = parse_config_documents([document])

    assert obj.to_dict() == expected
    # ...and holds together with the objects it names.
    QueueConfig().merged([*parse_config_documents(CONTEXT), obj])


KUBERNETES_SET = {
    "uid": "6c1f0c1e-0000-4000-8000-000000000000", "resourceVersion": "4242",
    "creationTimestamp": "2026-01-01T00:00:00Z", "generation": 3,
    "managedFields": [{"manager": "kubectl", "operation": "Apply"}],
    "finalizers": ["kueue.x-k8s.io/resource-in-use"],
    "labels": {"app.kubernetes.io/part-of": "ml-platform"},
    "annotations": {"kubectl.kubernetes.io/last-applied-configuration": "{}"},
}


def test_what_kubernetes_sets_is_ignored_as_kubectl_does() -> None:
    carried = kueue("v1beta1", "ResourceFlavor", "h100", {"nodeLabels": {"gpu": "h100"}},
                    **KUBERNETES_SET)
    carried["status"] = {"conditions": []}

    assert parsed(carried) == parsed(kueue("v1beta1", "ResourceFlavor", "h100",
                                           {"nodeLabels": {"gpu": "h100"}}))


# (document, the path the refusal names, a word of what Phalanx does instead)
REFUSALS = [
    pytest.param(kueue("v1beta2", "ClusterQueue", "team-a", {
        "admissionChecksStrategy": {"admissionChecks": [{"name": "prov"}]}}),
        "documents[0] (ClusterQueue team-a).spec.admissionChecksStrategy.admissionChecks[0]",
        "same file", id="admissionChecksStrategy-without-its-check"),
    pytest.param(kueue("v1beta1", "ClusterQueue", "team-a", {"admissionChecks": ["prov"]}),
                 "documents[0] (ClusterQueue team-a).spec.admissionChecks[0]", "same file",
                 id="admissionChecks-without-its-check"),
    pytest.param(kueue("v1beta2", "ClusterQueue", "team-a", {"admissionChecks": ["prov"]}),
                 "documents[0] (ClusterQueue team-a).spec.admissionChecks", "spelling",
                 id="admissionChecks-is-no-v1beta2-field"),
    pytest.param(kueue("v1beta1", "AdmissionCheck", "mk", {
        "controllerName": "kueue.x-k8s.io/multikueue"}),
        "documents[0] (AdmissionCheck mk).spec.controllerName", "provisioning-request",
        id="AdmissionCheck-of-another-controller"),
    pytest.param(kueue("v1beta2", "ProvisioningRequestConfig", "prc", {
        "provisioningClassName": "queued-provisioning.gke.io",
        "retryStrategy": {"backoffLimitCount": 1}}),
        "documents[0] (ProvisioningRequestConfig prc).spec.retryStrategy",
        "ProvisioningPolicy", id="ProvisioningRequestConfig-retryStrategy"),
    pytest.param(kueue("v1beta2", "ClusterQueue", "team-a", {"cohort": "research"}),
                 "documents[0] (ClusterQueue team-a).spec.cohort", "spelling",
                 id="v1beta1-field-in-v1beta2"),
    pytest.param(kueue("v1beta1", "ClusterQueue", "team-a", {
        "namespaceSelector": {"matchLabels": {"team": "a"}}}),
        "documents[0] (ClusterQueue team-a).spec.namespaceSelector", "teams",
        id="namespaceSelector"),
    pytest.param(kueue("v1beta2", "ClusterQueue", "team-a", {
        "admissionScope": {"admissionMode": "UsageBasedAdmissionFairSharing"}}),
        "documents[0] (ClusterQueue team-a).spec.admissionScope", "priority",
        id="admissionScope"),
    pytest.param(kueue("v1beta2", "ClusterQueue", "team-a", {"flavorFungibility": {
        "whenCanBorrow": "TryNextFlavor", "whenCanPreempt": "TryNextFlavor",
        "preference": "PreemptionOverBorrowing"}}),
        "documents[0] (ClusterQueue team-a).spec.flavorFungibility.preference", "order",
        id="preference"),
    pytest.param(kueue("v1beta1", "ResourceFlavor", "spot", {"tolerations": [
        {"key": "spot", "operator": "Exists", "tolerationSeconds": 30}]}),
        "documents[0] (ResourceFlavor spot).spec.tolerations[0].tolerationSeconds", "evicts",
        id="tolerationSeconds"),
    pytest.param(kueue("v1beta1", "LocalQueue", "q", {"clusterQueue": "team-a",
                                                      "fairSharing": {"weight": 2}},
                       namespace="nlp"),
                 "documents[0] (LocalQueue q).spec.fairSharing", "ClusterQueues",
                 id="LocalQueue-fairSharing"),
    pytest.param({"apiVersion": "scheduling.k8s.io/v1", "kind": "PriorityClass",
                  "metadata": {"name": "bulk"}, "value": 1, "preemptionPolicy": "Never"},
                 "documents[0] (PriorityClass bulk).preemptionPolicy", "preemption policy",
                 id="preemptionPolicy-Never"),
    pytest.param({"apiVersion": "scheduling.k8s.io/v1", "kind": "PriorityClass",
                  "metadata": {"name": "normal"}, "value": 1, "globalDefault": True},
                 "documents[0] (PriorityClass normal).globalDefault", "default",
                 id="globalDefault"),
    pytest.param(kueue("v1beta1", "MultiKueueConfig", "mk", {}),
                 "documents[0] (MultiKueueConfig mk).kind", "ResourceFlavor",
                 id="unread-kind"),
    pytest.param(kueue("v1alpha1", "Cohort", "c", {}),
                 "documents[0] (Cohort c).apiVersion", "v1beta2", id="old-version"),
    pytest.param(kueue("v1beta1", "ResourceFlavor", "f", {}, generateName="f-"),
                 "documents[0] (ResourceFlavor f).metadata.generateName", "metadata.name",
                 id="generateName"),
    pytest.param(kueue("v1beta1", "ClusterQueue", "team-a", {},
                       annotations={"phalanx.dev/cohort": '"x"'}),
                 "documents[0] (ClusterQueue team-a).metadata.annotations.phalanx.dev/cohort",
                 "maxPendingJobs", id="annotation-of-a-kueue-field"),
    pytest.param(kueue("v1beta1", "ClusterQueue", "team-a", {},
                       annotations={"phalanx.dev/maxPendingJobs": '"many"'}),
                 "documents[0] (ClusterQueue team-a).metadata.annotations."
                 "phalanx.dev/maxPendingJobs", "", id="annotation-bad-value"),
    pytest.param(kueue("v1beta1", "ClusterQueue", "Team_A", {}),
                 "documents[0] (ClusterQueue Team_A).metadata.name", "lowercase",
                 id="bad-name"),
    pytest.param(kueue("v1beta1", "ClusterQueue", "team-a", {"resourceGroups": [
        {"coveredResources": ["cpu"], "flavors": [{"name": "h100", "resources": [
            {"name": "cpu", "nominalQuota": "lots"}]}]}]}),
        "documents[0] (ClusterQueue team-a).spec.resourceGroups[0].flavors[0].resources[0]"
        ".nominalQuota", "", id="bad-quantity"),
]


@pytest.mark.parametrize(("document", "path", "instead"), REFUSALS)
def test_what_phalanx_cannot_honour_is_refused_naming_the_path(
        document: dict[str, Any], path: str, instead: str) -> None:
    with pytest.raises(SpecError) as caught:
        parse_config_documents([document])

    assert caught.value.field == path
    assert instead in (caught.value.fix or "")


def test_a_mixed_file_is_read_in_order_and_refused_as_a_whole() -> None:
    text = yaml.safe_dump_all([
        kueue("v1beta1", "ResourceFlavor", "h100", {}),
        {"kind": "ClusterQueue", "name": "team-a", "resourceGroups": [{
            "coveredResources": ["cpu"],
            "flavors": [{"name": "h100", "resources": [{"name": "cpu", "nominalQuota": 4}]}]}]},
        kueue("v1beta2", "LocalQueue", "user-queue", {"clusterQueue": "team-a"},
              namespace="team-a"),
        {"kind": "PriorityClass", "name": "urgent", "value": 50},
    ])
    notes: list[str] = []

    objects = load_config_yaml(text, "mixed.yaml", notes)

    assert [(o.kind, o.name) for o in objects] == [
        ("ResourceFlavor", "h100"), ("ClusterQueue", "team-a"), ("LocalQueue", "team-a"),
        ("PriorityClass", "urgent")]
    assert notes == ["LocalQueue user-queue of namespace team-a becomes Phalanx's queue "
                     "team-a: a namespace is one team's queue (jobs write queue: team-a)"]
    broken = text.replace("clusterQueue: team-a", "clusterQueue: team-a\n  bogus: 1")
    with pytest.raises(SpecError) as caught:
        load_config_yaml(broken, "mixed.yaml")
    assert caught.value.field == "mixed.yaml[2] (LocalQueue user-queue).spec.bogus"


def test_what_is_read_but_kept_nowhere_is_said() -> None:
    notes: list[str] = []

    parse_config_documents([
        kueue("v1beta1", "ResourceFlavor", "h100", {"topologyName": "gpu-racks"}),
        kueue("v1beta1", "LocalQueue", "user-queue", {"clusterQueue": "cq"}),
    ], notes=notes)

    assert "topologyName gpu-racks is not kept" in notes[0]
    assert "LocalQueue user-queue of namespace default becomes Phalanx's queue default" in notes[1]


def test_phalanx_additions_travel_as_annotations() -> None:
    flavor = {"kind": "ResourceFlavor", "name": "burst", "nodeLabels": {"pool": "burst"},
              "provisioning": {"provider": "local", "node": {"cpu": "2"}, "maxNodes": 4}}
    cq = {"kind": "ClusterQueue", "name": "team-a", "maxPendingJobs": 100,
          "minRuntime": "10m", "capacityFollowsHealth": True, "reserveAfter": "1h",
          "holdForLargeGangs": {"minGPUs": 9, "after": "6h"},
          "preemption": {"reclaimWithinCohort": "Any", "protectAfterStart": "30m",
                         "maxPreemptions": 5}}
    pc = {"kind": "PriorityClass", "name": "urgent", "value": 5, "minRuntime": "1h"}
    objects = parse_config_documents([flavor, cq, pc])

    written = [to_kueue(o) for o in objects]

    annotations = written[1]["metadata"]["annotations"]
    assert json.loads(annotations["phalanx.dev/maxPendingJobs"]) == 100
    assert "phalanx.dev/avoidDegradedNodes" not in annotations
    # Kueue's preemption has no anti-thrashing fields: they travel as annotations too (an
    # unset one, as the window here, is left unsaid).
    assert written[1]["spec"]["preemption"] == {"withinClusterQueue": "Never",
                                                "reclaimWithinCohort": "Any"}
    assert json.loads(annotations["phalanx.dev/maxPreemptions"]) == 5
    assert json.loads(annotations["phalanx.dev/protectAfterStart"]) == "30m"
    assert "phalanx.dev/maxPreemptionsWindow" not in annotations
    assert json.loads(annotations["phalanx.dev/reserveAfter"]) == "1h"
    assert json.loads(annotations["phalanx.dev/holdForLargeGangs"]) == {"minGPUs": 9,
                                                                     "after": "6h"}
    assert parse_config_documents(written) == objects


@pytest.mark.parametrize("version", VERSIONS)
def test_written_back_it_validates_against_kueues_schema_and_reads_the_same(
        version: str) -> None:
    objects = load_config_yaml(
        (EXAMPLES / "flavors.yaml").read_text() + "\n---\n" + (EXAMPLES / "queues.yaml").read_text())
    config = QueueConfig().merged(objects)

    written = [to_kueue(o, version) for o in config.objects()]

    for doc in written:
        assert doc["apiVersion"] == f"kueue.x-k8s.io/{version}"
        schema = json.loads((SCHEMAS / version / f"{doc['kind']}.json").read_text())
        jsonschema.validate(doc, schema)
    assert parse_config_documents(written) == config.objects()


def test_kueue_preemption_with_anti_thrashing_fields_is_refused_naming_the_annotation() -> None:
    doc = to_kueue(parse_config_documents([{"kind": "ClusterQueue", "name": "q"}])[0])
    doc["spec"]["preemption"]["maxPreemptions"] = 3  # not a field of Kueue's preemption
    with pytest.raises(SpecError) as caught:
        parse_config_documents([doc])
    assert "maxPreemptions" in str(caught.value)
    del doc["spec"]["preemption"]["maxPreemptions"]
    doc["metadata"]["annotations"] = {"phalanx.dev/maxPreemptions": "-1"}
    with pytest.raises(SpecError) as caught:
        parse_config_documents([doc])
    assert caught.value.field is not None
    assert caught.value.field.endswith("metadata.annotations.phalanx.dev/maxPreemptions")


@pytest.mark.parametrize("version", VERSIONS)
def test_the_schemas_catch_what_kueue_would_refuse(version: str) -> None:
    cq = to_kueue(parse_config_documents([CQ_PHALANX])[0], version)
    schema = json.loads((SCHEMAS / version / "ClusterQueue.json").read_text())
    jsonschema.validate(cq, schema)
    cq["spec"]["cohort" if version == "v1beta2" else "cohortName"] = "research"

    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate(cq, schema)


def test_a_namespace_is_one_queue() -> None:
    docs = [kueue("v1beta1", "LocalQueue", "train", {"clusterQueue": "cq"}, namespace="nlp"),
            kueue("v1beta1", "LocalQueue", "serve", {"clusterQueue": "cq"}, namespace="nlp")]

    with pytest.raises(SpecError) as caught:
        parse_config_documents(docs)

    assert caught.value.field == "documents[1] (LocalQueue serve).metadata.namespace"
    assert "holds LocalQueue train already" in caught.value.message


def provisioning_file(version: str, flavor_annotations: dict[str, str]) -> list[dict[str, Any]]:
    check_rule: dict[str, Any] = (
        {"admissionChecks": ["prov"]} if version == "v1beta1"
        else {"admissionChecksStrategy": {"admissionChecks": [{"name": "prov",
                                                               "onFlavors": ["burst"]}]}})
    return [
        kueue(version, "ResourceFlavor", "burst", {"nodeLabels": {"pool": "burst"}},
              annotations=flavor_annotations),
        kueue(version, "ClusterQueue", "team-a", {**check_rule, "resourceGroups": [{
            "coveredResources": ["cpu"],
            "flavors": [{"name": "burst", "resources": [{"name": "cpu", "nominalQuota": 8}]}]}]}),
        kueue(version, "AdmissionCheck", "prov", {
            "controllerName": "kueue.x-k8s.io/provisioning-request",
            "parameters": {"apiGroup": "kueue.x-k8s.io", "kind": "ProvisioningRequestConfig",
                           "name": "gke-queued"}}),
        kueue(version, "ProvisioningRequestConfig", "gke-queued", {
            "provisioningClassName": "queued-provisioning.gke.io",
            "parameters": {"maxRunDurationSeconds": "3600"}}),
    ]


@pytest.mark.parametrize("version", VERSIONS)
def test_a_provisioning_admission_check_becomes_the_flavors_provisioning(version: str) -> None:
    notes: list[str] = []
    docs = provisioning_file(version, {"phalanx.dev/provisioning": json.dumps(
        {"node": {"cpu": "4"}, "maxNodes": 6})})

    objects = parse_config_documents(docs, notes=notes)

    assert [(o.kind, o.name) for o in objects] == [("ResourceFlavor", "burst"),
                                                   ("ClusterQueue", "team-a")]
    provisioning = objects[0].to_dict()["provisioning"]
    assert provisioning["provider"] == "kubernetes-provisioningrequest"
    assert provisioning["options"] == {"className": "queued-provisioning.gke.io",
                                       "parameters": {"maxRunDurationSeconds": "3600"}}
    assert provisioning["maxNodes"] == 6
    assert "AdmissionCheck prov of ClusterQueue team-a becomes ResourceFlavor burst's" in notes[0]
    # Written back, the flavor carries it all in its annotation, and reads the same.
    assert parse_config_documents([to_kueue(o, version) for o in objects]) == objects


def test_a_provisioning_check_needs_the_shape_of_a_node() -> None:
    with pytest.raises(SpecError) as caught:
        parse_config_documents(provisioning_file("v1beta1", {}))

    assert caught.value.field == "documents[1] (ClusterQueue team-a).spec.admissionChecks[0]"
    assert "phalanx.dev/provisioning" in (caught.value.fix or "")


def test_an_unused_check_is_said_not_kept() -> None:
    notes: list[str] = []

    objects = parse_config_documents(provisioning_file("v1beta2", {})[2:], notes=notes)

    assert objects == []
    assert notes == ["AdmissionCheck prov is named by no ClusterQueue of this file; it is not "
                     "kept"]
