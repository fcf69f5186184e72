"""``phalanx exec`` through the API: round trips of a trivial command and output throughput.

Starts a real control plane on the local plane (``phalanx up``), runs a job whose pod
idles, then runs ``true`` in it N times one after another (the WebSocket, the server's
relay, the pod supervisor's exec channel and a process start, end to end; the CLI's own
start-up is left out), and streams 50 MB of output out of the pod once.

    python -m benchmarks.pod_exec                 # 50 round trips
"""

from __future__ import annotations

import argparse
import os
import statistics
import tempfile
import time
from pathlib import Path

from benchmarks.harness import ServerProcess, percentile, write_json
from phalanx.cli.podexec import exec_in_pod
from phalanx.sdk.config import Endpoint
from phalanx.spec import JobSpec

OUTPUT_BYTES = 50_000_000


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=50)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp, \
            ServerProcess(Path(tmp) / "home", "--run-as-user", str(os.geteuid())) as server:
        with server.client() as client:
            client.submit(JobSpec.model_validate({
                "name": "idle", "podSets": [{"command": ["sleep", "600"]}]}))
            deadline = time.monotonic() + 60
            while client.get("idle").status.value != "Running":
                if time.monotonic() > deadline:
                    raise RuntimeError("the idle job did not start")
                time.sleep(0.1)
        endpoint = Endpoint(server.url, server.token, Path(tmp) / "home")
        for _ in range(3):  # warm up
            exec_in_pod(endpoint, "idle", ["true"])
        latencies = []
        for _ in range(args.runs):
            start = time.perf_counter()
            assert exec_in_pod(endpoint, "idle", ["true"]).exit_code == 0
            latencies.append(time.perf_counter() - start)
        start = time.perf_counter()
        big = exec_in_pod(endpoint, "idle", ["head", "-c", str(OUTPUT_BYTES), "/dev/zero"])
        seconds = time.perf_counter() - start
        assert len(big.stdout) == OUTPUT_BYTES
        with server.client() as client:
            client.cancel("idle")
    result = {
        "runs": args.runs,
        "round_trip_ms": {"median": statistics.median(latencies) * 1000,
                          "p90": percentile(latencies, 90) * 1000},
        "output_mb_per_s": OUTPUT_BYTES / 1e6 / seconds,
    }
    print(f"exec true: median {result['round_trip_ms']['median']:.1f} ms, "
          f"p90 {result['round_trip_ms']['p90']:.1f} ms over {args.runs} runs; "
          f"{OUTPUT_BYTES // 1_000_000} MB of output at {result['output_mb_per_s']:.0f} MB/s")
    write_json("pod_exec", result)


if __name__ == "__main__":
    main()
