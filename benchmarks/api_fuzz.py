"""The long fuzz of the HTTP API: every operation of ``/openapi.json``, as the admin and as
a member, many examples each, against a live control plane.

Runs ``tests/server/test_api_fuzz.py`` (schemathesis; the checks are described there: no
5xx, every answer declared and in the error envelope, a refusal of a request valid by the
document names its field) with ``PHALANX_FUZZ_EXAMPLES`` set, then reports how many
operations and requests it took and what failed.

    python -m benchmarks.api_fuzz                     # 1,000 examples per operation and role
    python -m benchmarks.api_fuzz --examples 200
    python -m benchmarks.api_fuzz -- -k jobs          # the operations whose label has "jobs"

The roles run at once, each in a process with a control plane of its own; each writes
``sent-ROLE.json`` (after every operation), ``junit-ROLE.xml`` and ``pytest-ROLE.log``
into the scratch directory, so a run stopped early still tells what it did.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
import xml.etree.ElementTree as ET
from collections import Counter
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.table import Table

from benchmarks.harness import write_json

console = Console(stderr=True)
TEST = "tests/server/test_api_fuzz.py"
ROLES = ("admin", "member")


def run(examples: int, extra: list[str], scratch: Path) -> dict[str, Any]:
    """Run the fuzz test, one process per role at once (each with a control plane of its
    own), keeping what each sent in ``scratch`` as it goes; their figures together."""
    scratch.mkdir(parents=True, exist_ok=True)
    started = time.monotonic()
    procs: dict[str, subprocess.Popen[bytes]] = {}
    for role in ROLES:
        env = {**os.environ, "PHALANX_FUZZ_EXAMPLES": str(examples),
               "PHALANX_FUZZ_REPORT": str(scratch / f"sent-{role}.json"),
               "PHALANX_FUZZ_ROLES": role}
        with (scratch / f"pytest-{role}.log").open("wb") as log:
            procs[role] = subprocess.Popen(
                [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "--timeout=0",
                 f"--junitxml={scratch / f'junit-{role}.xml'}", TEST, *extra],
                env=env, stdout=log, stderr=subprocess.STDOUT)
    codes = {role: proc.wait() for role, proc in procs.items()}
    seconds = time.monotonic() - started
    sent: list[dict[str, Any]] = []
    took: list[dict[str, Any]] = []
    failed: list[str] = []
    for role in ROLES:
        report = scratch / f"sent-{role}.json"
        if report.exists():
            sent += json.loads(report.read_text())["sent"]
            took += json.loads(report.read_text()).get("seconds", [])
        failed += [f"{name} (see {scratch / f'pytest-{role}.log'})"
                   for name in _failed(scratch / f"junit-{role}.xml")]
    statuses: Counter[int] = Counter()
    by_role: Counter[str] = Counter()
    examples_of: Counter[tuple[str, str]] = Counter()
    for row in sent:
        statuses[row["status"]] += row["requests"]
        by_role[row["role"]] += row["requests"]
        examples_of[(row["operation"], row["role"])] += row["requests"]
    return {
        "examples_per_operation": examples,
        "pytest_exit_code": max(codes.values()), "exit_codes": codes,
        "seconds": round(seconds, 1), "operations": len({op for op, _ in examples_of}),
        "roles": sorted(by_role), "requests": sum(statuses.values()),
        "requests_by_role": dict(sorted(by_role.items())),
        "server_errors": sum(n for status, n in statuses.items() if status >= 500),
        "statuses": {str(k): v for k, v in sorted(statuses.items())},
        # Hypothesis stops early when an operation's inputs are fewer than asked for
        # (a path with one parameter of a few values, say): those, with what they sent.
        "fewer_examples": [{"operation": op, "role": role, "requests": n}
                           for (op, role), n in sorted(examples_of.items()) if n < examples],
        "failed_tests": failed, "sent": sent, "operation_seconds": took,
    }


def _failed(junit: Path) -> list[str]:
    if not junit.exists():
        return ["(pytest wrote no report)"]
    return [case.get("name", "?") for case in ET.parse(junit).getroot().iter("testcase")
            if case.find("failure") is not None or case.find("error") is not None]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--examples", type=int, default=1000,
                        help="examples per operation and role (default: 1000)")
    parser.add_argument("--out", type=Path, help="where to write the JSON results")
    parser.add_argument("--scratch", type=Path, help="keep what was sent (sent-ROLE.json) and "
                        "pytest's logs here as the run goes (default: a temporary directory)")
    parser.add_argument("pytest_args", nargs="*", help="more pytest arguments (e.g. -k keys)")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="phalanx-fuzz-") as scratch:
        result = run(args.examples, args.pytest_args, Path(args.scratch or scratch))
    table = Table(title=f"API fuzz, {args.examples} examples per operation and role")
    for column in ("operations", "roles", "requests", "5xx", "failed tests", "seconds"):
        table.add_column(column, justify="right")
    table.add_row(str(result["operations"]), ", ".join(result["roles"]),
                  f"{result['requests']:,}", str(result["server_errors"]),
                  str(len(result["failed_tests"])), f"{result['seconds']:.0f}")
    console.print(table)
    for name in result["failed_tests"]:
        console.print(f"failed: {name}")
    console.print(f"answers by status: {result['statuses']}")
    console.print(f"requests by role: {result['requests_by_role']}")
    for row in result["fewer_examples"]:
        console.print(f"fewer examples than asked: {row['operation']} as {row['role']}: "
                      f"{row['requests']}")
    console.print(f"wrote {write_json('api_fuzz', result, args.out)}")
    sys.exit(0 if result["pytest_exit_code"] == 0 else 1)


if __name__ == "__main__":
    main()
