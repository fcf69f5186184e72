"""The property tests' Hypothesis settings, which the ``explore`` profile can widen.

The suite tries the same examples on every run (CI derandomizes Hypothesis, and the
scheduler's properties ask for it themselves), so it only ever sees those. Under
``pytest --hypothesis-profile=explore`` (registered in tests/conftest.py), every property
test draws fresh examples, as many as the profile says (``PHALANX_EXPLORE_EXAMPLES``):
the counts and ``derandomize`` a test sets here give way to the profile's.
``python -m benchmarks.property_seeds`` runs that for a stretch of wall time, seed after
seed, and reports what it found.
"""

from __future__ import annotations

import os
from typing import Any

from hypothesis import settings

EXPLORE = "explore"
# What a property test may fix for the suite's run, and the exploration sets instead.
WIDENED = ("max_examples", "derandomize", "database")


def register_explore_profile() -> None:
    settings.register_profile(
        EXPLORE, max_examples=int(os.environ.get("PHALANX_EXPLORE_EXAMPLES", "500")),
        derandomize=False, database=None, deadline=None, print_blob=True)


def exploring() -> bool:
    """Whether the explore profile is the one loaded."""
    try:
        return settings.default is settings.get_profile(EXPLORE)
    except Exception:  # not registered (a module imported outside pytest)
        return False


def property_settings(**kwargs: Any) -> settings:
    """``settings(**kwargs)``, less what the explore profile widens when it is loaded."""
    if exploring():
        kwargs = {k: v for k, v in kwargs.items() if k not in WIDENED}
    return settings(**kwargs)
