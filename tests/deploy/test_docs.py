"""The YAML in docs/kubernetes.md is valid: values render, queues and the job validate."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from phalanx.deploy import load_values_yaml, render
from phalanx.spec import load_config_yaml, load_job_yaml

DOC = Path(__file__).resolve().parents[2] / "docs" / "kubernetes.md"


def blocks() -> dict[str, str]:
    """Each ```yaml block of the page, by the file name in its first comment line."""
    found: dict[str, str] = {}
    for text in re.findall(r"```yaml\n(.*?)```", DOC.read_text(), flags=re.S):
        first = text.splitlines()[0]
        name = first.removeprefix("# ").strip() if first.startswith("# ") else f"#{len(found)}"
        found[name] = text
    return found


def test_the_pages_values_render() -> None:
    values = load_values_yaml(blocks()["values.yaml"])
    assert values.image.reference == "registry.example.com/ml/phalanx:0.1.0"
    assert render(values)


def test_the_pages_queues_and_job_validate() -> None:
    found = blocks()
    kinds = [type(obj).__name__ for obj in load_config_yaml(found["queues.yaml"])]
    assert kinds == ["ResourceFlavor", "ClusterQueue", "LocalQueue"]
    job = load_job_yaml(found["ddp.yaml"])
    assert job.pod_sets[0].image


@pytest.mark.parametrize("snippet", ["store:", "runs:"])
def test_the_pages_value_snippets_are_valid(snippet: str) -> None:
    texts = [t for name, t in blocks().items() if name.startswith("#") and t.startswith(snippet)]
    assert texts
    for text in texts:
        load_values_yaml(text)


def test_the_pages_cluster_values_render_a_worker() -> None:
    values = load_values_yaml(blocks()["cluster-values.yaml"])
    assert values.mode == "cluster" and values.plane.name == "gcp-a"
    kinds = {m["kind"] for m in render(values)}
    assert "Deployment" in kinds and "DaemonSet" in kinds and "Service" not in kinds
