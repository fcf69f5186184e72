"""``phalanx exec`` through the API: round trips of a trivial command and output throughput,
in the control plane's own (in-process) local plane and in a local plane behind a worker.

For each, starts a real control plane (``phalanx up``; for the worker row ``phalanx up
--no-local-plane`` and a ``phalanx worker``), runs a job whose pod idles, then runs
``true`` in it N times one after another (the WebSocket, the server's relay, the pod
supervisor's exec channel and a process start, end to end; through a worker also the
worker's long poll, its outbound WebSocket and the control plane's bridge; the CLI's own
start-up is left out), and streams 50 MB of output out of the pod once.

    python -m benchmarks.pod_exec                 # 50 round trips each
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

from benchmarks.harness import ServerProcess, percentile, write_json
from benchmarks.planes import control_plane
from phalanx.cli.podexec import exec_in_pod
from phalanx.sdk import Client

OUTPUT_BYTES = 50_000_000
IDLE = ["sleep", "600"]


def _measure(server: ServerProcess, client: Client, home: Path, runs: int) -> dict[str, Any]:
    client.submit({"name": "idle", "queue": "default", "podSets": [{
        "name": "main", "replicas": 1, "resources": {"cpu": "100m"}, "command": IDLE}]})
    deadline = time.monotonic() + 60
    while client.get("idle").status.value != "Running":
        if time.monotonic() > deadline:
            raise RuntimeError("the idle job did not start")
        time.sleep(0.1)
    for _ in range(3):  # warm up
        exec_in_pod(client, "idle", ["true"])
    latencies = []
    for _ in range(runs):
        start = time.perf_counter()
        assert exec_in_pod(client, "idle", ["true"]).exit_code == 0
        latencies.append(time.perf_counter() - start)
    start = time.perf_counter()
    big = exec_in_pod(client, "idle", ["head", "-c", str(OUTPUT_BYTES), "/dev/zero"])
    seconds = time.perf_counter() - start
    assert len(big.stdout) == OUTPUT_BYTES
    client.cancel("idle")
    return {
        "round_trip_ms": {"median": statistics.median(latencies) * 1000,
                          "p90": percentile(latencies, 90) * 1000},
        "output_mb_per_s": OUTPUT_BYTES / 1e6 / seconds,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=50)
    args = parser.parse_args()
    result: dict[str, Any] = {"runs": args.runs}
    for key, remote in (("in_process", False), ("worker", True)):
        with tempfile.TemporaryDirectory() as tmp, \
                control_plane(Path(tmp), remote, "--run-as-user", str(os.geteuid())) \
                as (server, client):
            result[key] = _measure(server, client, Path(tmp) / "home", args.runs)
    for key, label in (("in_process", "in-process plane"), ("worker", "through a worker")):
        row = result[key]
        print(f"{label:>17}: exec true median {row['round_trip_ms']['median']:.1f} ms, "
              f"p90 {row['round_trip_ms']['p90']:.1f} ms over {args.runs} runs; "
              f"{OUTPUT_BYTES // 1_000_000} MB of output at {row['output_mb_per_s']:.0f} MB/s",
              file=sys.stdout)
    write_json("pod_exec", result)


if __name__ == "__main__":
    main()
