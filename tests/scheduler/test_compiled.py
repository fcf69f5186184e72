"""Which build of the core the tests ran: the compiled pass of ``scripts/test.sh`` sets
PHALANX_EXPECT_COMPILED=1, so a build that silently fell back to Python fails here."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import phalanx.scheduler as scheduler
from phalanx.scheduler import cycle, placement, workload
from phalanx.scheduler.flavorassigner import flavors
from phalanx.scheduler.preemption import preemptor


def test_core_modules_agree_with_the_flag() -> None:
    modules = (cycle, placement, preemptor, flavors, workload)
    compiled = [not (m.__file__ or "").endswith(".py") for m in modules]
    assert compiled == [scheduler.COMPILED] * len(modules)
    expected = os.environ.get("PHALANX_EXPECT_COMPILED")
    if expected is not None:
        assert scheduler.COMPILED is (expected == "1"), scheduler.__file__


def test_version_names_the_core(tmp_path: Path) -> None:
    # A real subprocess, so the CLI imports whichever build this interpreter finds.
    done = subprocess.run(
        [sys.executable, "-m", "phalanx.cli.main", "--url", "http://127.0.0.1:9", "version",
         "--json"],
        capture_output=True, text=True, timeout=60,
        env={**os.environ, "PHALANX_HOME": str(tmp_path)},
    )
    assert done.returncode == 0, done.stderr
    assert f'"schedulerCore": "{"compiled" if scheduler.COMPILED else "python"}"' in done.stdout
