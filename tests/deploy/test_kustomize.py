"""The committed kustomize base is the default render, and kustomize builds it."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml

from phalanx.deploy import kustomize_files, load_values, render, write_kustomize
from tests.deploy.conftest import COMBINATIONS, Manifest

REPO = Path(__file__).resolve().parents[2]
BASE = REPO / "deploy" / "kubernetes"
KUBECTL = shutil.which("kubectl")
needs_kubectl = pytest.mark.skipif(KUBECTL is None, reason="kubectl is not installed")


def _key(obj: Manifest) -> tuple[str, str, str]:
    return (obj["kind"], obj["metadata"].get("namespace", ""), obj["metadata"]["name"])


def _by_key(objects: list[Manifest]) -> dict[tuple[str, str, str], Manifest]:
    keyed = {_key(o): o for o in objects}
    assert len(keyed) == len(objects), "two objects share kind, namespace and name"
    return keyed


def kustomize_build(directory: Path) -> list[Manifest]:
    assert KUBECTL is not None
    done = subprocess.run([KUBECTL, "kustomize", str(directory)], capture_output=True,
                          text=True, timeout=120, check=False)
    assert done.returncode == 0, done.stderr
    return [doc for doc in yaml.safe_load_all(done.stdout) if doc]


def test_committed_base_is_the_default_render() -> None:
    expected = kustomize_files()
    present = {p.name for p in BASE.iterdir() if p.is_file()}
    assert present == set(expected), (
        "deploy/kubernetes is out of date: run `phalanx k8s render --kustomize deploy/kubernetes`"
    )
    for name, text in expected.items():
        assert (BASE / name).read_text() == text, (
            f"deploy/kubernetes/{name} is out of date: "
            "run `phalanx k8s render --kustomize deploy/kubernetes`"
        )


@needs_kubectl
def test_kubectl_kustomize_builds_the_committed_base() -> None:
    built = kustomize_build(BASE)
    assert _by_key(built) == _by_key(render())


@needs_kubectl
@pytest.mark.parametrize("combination", ["everything-on", "bring-your-own-rbac"])
def test_a_regenerated_base_builds(tmp_path: Path, combination: str) -> None:
    values = load_values(COMBINATIONS[combination])
    write_kustomize(tmp_path, values)
    assert _by_key(kustomize_build(tmp_path)) == _by_key(render(values))


def test_switching_a_component_off_removes_its_file(tmp_path: Path) -> None:
    write_kustomize(tmp_path, load_values({"nodeDoctor": {"enabled": True}}))
    assert (tmp_path / "node-doctor.yaml").exists()
    write_kustomize(tmp_path, load_values({}))
    assert not (tmp_path / "node-doctor.yaml").exists()
    kustomization: dict[str, Any] = yaml.safe_load((tmp_path / "kustomization.yaml").read_text())
    for resource in kustomization["resources"]:
        assert (tmp_path / resource).exists()
