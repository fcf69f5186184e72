"""A fake libnvidia-ml.so.1, built from C with gcc, that the real nvidia-ml-py binding loads.

The binding opens ``libnvidia-ml.so.1`` by name, so a process finds the fake through
``LD_LIBRARY_PATH``, which the dynamic loader reads when the process starts: whatever
must see the fake runs in a subprocess started with it.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

SOURCE = Path(__file__).parent / "fake_nvml" / "fake_nvml.c"


@pytest.fixture(scope="session")
def fake_nvml_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    gcc = shutil.which("gcc")
    if gcc is None:
        pytest.fail("gcc is needed to build the fake NVML library")
    out = tmp_path_factory.mktemp("fake-nvml")
    subprocess.run([gcc, "-shared", "-fPIC", "-O1", "-Wall", "-Werror", "-o",
                    str(out / "libnvidia-ml.so.1"), str(SOURCE)], check=True)
    return out


@dataclass
class FakeGPU:
    name: str = "NVIDIA A100-SXM4-80GB"
    uuid: str = ""
    settings: dict[str, Any] = field(default_factory=dict)
    xids: list[int] = field(default_factory=list)


@dataclass
class FakeNVML:
    """The GPUs the fake library reports, written to the file it reads."""

    library_dir: Path
    config: Path
    driver: str | None = "550.54.15"
    gpus: list[FakeGPU] = field(default_factory=list)

    def add(self, count: int = 1, **settings: Any) -> FakeNVML:
        for _ in range(count):
            index = len(self.gpus)
            self.gpus.append(FakeGPU(uuid=f"GPU-{index:08d}", settings=dict(settings)))
        return self

    def write(self) -> None:
        lines = [f"driver={self.driver}"] if self.driver is not None else []
        for gpu in self.gpus:
            lines += ["gpu", f"name={gpu.name}", f"uuid={gpu.uuid}"]
            lines += [f"{k}={v}" for k, v in gpu.settings.items()]
            lines += [f"xid={x}" for x in gpu.xids]
        self.config.write_text("\n".join(lines) + "\n")

    def env(self) -> dict[str, str]:
        self.write()
        env = dict(os.environ)
        env["LD_LIBRARY_PATH"] = str(self.library_dir)
        env["FAKE_NVML_CONFIG"] = str(self.config)
        return env


@pytest.fixture
def nvml(fake_nvml_dir: Path, tmp_path: Path) -> FakeNVML:
    return FakeNVML(fake_nvml_dir, tmp_path / "nvml.conf")


def run_doctor(
    nvml: FakeNVML, *args: str, site_dir: Path | None = None
) -> tuple[int, dict[str, Any]]:
    """``phalanx doctor --once --json`` in a process that loads the fake: (exit code, report)."""
    command = [sys.executable, "-m", "phalanx.cli", "doctor", "--once", "--json",
               "--node", "n1", "--site-dir", str(site_dir or nvml.config.parent / "no-site"),
               *args]
    done = subprocess.run(command, env=nvml.env(), capture_output=True, text=True, timeout=60)
    assert done.stdout, done.stderr
    return done.returncode, json.loads(done.stdout)


def checks_of(report: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {c["name"]: c for c in report["checks"]}


def statuses(report: dict[str, Any], names: Sequence[str]) -> dict[str, str]:
    found = checks_of(report)
    return {name: found[name]["status"] for name in names}
