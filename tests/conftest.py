"""Every test and every process it starts reads its login credentials from a file of the
test session's own, never the user's (``phalanx login`` may have written one), and sees a
terminal 200 columns wide.

The ``explore`` Hypothesis profile is registered here (tests/explore.py)."""

from __future__ import annotations

import inspect
import os
import tempfile
from pathlib import Path

import pytest

_CREDENTIALS = Path(tempfile.mkdtemp(prefix="phalanx-credentials-")) / "credentials.json"
os.environ["PHALANX_CREDENTIALS"] = str(_CREDENTIALS)

# One terminal width for every test and every process it starts, whatever runs the suite:
# rich and typer otherwise take it from the terminal the run was started in (a wide one
# when run by hand, 80 columns in CI and in pytest-xdist's workers, which have none), so
# that text wrapped at 80 columns would fail only in some runs. A test that needs another
# width sets its own.
os.environ["COLUMNS"] = "200"
os.environ.pop("LINES", None)

# `pytest --hypothesis-profile=explore`: fresh examples for every property test (tests/explore.py).
from tests.explore import exploring, register_explore_profile  # noqa: E402

register_explore_profile()


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Under the explore profile only the property tests run: a Hypothesis test, or one that
    draws its examples with ``@given`` inside."""
    if not exploring():
        return
    keep, drop = [], []
    for item in items:
        function = getattr(item, "obj", None)
        try:
            source = inspect.getsource(function) if function is not None else ""
        except (OSError, TypeError):
            source = ""
        hypothesis_test = getattr(function, "is_hypothesis_test", False)
        (keep if hypothesis_test or "@given" in source else drop).append(item)
    if drop:
        config.hook.pytest_deselected(items=drop)
        items[:] = keep
