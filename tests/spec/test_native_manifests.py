"""A Job as the API server stores it (defaulted, suspended by Phalanx) translates as the Job
its author wrote: the fields Kubernetes and Phalanx set are dropped first."""

from __future__ import annotations

from typing import Any

import pytest

from phalanx.errors import SpecError
from phalanx.spec.labels import selector_text
from phalanx.spec.manifests import translate
from phalanx.spec.manifests.native import (
    JOB_ANNOTATION,
    OWNER_ANNOTATION,
    as_authored,
    job_name,
    owner_of,
)

UID = "6f0f5a2c-1d7e-4c34-9a51-7c1f0c1e2b3a"


def stored_job(labels: dict[str, str] | None = None) -> dict[str, Any]:
    controller = {"batch.kubernetes.io/controller-uid": UID, "controller-uid": UID,
                  "batch.kubernetes.io/job-name": "train", "job-name": "train"}
    return {
        "apiVersion": "batch/v1", "kind": "Job",
        "metadata": {"name": "train", "namespace": "team-a", "uid": UID,
                     "resourceVersion": "42", "generation": 2, "labels": labels or {},
                     "annotations": {JOB_ANNOTATION: "x", OWNER_ANNOTATION: "alice"},
                     "managedFields": [{"manager": "kubectl-create"}]},
        "spec": {"parallelism": 2, "completions": 2, "suspend": True,
                 "podReplacementPolicy": "TerminatingOrFailed", "manualSelector": False,
                 "selector": {"matchLabels": {"batch.kubernetes.io/controller-uid": UID}},
                 "template": {"metadata": {"labels": {**controller, "app": "train"}},
                              "spec": {"restartPolicy": "Never", "containers": [{
                                  "name": "main", "image": "registry.example.com/t:1",
                                  "resources": {"requests": {"cpu": "1"}}}]}}},
        "status": {"active": 0},
    }


def test_a_stored_job_translates_under_its_namespaced_name() -> None:
    manifest = as_authored(stored_job({"kueue.x-k8s.io/queue-name": "team-a"}), None)
    spec = translate(manifest).spec
    assert spec.name == job_name("team-a", "train")
    assert spec.queue == "team-a"
    assert spec.pod_sets[0].replicas == 2
    assert "selector" not in manifest["spec"] and "suspend" not in manifest["spec"]
    assert manifest["spec"]["template"]["metadata"]["labels"] == {"app": "train"}
    assert "annotations" not in manifest["metadata"]  # Phalanx's own are not the author's
    assert owner_of(stored_job()) == "alice"


def test_the_namespace_queue_applies_only_without_a_label() -> None:
    assert translate(as_authored(stored_job(), "ns-queue")).spec.queue == "ns-queue"
    labelled = stored_job({"kueue.x-k8s.io/queue-name": "own"})
    assert translate(as_authored(labelled, "ns-queue")).spec.queue == "own"


def test_names_are_dns_labels_and_keep_namespaces_apart() -> None:
    assert job_name("a-b", "c") != job_name("a", "b-c")
    long = job_name("n" * 63, "j" * 63)
    assert len(long) <= 63 and long[0].isalnum() and long[-1].isalnum()


@pytest.mark.parametrize("text", ["bad key", "!managed", "a=b,=c", "k in (a,b)"])
def test_a_namespace_selector_is_checked(text: str) -> None:
    with pytest.raises(SpecError) as refused:
        selector_text(text, "--manage-namespaces")
    assert refused.value.field == "--manage-namespaces"


def test_a_selector_is_normalised() -> None:
    assert selector_text(" phalanx.dev/managed = true ,team=a", "f") == \
        "phalanx.dev/managed=true,team=a"
