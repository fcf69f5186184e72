"""Property tests with fresh seeds: explore beyond the examples the suite always tries.

The suite's property tests try the same examples on every run (CI derandomizes
Hypothesis, and the scheduler's properties ask for it), so a counterexample they do not
draw is never found there. This runs every property test of the suite (the files under
tests/ with ``@given``) under the ``explore`` profile (tests/explore.py): a fresh seed a
round, ``--examples`` examples per test, rounds until ``--minutes`` of wall time are
spent. Each round's seed is printed and recorded, so a failure is replayed with

    pytest --hypothesis-profile=explore --hypothesis-seed=SEED TEST

and then pinned in its test with ``@example``.

    python -m benchmarks.property_seeds --minutes 10 --examples 500
    python -m benchmarks.property_seeds --minutes 1 --examples 50 -k provisioning

The API fuzz test (tests/server/test_api_fuzz.py) draws ``--fuzz-examples`` requests per
operation a round (it starts a control plane; 0 leaves it out).
"""

from __future__ import annotations

import argparse
import os
import re
import secrets
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from rich.table import Table

from benchmarks.harness import REPO, machine, write_json
from benchmarks.philly import output

FUZZ = "tests/server/test_api_fuzz.py"
# Hypothesis' statistics: a test's id line, then its generate phase's counts.
TEST_LINE = re.compile(r"^(tests/\S+::\S+):$")
COUNTS = re.compile(r"(\d+) passing, (\d+) failing, and (\d+) invalid")


@dataclass
class Tally:
    rounds: int = 0
    examples: int = 0
    failing: int = 0
    bounded: bool = False  # examples drawn inside the test: only their cap is known
    failed_seeds: list[int] = field(default_factory=list)


def property_test_files(match: str) -> list[str]:
    """The test files that use ``@given``, relative to the repository."""
    files = sorted(str(p.relative_to(REPO)) for p in (REPO / "tests").rglob("test_*.py")
                   if "@given" in p.read_text())
    return [f for f in files if match in f]


def run_round(files: list[str], seed: int, examples: int, fuzz_examples: int,
              timeout: float) -> tuple[int, str]:
    env = {**os.environ, "PHALANX_EXPLORE_EXAMPLES": str(examples),
           "PHALANX_FUZZ_EXAMPLES": str(fuzz_examples)}
    command = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider",
               "--hypothesis-profile=explore", f"--hypothesis-seed={seed}",
               "--hypothesis-show-statistics", "-rA", "--timeout", str(int(timeout)), *files]
    try:
        done = subprocess.run(command, capture_output=True, text=True, cwd=REPO, env=env,
                              timeout=timeout + 60)
    except subprocess.TimeoutExpired as exc:
        text = exc.stdout if isinstance(exc.stdout, str) else ""
        return -1, text + "\n(the round ran out of time)"
    return done.returncode, done.stdout + done.stderr


def tally_round(out: str, seed: int, fuzz_examples: int, tallies: dict[str, Tally]) -> None:
    """Add one round's per-test statistics (one entry per parametrized case). A test that
    draws its examples inside (the API fuzz test) has no statistics: each case passed counts
    its cap, ``fuzz_examples``."""
    current = None
    seen: set[str] = set()  # tests with statistics this round
    counted: set[str] = set()  # tests without, counted this round
    for line in out.splitlines():
        test = TEST_LINE.match(line.strip())
        if test:
            current = re.sub(r"\[.*\]$", "", test.group(1))  # the fuzz test's cases as one
            continue
        counts = COUNTS.search(line)
        if counts and current is not None:
            t = tallies.setdefault(current, Tally())
            if current not in seen:
                t.rounds += 1
                seen.add(current)
            t.examples += int(counts.group(1)) + int(counts.group(2))
            if int(counts.group(2)):
                t.failing += 1
                if seed not in t.failed_seeds:
                    t.failed_seeds.append(seed)
    for case in re.findall(r"^PASSED (tests/\S+::[^\s\[]+)", out, re.M):
        if case in seen:
            continue
        t = tallies.setdefault(case, Tally(bounded=True))
        if case not in counted:
            t.rounds += 1
            counted.add(case)
        t.examples += fuzz_examples
    for failed in re.findall(r"^FAILED (tests/\S+::[^\s\[]+)", out, re.M):
        t = tallies.setdefault(failed, Tally())
        if seed not in t.failed_seeds:
            t.failed_seeds.append(seed)
            t.failing += 1


def table(tallies: dict[str, Tally], minutes: float, examples: int) -> Table:
    out = Table(title=f"Property tests with fresh seeds: {minutes:.1f} min, up to {examples} "
                      "examples per test a round", title_justify="left")
    for column in ("test", "rounds", "examples", "failing rounds", "failing seeds"):
        out.add_column(column, justify="left" if column in ("test", "failing seeds")
                       else "right")
    for name in sorted(tallies):
        t = tallies[name]
        out.add_row(name, f"{t.rounds}", f"{'≤' if t.bounded else ''}{t.examples:,}",
                    f"{t.failing}",
                    ", ".join(str(s) for s in t.failed_seeds) or "-")
    return out


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--minutes", type=float, default=10.0,
                        help="wall time to spend; a round under way is finished (default 10)")
    parser.add_argument("--examples", type=int, default=500,
                        help="examples per property test a round (default 500)")
    parser.add_argument("--fuzz-examples", type=int, default=25,
                        help="requests per API operation a round for the fuzz test (0: skip it)")
    parser.add_argument("--seeds", type=int, default=0,
                        help="stop after this many rounds (default: only the time limit)")
    parser.add_argument("-k", dest="match", default="",
                        help="only the test files whose path contains this")
    parser.add_argument("--json", type=Path, default=None,
                        help="output JSON (default: benchmarks/results/property_seeds.json)")
    args = parser.parse_args(argv)
    if args.minutes <= 0 or args.examples < 1 or args.fuzz_examples < 0 or args.seeds < 0:
        parser.error("--minutes and --examples must be above 0, --fuzz-examples and --seeds "
                     "at least 0")
    args.argv = list(sys.argv[1:] if argv is None else argv)
    return args


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    console = output()
    files = property_test_files(args.match)
    if args.fuzz_examples == 0:
        files = [f for f in files if f != FUZZ]
    if not files:
        raise SystemExit(f"no property test file matches {args.match!r}")
    console.print(f"exploring {len(files)} file(s): {', '.join(files)}")
    began = time.perf_counter()
    deadline = began + args.minutes * 60
    tallies: dict[str, Tally] = {}
    rounds: list[dict[str, Any]] = []
    while time.perf_counter() < deadline and not (args.seeds and len(rounds) >= args.seeds):
        seed = secrets.randbits(32)
        start = time.perf_counter()
        code, out = run_round(files, seed, args.examples, args.fuzz_examples,
                              timeout=max(deadline - start, 60.0) + 300)
        seconds = time.perf_counter() - start
        tally_round(out, seed, args.fuzz_examples, tallies)
        summary = out.strip().splitlines()[-1] if out.strip() else ""
        rounds.append({"seed": seed, "exit": code, "seconds": seconds, "summary": summary})
        console.print(f"  seed {seed}: {summary} ({seconds:.0f} s)")
        if code != 0:
            failures = out[out.find("= FAILURES ="):] if "= FAILURES =" in out else out
            console.print(failures[-6000:], markup=False, highlight=False)
    minutes = (time.perf_counter() - began) / 60
    console.print(table(tallies, minutes, args.examples))
    failed = sorted({s for t in tallies.values() for s in t.failed_seeds})
    path = write_json("property_seeds", {
        "benchmark": "property_seeds",
        "command": "python -m benchmarks.property_seeds " + " ".join(args.argv),
        "files": files, "examples_per_test": args.examples,
        "fuzz_examples_per_operation": args.fuzz_examples, "minutes": minutes,
        "rounds": rounds, "failed_seeds": failed,
        "tests": {name: {"rounds": t.rounds, "examples": t.examples,
                         "examples_are_a_cap": t.bounded, "failing_rounds": t.failing,
                         "failed_seeds": t.failed_seeds}
                  for name, t in sorted(tallies.items())},
    }, args.json)
    console.print(f"wrote {path}; scheduler core {machine()['scheduler_core']}")
    return 1 if failed or any(r["exit"] not in (0, 5) for r in rounds) else 0


if __name__ == "__main__":
    sys.exit(main())
