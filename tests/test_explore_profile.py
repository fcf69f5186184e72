"""The explore profile (tests/explore.py) widens every property test: its own example count,
fresh seeds, and nothing but property tests run."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
TEST = "tests/scheduler/test_provisioning.py"


def test_the_explore_profile_runs_the_property_tests_with_its_own_count() -> None:
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider",
         "--hypothesis-profile=explore", "--hypothesis-show-statistics", TEST],
        capture_output=True, text=True, timeout=300, cwd=REPO,
        env={**os.environ, "PHALANX_EXPLORE_EXAMPLES": "37"})
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    # The one property test of the file ran, with the profile's 37 examples, not its own 150
    # (the pinned @example comes on top of them); the file's other tests were left out.
    assert "37 passing" in done.stdout or "38 passing" in done.stdout, done.stdout[-3000:]
    assert "max_examples=37" in done.stdout
    assert "1 passed" in done.stdout and " deselected" in done.stdout
    assert "Hypothesis Statistics" in done.stdout
