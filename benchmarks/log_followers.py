"""How ``/healthz`` answers while 200 clients follow job logs and jobs keep arriving.

Starts a real control plane (``phalanx up --compute simulated``), submits 10 jobs that
run until cancelled, and probes ``/healthz`` one request at a time, first idle, then
with 200 followed log streams open (20 per job, 10 per client address from 20 loopback
addresses, so within the per-job and per-client bounds) and a client submitting short
jobs. Reports the probes' latency percentiles and the submit rate.

    python -m benchmarks.log_followers                  # 20 s per phase
    PHALANX_BENCH_SECONDS=120 python -m benchmarks.log_followers
"""

from __future__ import annotations

import argparse
import asyncio
import os
import tempfile
import time
from pathlib import Path
from typing import Any

import httpx
from rich.console import Console
from rich.table import Table

from benchmarks.harness import ServerProcess, percentile, write_json

console = Console(stderr=True)
NODES = """\
nodes:
  - name: bench-a
    allocatable: {cpu: 64, memory: 256Gi}
"""
JOBS = 10
FOLLOWERS = 200
ADDRESSES = 20


def _client(server: ServerProcess, address: str) -> httpx.AsyncClient:
    return httpx.AsyncClient(
        base_url=server.url, headers={"Authorization": f"Bearer {server.token}"},
        transport=httpx.AsyncHTTPTransport(local_address=address),
        timeout=httpx.Timeout(30.0, read=None),
    )


async def _probe(server: ServerProcess, seconds: float) -> list[float]:
    """Latencies (seconds) of /healthz probes sent one after another for ``seconds``."""
    latencies = []
    async with _client(server, "127.0.0.1") as client:
        deadline = time.monotonic() + seconds
        while time.monotonic() < deadline:
            start = time.perf_counter()
            response = await client.get("/healthz")
            latencies.append(time.perf_counter() - start)
            if response.status_code != 200:
                raise RuntimeError(f"/healthz answered {response.status_code}")
            await asyncio.sleep(0.02)
    return latencies


async def _run(server: ServerProcess, seconds: float) -> dict[str, Any]:
    async with _client(server, "127.0.0.1") as api:
        for i in range(JOBS):
            response = await api.post("/v1/jobs", json={
                "name": f"follow-{i}", "podSets": [{"name": "w", "resources": {"cpu": "1"}}]})
            response.raise_for_status()
        idle = await _probe(server, seconds)

        clients = [_client(server, f"127.0.0.{2 + a}") for a in range(ADDRESSES)]
        streams: list[httpx.Response] = []
        for i in range(FOLLOWERS):
            client = clients[i % ADDRESSES]
            request = client.build_request("GET", f"/v1/jobs/follow-{i % JOBS}/logs",
                                           params={"follow": "true"})
            streams.append(await client.send(request, stream=True))
        accepted = sum(1 for s in streams if s.status_code == 200)

        stop = asyncio.Event()
        submitted = 0

        async def submit() -> None:
            nonlocal submitted
            while not stop.is_set():
                response = await api.post("/v1/jobs", json={
                    "name": f"short-{submitted}",
                    "podSets": [{"name": "w", "resources": {"cpu": "100m"},
                                 "env": {"PHALANX_SIM_DURATION": "50ms"}}]})
                response.raise_for_status()
                submitted += 1

        feeder = asyncio.create_task(submit())
        started = time.monotonic()
        loaded = await _probe(server, seconds)
        stop.set()
        await feeder
        submit_rate = submitted / (time.monotonic() - started)
        for stream in streams:
            await stream.aclose()
        for client in clients:
            await client.aclose()
        for i in range(JOBS):
            await api.post(f"/v1/jobs/follow-{i}/cancel")
    return {"idle": idle, "loaded": loaded, "accepted": accepted, "submits_per_s": submit_rate}


def _row(latencies: list[float]) -> dict[str, float]:
    return {"probes": len(latencies),
            "p50_ms": percentile(latencies, 50) * 1000, "p99_ms": percentile(latencies, 99) * 1000,
            "max_ms": max(latencies) * 1000}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float,
                        default=float(os.environ.get("PHALANX_BENCH_SECONDS", "20")),
                        help="length of each phase (default $PHALANX_BENCH_SECONDS or 20)")
    parser.add_argument("--out", type=Path, default=None)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="phalanx-bench-") as tmp:
        nodes = Path(tmp) / "nodes.yaml"
        nodes.write_text(NODES)
        with ServerProcess(Path(tmp) / "home", "--compute", "simulated",
                           "--nodes", str(nodes)) as server:
            result = asyncio.run(_run(server, args.seconds))
    idle, loaded = _row(result["idle"]), _row(result["loaded"])
    table = Table(title=f"/healthz while {FOLLOWERS} clients follow logs ({args.seconds:g} s each)")
    for column in ("phase", "probes", "p50", "p99", "max"):
        table.add_column(column, justify="left" if column == "phase" else "right")
    for name, row in (("idle", idle), (f"{result['accepted']} followers + submits", loaded)):
        table.add_row(name, str(row["probes"]), f"{row['p50_ms']:.1f} ms",
                      f"{row['p99_ms']:.1f} ms", f"{row['max_ms']:.1f} ms")
    console.print(table)
    console.print(f"submits during the loaded phase: {result['submits_per_s']:.0f}/s")
    path = write_json("log_followers", {
        "seconds": args.seconds, "followers": FOLLOWERS, "accepted": result["accepted"],
        "idle": idle, "loaded": loaded, "submits_per_s": result["submits_per_s"],
    }, args.out)
    console.print(f"wrote {path}")


if __name__ == "__main__":
    main()
