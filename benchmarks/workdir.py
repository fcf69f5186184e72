"""Submit-to-first-log-line of a job with a 50 MB workdir: the first time (packed, uploaded,
unpacked) and again unchanged (packed and hashed, not uploaded: the control plane holds it).

Starts a real control plane (``phalanx up``) with its own local plane, or with none and a
``phalanx worker`` (which fetches the archive by hash), writes a directory of random data
(incompressible: the archive is as large as the files) and a script, and for each round
submits a job through the SDK (what ``phalanx submit`` does) whose pods print one line,
timing from the call to the first line in the job's logs. The pack and upload are timed
apart.

    python -m benchmarks.workdir                # 50 MB, 3 rounds each
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from benchmarks.harness import write_json
from benchmarks.planes import control_plane
from phalanx.sdk import Client
from phalanx.sdk.sources import pack

FIRST_LINE = "workdir ready"


def _make_workdir(where: Path, megabytes: int) -> Path:
    where.mkdir()
    for i in range(megabytes // 10 or 1):  # files of 10 MB, as checkpoints and data shards
        (where / f"shard-{i}.bin").write_bytes(os.urandom(min(megabytes, 10) * 2**20))
    (where / "main.py").write_text(
        f"import os\nprint({FIRST_LINE!r}, len(os.listdir('.')), flush=True)\n")
    return where


def _first_line(client: Client, workdir: Path, name: str) -> float:
    start = time.perf_counter()
    client.submit({"name": name, "queue": "default", "workdir": str(workdir), "podSets": [{
        "name": "main", "resources": {"cpu": "100m"},
        "command": [sys.executable, "main.py"]}]})
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        if FIRST_LINE in "".join(client.logs(name)):
            return time.perf_counter() - start
        time.sleep(0.02)
    raise RuntimeError(f"{name} printed nothing: {client.get(name).status}")


def _measure(client: Client, workdir: Path, rounds: int, label: str) -> dict[str, Any]:
    first = _first_line(client, workdir, f"{label}-first")
    cached = [_first_line(client, workdir, f"{label}-cached-{i}") for i in range(rounds)]
    return {"first_s": first, "cached_s": statistics.median(cached),
            "cached_all_s": cached}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--megabytes", type=int, default=50)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    result: dict[str, Any] = {"megabytes": args.megabytes, "rounds": args.rounds}
    with tempfile.TemporaryDirectory() as tmp:
        workdir = _make_workdir(Path(tmp) / "project", args.megabytes)
        start = time.perf_counter()
        packed = pack(workdir)
        result["pack_s"] = time.perf_counter() - start
        result["archive_mb"] = len(packed.data) / 1e6
        for key, remote in (("in_process", False), ("worker", True)):
            with tempfile.TemporaryDirectory() as root, \
                    control_plane(Path(root), remote, "--run-as-user", str(os.geteuid())) \
                    as (_, client):
                result[key] = _measure(client, workdir, args.rounds, key.replace("_", "-"))
    print(f"workdir of {args.megabytes} MB (archive {result['archive_mb']:.1f} MB, "
          f"packed and hashed in {result['pack_s']:.2f} s)")
    print(f"{'plane':>18} | {'first submit':>13} | {'unchanged (median)':>18}")
    for key, label in (("in_process", "in-process plane"), ("worker", "through a worker")):
        row = result[key]
        print(f"{label:>18} | {row['first_s']:>11.2f} s | {row['cached_s']:>16.2f} s")
    write_json("workdir", result)


if __name__ == "__main__":
    main()
