"""`phalanx k8s render` and `phalanx k8s values`, run as the real command in a subprocess."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import yaml

from phalanx.deploy import Values, load_values, load_values_yaml, render
from tests.deploy.conftest import COMBINATIONS

REPO = Path(__file__).resolve().parents[2]


def phalanx(*args: str, stdin: str | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "phalanx.cli", *args], capture_output=True, text=True,
        input=stdin, timeout=120, check=False, cwd=REPO, env={**os.environ, "COLUMNS": "200"},
    )


def test_render_without_values_prints_the_defaults() -> None:
    done = phalanx("k8s", "render")
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("---\n")
    assert list(yaml.safe_load_all(done.stdout)) == render(Values())


def test_render_with_a_values_file(tmp_path: Path) -> None:
    data = COMBINATIONS["everything-on"]
    path = tmp_path / "values.yaml"
    path.write_text(yaml.safe_dump(data))
    done = phalanx("k8s", "render", "-f", str(path))
    assert done.returncode == 0, done.stderr
    printed = list(yaml.safe_load_all(done.stdout))
    assert printed == render(load_values(data))
    assert "DaemonSet" in {obj["kind"] for obj in printed}
    # The same values on stdin give the same stream.
    piped = phalanx("k8s", "render", "-f", "-", stdin=path.read_text())
    assert piped.stdout == done.stdout


def test_bad_values_exit_2_naming_the_field(tmp_path: Path) -> None:
    path = tmp_path / "values.yaml"
    path.write_text("runs:\n  rbac:\n    create: false\n")
    done = phalanx("k8s", "render", "-f", str(path))
    assert done.returncode == 2
    assert done.stdout == ""  # nothing half-rendered to pipe into kubectl
    assert "runs.rbac.serviceAccountName" in done.stderr
    assert "fix:" in done.stderr
    missing = phalanx("k8s", "render", "-f", str(tmp_path / "nope.yaml"))
    assert missing.returncode == 2 and "nope.yaml" in missing.stderr


def test_render_writes_a_kustomize_base(tmp_path: Path) -> None:
    out = tmp_path / "base"
    done = phalanx("k8s", "render", "--kustomize", str(out))
    assert done.returncode == 0, done.stderr
    assert done.stdout == ""
    assert (out / "kustomization.yaml").exists() and (out / "control-plane.yaml").exists()
    assert load_values_yaml((out / "values.yaml").read_text()) == Values()


def test_values_prints_a_file_render_accepts(tmp_path: Path) -> None:
    done = phalanx("k8s", "values")
    assert done.returncode == 0, done.stderr
    assert "allowNodeReads" in done.stdout and "# " in done.stdout
    assert load_values_yaml(done.stdout) == Values()
    path = tmp_path / "values.yaml"
    path.write_text(done.stdout.replace("enabled: false", "enabled: true"))
    rendered = phalanx("k8s", "render", "-f", str(path))
    assert rendered.returncode == 0, rendered.stderr
    assert "DaemonSet" in {o["kind"] for o in yaml.safe_load_all(rendered.stdout)}
