from pathlib import Path

import pytest

from phalanx import Job, SpecError
from phalanx.sdk.documents import read_text, to_config_documents, to_job_spec

JOB = "name: hello\npodSets:\n- name: w\n  command: [echo, hi]\n"
QUEUES = """
kind: ResourceFlavor
name: local
---
kind: ClusterQueue
name: team-a
resourceGroups:
- coveredResources: [cpu]
  flavors:
  - name: local
    resources: [{name: cpu, nominalQuota: 2}]
---
kind: LocalQueue
name: team-a
clusterQueue: team-a
"""


def test_every_job_form_gives_the_same_spec(tmp_path: Path) -> None:
    path = tmp_path / "job.yaml"
    path.write_text(JOB)
    from_file = to_job_spec(path)
    assert to_job_spec(str(path)) == from_file
    assert to_job_spec(from_file.to_dict()) == from_file
    assert to_job_spec(from_file) is from_file
    assert to_job_spec(Job("hello").pod_set("w", command=["echo", "hi"])) == from_file


@pytest.mark.parametrize(
    ("text", "field_part", "words"),
    [
        ("name: [unclosed\n", "job.yaml", "not valid YAML"),
        ("name: j\npodSets: [{name: w}]\nreplica: 2\n", "replica", "unknown field"),
        ("name: j\npodSets: [{name: w, resources: {cpu: -1}}]\n", "resources.cpu", "negative"),
        ("- just\n- a list\n", "job.yaml", "not a mapping"),
        ("name: a\npodSets: [{name: w}]\n---\nname: b\npodSets: [{name: w}]\n", "job.yaml",
         "2 documents"),
    ],
)
def test_bad_job_files_name_the_field(
    tmp_path: Path, text: str, field_part: str, words: str
) -> None:
    path = tmp_path / "job.yaml"
    path.write_text(text)
    with pytest.raises(SpecError) as info:
        to_job_spec(path)
    assert field_part in (info.value.field or "")
    assert words in info.value.message


def test_unreadable_paths(tmp_path: Path) -> None:
    with pytest.raises(SpecError, match="no such file"):
        read_text(tmp_path / "absent.yaml")
    with pytest.raises(SpecError, match="is a directory"):
        read_text(tmp_path)
    binary = tmp_path / "blob.yaml"
    binary.write_bytes(b"\xff\xfe\x00\x80")
    with pytest.raises(SpecError, match="not a text file"):
        read_text(binary)
    with pytest.raises(SpecError) as info:
        to_job_spec(42)
    assert info.value.field == "job"


def test_config_documents_from_file_and_list(tmp_path: Path) -> None:
    path = tmp_path / "queues.yaml"
    path.write_text(QUEUES)
    docs = to_config_documents(path)
    assert [(d["kind"], d["name"]) for d in docs] == [
        ("ResourceFlavor", "local"), ("ClusterQueue", "team-a"), ("LocalQueue", "team-a"),
    ]
    assert to_config_documents(docs) == docs
    quota = docs[1]["resourceGroups"][0]["flavors"][0]["resources"][0]
    assert quota["nominalQuota"] == "2"


def test_bad_config_documents(tmp_path: Path) -> None:
    path = tmp_path / "queues.yaml"
    path.write_text(QUEUES.replace("nominalQuota: 2", "nominalQuota: two"))
    with pytest.raises(SpecError) as info:
        to_config_documents(path)
    assert "nominalQuota" in (info.value.field or "")
    with pytest.raises(SpecError) as bad_kind:
        to_config_documents([{"kind": "Pool", "name": "p"}])
    assert bad_kind.value.field == "documents[0].kind"
