"""Compute planes behind one control plane: latency through a worker, and scale.

1. Placement-to-pod-start and cancel-to-pods-gone, on this machine, for the in-process
   local plane (``phalanx up``) and for a local plane behind a worker (``phalanx up
   --no-local-plane`` + ``phalanx worker``). Placement is the job's Admitted event; the
   pod's start is the time its rank writes first (same clock); pods gone is when the
   rank's process has exited, polled every 10 ms from the cancel request.
2. Scale: W simulated workers of N nodes each (20 x 500 by default) behind one control
   plane: how long until all are connected and their nodes schedulable, the control
   plane's CPU per worker while they report (1 report a second each) and idle otherwise,
   and how long 500 one-CPU jobs take from submit to all Running across the planes.

3. Stop: SIGTERM to exit of a connected worker (it waits for a converge under way, not
   for its long poll).

    python -m benchmarks.planes              # full (a few minutes)
    python -m benchmarks.planes --quick      # smoke run (4 workers x 50 nodes, 3 rounds)
    python -m benchmarks.planes --stop-only  # only the worker's stop (5 rounds)
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import psutil
import yaml
from rich.console import Console
from rich.table import Table

from benchmarks.harness import REPO, ServerProcess, percentile, write_json
from phalanx.sdk import Client

QUEUES = """
kind: ResourceFlavor
name: default
---
kind: ClusterQueue
name: default
resourceGroups:
  - coveredResources: [cpu, memory, pods]
    flavors:
      - name: default
        resources:
          - {name: cpu, nominalQuota: "100000"}
          - {name: memory, nominalQuota: 100Ti}
          - {name: pods, nominalQuota: "1000000"}
---
kind: LocalQueue
name: default
clusterQueue: default
"""

STAMP = ("import os, sys, time\n"
         "open(sys.argv[1], 'w').write(f'{time.time()} {os.getpid()}')\n"
         "time.sleep(600)\n")


def _worker(server: ServerProcess, root: Path, name: str, *args: str) -> subprocess.Popen[bytes]:
    with server.client() as client:
        key = client.add_plane(name)
    key_file = root / f"{name}.key"
    key_file.write_text(key.key + "\n")
    env = {k: v for k, v in os.environ.items() if not k.startswith("PHALANX_")}
    log = (root / f"worker-{name}.log").open("ab")
    return subprocess.Popen(
        [sys.executable, "-m", "phalanx.cli.main", "worker", "--control-plane", server.url,
         "--plane", name, "--api-key-file", str(key_file), "--state-dir",
         str(root / f"worker-{name}"), "--fence-after", "60s", *args],
        cwd=REPO, stdout=log, stderr=log, env=env, start_new_session=True)


def _stop(procs: list[subprocess.Popen[bytes]]) -> None:
    for proc in procs:
        proc.terminate()
    for proc in procs:
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            proc.kill()


def _gone(pid: int) -> bool:
    try:
        return psutil.Process(pid).status() == psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return True


def _wait(check: Any, timeout: float, every: float = 0.01) -> Any:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = check()
        if value:
            return value
        time.sleep(every)
    raise TimeoutError("timed out")


@contextmanager
def control_plane(root: Path, remote: bool, *extra: str
                  ) -> Iterator[tuple[ServerProcess, Client]]:
    """A control plane (``phalanx up`` with ``extra``) with its own local plane, or with
    none and one worker's (named edge), its queues applied."""
    args = ["--no-local-plane", "--worker-grace", "30s", "--worker-lost-after", "120s"] \
        if remote else []
    with ServerProcess(root / "home", *args, *extra) as server:
        workers = [_worker(server, root, "edge")] if remote else []
        try:
            with server.client() as client:
                client.apply(list(yaml.safe_load_all(QUEUES)))
                if remote:
                    _wait(lambda: any(p.state == "connected" and p.nodes
                                      for p in client.planes()), 60, 0.1)
                yield server, client
        finally:
            _stop(workers)


def latency(rounds: int) -> dict[str, Any]:
    """Placement-to-pod-start and cancel-to-pods-gone, in-process and through a worker."""
    results: dict[str, Any] = {}
    for remote in (False, True):
        starts, gones = [], []
        with tempfile.TemporaryDirectory() as tmp, control_plane(Path(tmp), remote) as (
                _, client):
            for i in range(rounds):
                stamp = Path(tmp) / f"stamp-{i}"
                name = f"lat-{i}"
                client.submit({"name": name, "queue": "default", "podSets": [{
                    "name": "main", "replicas": 1, "resources": {"cpu": "100m"},
                    "command": [sys.executable, "-c", STAMP, str(stamp)]}]})
                _wait(lambda s=stamp: s.exists() and s.read_text(), 60)
                started, pid = stamp.read_text().split()
                admitted = next(e.time for e in client.events(name) if e.reason == "Admitted")
                starts.append(float(started) - admitted)
                cancelled = time.perf_counter()
                client.cancel(name)
                _wait(lambda p=int(pid): _gone(p), 60, 0.01)
                gones.append(time.perf_counter() - cancelled)
                _wait(lambda n=name: client.get(n).status.terminal, 60, 0.05)
        key = "worker" if remote else "in_process"
        results[key] = {
            "placement_to_pod_start_p50_s": statistics.median(starts),
            "placement_to_pod_start_p90_s": percentile(starts, 90),
            "cancel_to_pods_gone_p50_s": statistics.median(gones),
            "cancel_to_pods_gone_p90_s": percentile(gones, 90),
            "rounds": rounds,
        }
    return results


def worker_stop(rounds: int) -> dict[str, Any]:
    """SIGTERM to exit of a connected worker, one new worker (and plane) per round."""
    took = []
    with tempfile.TemporaryDirectory() as tmp, control_plane(Path(tmp), True) as (
            server, client):
        for i in range(rounds):
            name = f"stop-{i}"
            worker = _worker(server, Path(tmp), name)
            _wait(lambda n=name: client.plane(n).state == "connected", 60, 0.05)
            time.sleep(1.0)  # (in its long poll by now)
            sent = time.perf_counter()
            worker.terminate()
            worker.wait(timeout=120)
            took.append(time.perf_counter() - sent)
    return {"sigterm_to_exit_p50_s": statistics.median(took), "sigterm_to_exit_max_s":
            max(took), "rounds": rounds}


def _nodes_file(path: Path, count: int) -> Path:
    lines = ["nodes:"] + [f"  - {{name: n{i}, allocatable: {{cpu: 8, memory: 64Gi, pods: 110}}}}"
                          for i in range(count)]
    path.write_text("\n".join(lines) + "\n")
    return path


def _cpu_seconds(proc: psutil.Process) -> float:
    times = proc.cpu_times()
    return float(times.user + times.system)


def scale(workers: int, nodes: int, jobs: int, window: float) -> dict[str, Any]:
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        nodes_file = _nodes_file(root / "nodes.yaml", nodes)
        with ServerProcess(root / "home", "--no-local-plane", "--worker-grace", "60s",
                           "--worker-lost-after", "300s") as server:
            assert server.proc is not None
            cp = psutil.Process(server.proc.pid)
            with server.client() as client:
                client.apply(list(yaml.safe_load_all(QUEUES)))
            started = time.perf_counter()
            procs = [_worker(server, root, f"sim-{i}", "--compute", "simulated", "--nodes",
                             str(nodes_file)) for i in range(workers)]
            try:
                with server.client() as client:
                    _wait(lambda: sum(p.state == "connected" and p.nodes == nodes
                                      for p in client.planes()) == workers, 600, 0.2)
                    connected = time.perf_counter() - started
                    _wait(lambda: len(client.nodes()) == workers * nodes, 120, 0.2)
                    time.sleep(2.0)  # the first reports' node loads settle
                    before, clock = _cpu_seconds(cp), time.perf_counter()
                    time.sleep(window)
                    idle_cpu = (_cpu_seconds(cp) - before) / (time.perf_counter() - clock)
                    submitted = time.perf_counter()
                    client.submit_many([{"name": f"s-{i}", "queue": "default", "podSets": [{
                        "name": "main", "replicas": 1, "resources": {"cpu": "1"}}]}
                        for i in range(jobs)])
                    _wait(lambda: client.list(status="Running", limit=jobs + 1).__len__()
                          >= jobs, 600, 0.2)
                    all_running = time.perf_counter() - submitted
                    before, clock = _cpu_seconds(cp), time.perf_counter()
                    time.sleep(window)
                    busy_cpu = (_cpu_seconds(cp) - before) / (time.perf_counter() - clock)
                    spread = {p.name: len(p.jobs) for p in client.planes()}
            finally:
                _stop(procs)
    return {
        "workers": workers, "nodes_per_worker": nodes, "jobs": jobs,
        "all_connected_s": connected,
        "control_plane_cpu_per_worker_idle": idle_cpu / workers,
        "control_plane_cpu_per_worker_with_jobs": busy_cpu / workers,
        "submit_to_all_running_s": all_running,
        "planes_used": sum(1 for n in spread.values() if n),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--workers", type=int)
    parser.add_argument("--nodes", type=int)
    parser.add_argument("--stop-only", action="store_true",
                        help="measure only how fast a worker stops")
    parser.add_argument("--out", type=Path)
    args = parser.parse_args()
    stop = worker_stop(3 if args.quick else 5)
    stop_table = Table(title="A worker's stop")
    stop_table.add_column("figure")
    stop_table.add_column("value", justify="right")
    for key, value in stop.items():
        stop_table.add_row(key, f"{value:.2f}" if isinstance(value, float) else str(value))
    Console().print(stop_table)
    if args.stop_only:
        print(f"wrote {write_json('planes-stop', {'stop': stop}, args.out)}")
        return
    workers = args.workers or (4 if args.quick else 20)
    nodes = args.nodes or (50 if args.quick else 500)
    lat = latency(3 if args.quick else 10)
    big = scale(workers, nodes, 100 if args.quick else 500, 5.0 if args.quick else 15.0)
    table = Table(title="Compute planes: in-process vs through a worker")
    table.add_column("figure")
    table.add_column("in-process", justify="right")
    table.add_column("worker", justify="right")
    for key in ("placement_to_pod_start_p50_s", "placement_to_pod_start_p90_s",
                "cancel_to_pods_gone_p50_s", "cancel_to_pods_gone_p90_s"):
        table.add_row(key, f"{lat['in_process'][key] * 1000:.0f} ms",
                      f"{lat['worker'][key] * 1000:.0f} ms")
    Console().print(table)
    scale_table = Table(title=f"{workers} workers x {nodes} simulated nodes")
    scale_table.add_column("figure")
    scale_table.add_column("value", justify="right")
    for key, value in big.items():
        shown = f"{value:.3f}" if isinstance(value, float) else str(value)
        scale_table.add_row(key, shown)
    Console().print(scale_table)
    path = write_json("planes", {"latency": lat, "scale": big, "stop": stop}, args.out)
    print(f"wrote {path}")


if __name__ == "__main__":
    main()
