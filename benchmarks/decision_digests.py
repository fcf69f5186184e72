"""One digest of the scheduler's decisions over many seeded random scenarios.

Replays the random scenarios of ``tests/scheduler/strategies.py`` (every admission,
preemption and pending reason after each cycle) and prints one SHA-256 over them: a
change that is meant to leave decisions alone leaves it equal. Compare two builds by
running each (e.g. ``PYTHONPATH=<other checkout>/src:<other checkout>``):

    python -m benchmarks.decision_digests --seeds 2000 --events 80
    python -m benchmarks.decision_digests --seeds 500 --events 200
"""

from __future__ import annotations

import argparse
import hashlib
import json

from tests.scheduler.strategies import Driver, RandomPicker, digest, random_scenario, replay

import phalanx


def decisions_digest(seeds: int, events: int) -> str:
    h = hashlib.sha256()
    for seed in range(seeds):
        scenario = random_scenario(RandomPicker(seed), max_events=events)
        driver = Driver.start(scenario.config, scenario.nodes)
        replay(driver, scenario.events)
        h.update(json.dumps(digest(driver), sort_keys=True).encode())
    return h.hexdigest()


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--seeds", type=int, default=2000)
    parser.add_argument("--events", type=int, default=80)
    args = parser.parse_args(argv)
    print(f"{decisions_digest(args.seeds, args.events)}  {args.seeds} scenarios x "
          f"{args.events} events, phalanx from {phalanx.__file__}")


if __name__ == "__main__":
    main()
