"""Seeded sweeps for comparing two builds of the scheduler core.

``python -m tests.scheduler.sweep_digests OUT.json`` replays 1,500 random scenarios of
at most 30 events, 2,000 of 80 and 500 of 200 (``strategies.random_scenario``), checks
the invariants after every cycle as the property tests do, and writes per set the
failures and a digest of each scenario's decisions. Run it in each build (for a
compiled core, with its directory on ``PYTHONPATH``) and compare the digests: a
scheduler change should move only the decisions it means to.
"""

from __future__ import annotations

import hashlib
import json
import sys
import time
from pathlib import Path

from .strategies import Driver, RandomPicker, digest, random_scenario, replay
from .test_properties import check_invariants

SETS = (("30", 1500, 30), ("80", 2000, 80), ("200", 500, 200))


def sweep(count: int, events: int) -> tuple[list[str], list[str]]:
    failures: list[str] = []
    digests: list[str] = []
    for seed in range(count):
        scenario = random_scenario(RandomPicker(seed), max_events=events)
        try:
            check_invariants(scenario)
        except AssertionError as exc:
            failures.append(f"seed {seed}: {str(exc)[:200]}")
        driver = Driver.start(scenario.config, scenario.nodes)
        replay(driver, scenario.events)
        data = json.dumps(digest(driver), sort_keys=True, default=str).encode()
        digests.append(hashlib.sha256(data).hexdigest())
    return failures, digests


def main(argv: list[str]) -> int:
    if len(argv) != 1:
        print("usage: python -m tests.scheduler.sweep_digests OUT.json", file=sys.stderr)
        return 2
    out: dict[str, dict[str, object]] = {}
    for label, count, events in SETS:
        started = time.perf_counter()
        failures, digests = sweep(count, events)
        out[label] = {"failures": failures, "digests": digests}
        print(f"{count} scenarios of up to {events} events: {len(failures)} broken invariants "
              f"({time.perf_counter() - started:.0f} s)", flush=True)
    Path(argv[0]).write_text(json.dumps(out))
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
