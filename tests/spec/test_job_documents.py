"""Several jobs in one YAML file, job labels checked like Kubernetes labels, label selectors,
and removing queue configuration objects only when nothing names them."""

from __future__ import annotations

import pytest

from phalanx.errors import Conflict, NotFound, SpecError
from phalanx.spec import QueueConfig, load_config_yaml, load_jobs_yaml
from phalanx.spec.labels import parse_label_selector

JOB = "name: {name}\npodSets: [{{resources: {{cpu: 1}}, command: [x]}}]\n"


def test_a_file_of_several_jobs_loads_every_one() -> None:
    text = "---\n".join(JOB.format(name=f"j{i}") for i in range(3))
    assert [spec.name for spec in load_jobs_yaml(text, "jobs.yaml")] == ["j0", "j1", "j2"]


def test_an_error_names_the_document_index_and_field() -> None:
    text = JOB.format(name="ok") + "---\nname: second\npodSets: [{replicas: 0}]\n"
    with pytest.raises(SpecError) as caught:
        load_jobs_yaml(text, "jobs.yaml")
    assert caught.value.field == "jobs.yaml[1].podSets[0].replicas"


def test_a_large_file_is_loaded_with_the_c_parser() -> None:
    text = "---\n".join(JOB.format(name=f"j{i}") for i in range(2000))
    assert len(load_jobs_yaml(text, "jobs.yaml")) == 2000


@pytest.mark.parametrize(("text", "expected"), [
    ("team=nlp", {"team": "nlp"}),
    ("team=nlp, app.kubernetes.io/name=x", {"team": "nlp", "app.kubernetes.io/name": "x"}),
    ("empty=", {"empty": ""}),
])
def test_label_selectors_parse(text: str, expected: dict[str, str]) -> None:
    assert parse_label_selector(text) == expected


@pytest.mark.parametrize("text", ["team", "team!=x", "bad key=v", "k=bad value", "=v", ""])
def test_bad_label_selectors_name_the_field(text: str) -> None:
    with pytest.raises(SpecError) as caught:
        parse_label_selector(text, field="label")
    assert caught.value.field == "label"
    assert caught.value.fix


CONFIG = """\
kind: ResourceFlavor
name: gpu
---
kind: ClusterQueue
name: team
cohort: org
resourceGroups:
- coveredResources: [cpu]
  flavors: [{name: gpu, resources: [{name: cpu, nominalQuota: 1}]}]
---
kind: LocalQueue
name: team
clusterQueue: team
"""


def config() -> QueueConfig:
    return QueueConfig().merged(load_config_yaml(CONFIG))


def test_objects_others_name_are_not_removed() -> None:
    base = config()
    with pytest.raises(Conflict) as caught:
        base.without([("ResourceFlavor", "gpu")])
    assert "ClusterQueue team" in caught.value.message
    with pytest.raises(Conflict):
        base.without([("Cohort", "org")])
    with pytest.raises(Conflict) as caught:
        base.without([("ClusterQueue", "team")])
    assert "LocalQueue team" in caught.value.message
    assert set(base.cluster_queues) == {"team"}


def test_objects_removed_together_leave_nothing_dangling() -> None:
    left = config().without([("LocalQueue", "team"), ("ClusterQueue", "team"),
                             ("ResourceFlavor", "gpu"), ("Cohort", "org")])
    assert not left.cluster_queues and not left.local_queues and not left.flavors
    assert not left.cohorts


def test_removing_an_unknown_object_names_it() -> None:
    with pytest.raises(NotFound) as caught:
        config().without([("LocalQueue", "nope")])
    assert caught.value.field == "LocalQueue nope"
