"""The long fuzz of the HTTP API: every operation of ``/openapi.json``, as the admin and as
a member, many examples each, against a live control plane.

Runs ``tests/server/test_api_fuzz.py`` (schemathesis; the checks are described there: no
5xx, every answer declared and in the error envelope, a refusal of a request valid by the
document names its field) with ``PHALANX_FUZZ_EXAMPLES`` set, then reports how many
operations and requests it took and what failed.

    python -m benchmarks.api_fuzz                     # 1,000 examples per operation and role
    python -m benchmarks.api_fuzz --examples 200
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


def run(examples: int, extra: list[str], scratch: Path) -> dict[str, Any]:
    """Run the fuzz test, keeping what it sent in ``scratch`` as it goes; its figures."""
    report, junit = scratch / "sent.json", scratch / "junit.xml"
    env = {**os.environ, "PHALANX_FUZZ_EXAMPLES": str(examples),
           "PHALANX_FUZZ_REPORT": str(report)}
    started = time.monotonic()
    code = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "--timeout=0",
         f"--junitxml={junit}", TEST, *extra], env=env, check=False).returncode
    seconds = time.monotonic() - started
    sent = json.loads(report.read_text())["sent"] if report.exists() else []
    failed = _failed(junit)
    statuses: Counter[int] = Counter()
    operations: set[str] = set()
    for row in sent:
        statuses[row["status"]] += row["requests"]
        operations.add(row["operation"])
    return {
        "examples_per_operation": examples, "pytest_exit_code": code,
        "seconds": round(seconds, 1), "operations": len(operations),
        "roles": sorted({row["role"] for row in sent}),
        "requests": sum(statuses.values()),
        "server_errors": sum(n for status, n in statuses.items() if status >= 500),
        "statuses": {str(k): v for k, v in sorted(statuses.items())},
        "failed_tests": failed, "sent": sent,
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
    parser.add_argument("--scratch", type=Path, help="keep what was sent (sent.json) here as "
                        "the run goes (default: a temporary directory)")
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
    console.print(f"wrote {write_json('api_fuzz', result, args.out)}")
    sys.exit(0 if result["pytest_exit_code"] == 0 else 1)


if __name__ == "__main__":
    main()
