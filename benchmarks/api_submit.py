"""HTTP submission throughput and submit-to-start latency of the embedded control plane.

For each store (SQLite, and PostgreSQL when a URL is given) it starts a real
control plane (``phalanx up``, local compute plane) in a fresh state directory and:

1. times a 1-pod job from the client's POST to the first line its process prints
   (a timestamp), on an idle control plane;
2. submits N jobs over HTTP from C concurrent clients to a held ClusterQueue
   (``stopPolicy: Hold``, so they stay pending and every scheduling cycle sees
   them) and records each request's latency and the server's CPU time per submit (on
   Linux: the figure the load of other processes moves least);
3. times the 1-pod job again with those N jobs pending.

Submissions are measured twice, in alternating rounds on the same server: with the single
admin token sent as it is (what every client did before per-user keys), and as a member of
a team whose key the client exchanged for a short-lived JWT (verified on every request,
the team's queue checked). Both write the same audit entry, so the difference is the
cost of tokens.

    python -m benchmarks.api_submit                      # SQLite, 10,000 jobs
    python -m benchmarks.api_submit --db postgresql://...  # SQLite and PostgreSQL
    python -m benchmarks.api_submit --jobs 500 --quick   # smoke run
    python -m benchmarks.api_submit --verify-only        # a token's verification alone
    python -m benchmarks.api_submit --baseline /tmp/before/src   # also an earlier tree's code

With ``--baseline`` the control plane of an earlier tree (its ``src`` folder, e.g. from
``git archive REV src | tar -x -C /tmp/before``) runs beside this tree's on each store (on
PostgreSQL in a database of its own beside the one given), and their rounds alternate, so
before and after come from one run under the same load.

The verification is measured for a user's token and for a job's credential's token (whose
attempt is looked up on every request), in one process, one after the other.
"""

from __future__ import annotations

import argparse
import os
import re
import sys
import tempfile
import threading
import time
import uuid
from concurrent.futures import ThreadPoolExecutor
from contextlib import ExitStack
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.table import Table

from benchmarks.harness import ServerProcess, percentile, process_cpu_s, write_json
from phalanx.sdk import Client

console = Console(stderr=True)
STARTED = re.compile(r"started (\d+\.\d+)")

HELD_QUEUE: list[dict[str, Any]] = [
    {
        "kind": "ClusterQueue", "name": "held", "stopPolicy": "Hold",
        "resourceGroups": [{
            "coveredResources": ["cpu"],
            "flavors": [{"name": "default", "resources": [{"name": "cpu", "nominalQuota": "1"}]}],
        }],
    },
    {"kind": "LocalQueue", "name": "held", "clusterQueue": "held"},
]


def held_job(name: str) -> dict[str, Any]:
    return {
        "name": name, "queue": "held",
        "podSets": [{"name": "worker", "resources": {"cpu": "100m"},
                     "command": ["true"]}],
    }


def start_latency(client: Client, name: str) -> float:
    """Seconds from the POST of a 1-pod job to the first line its process prints."""
    spec = {
        "name": name,
        "podSets": [{
            "name": "worker", "resources": {"cpu": "100m"},
            "command": [sys.executable, "-S", "-c",
                        "import time; print(f'started {time.time():.6f}')"],
        }],
    }
    posted = time.time()
    client.submit(spec)
    record = client.wait(name, timeout=120)
    if record.status.value != "Succeeded":
        raise RuntimeError(f"{name} ended {record.status.value}: {record.message}")
    for line in client.logs(name):
        found = STARTED.search(line)
        if found:
            return float(found.group(1)) - posted
    raise RuntimeError(f"{name} printed no start time")


AUTH_MODES = ("token", "jwt")


def member_key(client: Client) -> str:
    """A key of a member of a team that may submit to the held queue."""
    client.put_team("bench", ["held"])
    client.put_user("bench", "member", ["bench"])
    return client.create_key("bench", description="api_submit benchmark").key


def submit_many(server: ServerProcess, run: str, jobs: int, clients: int,
                key: str | None = None) -> dict[str, Any]:
    """``key`` None: the admin token sent as it is; else that key's JWTs."""
    latencies: list[float] = []
    lock = threading.Lock()
    counter = iter(range(jobs))

    def connect() -> Client:
        if key is not None:
            return Client(server.url, key, timeout=60.0)
        client = server.client()
        assert client.auth is not None
        client.auth.legacy = True  # send the token itself, as clients did before keys
        return client

    def worker() -> None:
        mine: list[float] = []
        with connect() as client:
            while True:
                with lock:
                    i = next(counter, None)
                if i is None:
                    break
                began = time.perf_counter()
                client.submit(held_job(f"{run}-{i}"))
                mine.append(time.perf_counter() - began)
        with lock:
            latencies.extend(mine)

    assert server.proc is not None
    cpu_before = process_cpu_s(server.proc.pid)
    began = time.perf_counter()
    with ThreadPoolExecutor(clients) as pool:
        for future in [pool.submit(worker) for _ in range(clients)]:
            future.result()
    wall = time.perf_counter() - began
    cpu_after = process_cpu_s(server.proc.pid)
    return {
        "jobs": jobs,
        "server_cpu_s": None if cpu_before is None or cpu_after is None
        else cpu_after - cpu_before,
        "clients": clients,
        "latencies": latencies,
        "wall_s": wall,
        "per_second": jobs / wall,
        "p50_ms": percentile(latencies, 50) * 1000,
        "p99_ms": percentile(latencies, 99) * 1000,
        "max_ms": max(latencies) * 1000,
    }


def verify_cost(samples: int = 20_000) -> dict[str, float]:
    """Seconds the server spends verifying one request's token: a token it has seen (every
    request but the first of each token) and one it has not (once per token, every 4 min);
    and a job's credential's token it has seen, whose attempt is looked up every time (the
    control loop, its job table and the simulated plane as ``phalanx up`` wires them)."""
    from phalanx.compute.simulated import SimulatedPlane
    from phalanx.control import Controller
    from phalanx.server.auth import Authenticator
    from phalanx.spec import JobSpec, Node
    from phalanx.store import IdentityStore, Store

    def timed(token: str) -> float:
        began = time.perf_counter()
        for _ in range(samples):
            auth.verify(token)
        return (time.perf_counter() - began) / samples

    with tempfile.TemporaryDirectory(prefix="phalanx-verify-") as tmp, \
            Store.for_home(Path(tmp)) as store:
        plane = SimulatedPlane([Node(name="n", allocatable={"cpu": 4, "memory": 2 ** 34})],
                               logs_root=Path(tmp) / "logs")
        controller = Controller(store, plane)
        auth = Authenticator(Path(tmp), IdentityStore(store), bootstrap_key="k" * 43,
                             attempts=controller.service.running_attempt)
        tokens = [auth.exchange("k" * 43, "bench").token for _ in range(200)]
        began = time.perf_counter()
        for token in tokens:
            auth.verify(token)
        first = (time.perf_counter() - began) / len(tokens)
        controller.submit(JobSpec.model_validate({
            "name": "running", "podSets": [{"resources": {"cpu": "1"}, "command": ["x"]}]}))
        controller.step()
        controller.step()
        job_key = auth.job_keys.key_for(controller.get("running"), 1)
        job_token = auth.exchange(job_key, "bench").token
        seen, job_seen = timed(tokens[0]), timed(job_token)
        plane.close()
    return {"seen_token_s": seen, "new_token_s": first, "seen_job_token_s": job_seen}


def print_verify_cost(verify: dict[str, float]) -> None:
    console.log(f"verifying a token: {verify['seen_token_s'] * 1e6:.1f} us (seen before), "
                f"{verify['new_token_s'] * 1e6:.0f} us (new); a job's credential's token "
                f"{verify['seen_job_token_s'] * 1e6:.1f} us (seen before, its attempt "
                "looked up)")


ROUNDS = 5  # short alternating rounds: load from other processes hits both modes alike


def _merged(parts: list[dict[str, Any]]) -> dict[str, Any]:
    latencies = [x for p in parts for x in p.pop("latencies")]
    wall = sum(p["wall_s"] for p in parts)
    jobs = sum(p["jobs"] for p in parts)
    cpu = [p["server_cpu_s"] for p in parts]
    # The server's CPU time per submit (the median of the rounds'): the figure the load of
    # other processes on the machine moves least, so the one to compare codes by.
    per_submit = None if None in cpu else percentile(
        [c / p["jobs"] for c, p in zip(cpu, parts, strict=True)], 50) * 1000
    return {"jobs": jobs, "clients": parts[0]["clients"], "wall_s": wall,
            "server_cpu_ms_per_submit": per_submit,
            "per_second": jobs / wall, "p50_ms": percentile(latencies, 50) * 1000,
            "p99_ms": percentile(latencies, 99) * 1000, "max_ms": max(latencies) * 1000,
            "rounds_per_second": [p["per_second"] for p in parts]}


def other_database(url: str, suffix: str) -> str:
    """A database of its own beside ``url``'s on the same PostgreSQL server (made empty),
    for a second control plane measured in the same run."""
    from sqlalchemy import create_engine, make_url, text

    parsed = make_url(url)
    name = f"{parsed.database or 'postgres'}_{suffix}"
    admin = create_engine(url, isolation_level="AUTOCOMMIT")
    try:
        with admin.connect() as connection:
            connection.execute(text(f'DROP DATABASE IF EXISTS "{name}"'))
            connection.execute(text(f'CREATE DATABASE "{name}"'))
    finally:
        admin.dispose()
    return parsed.set(database=name).render_as_string(hide_password=False)


def measure(store: str, db: str | None, jobs: int, clients: int, samples: int,
            sources: list[Path | None]) -> list[dict[str, Any]]:
    """One control plane per source (a ``src`` folder; None: this tree's), all up at once,
    their rounds alternating so that load from other processes hits each alike."""
    run = "b" + uuid.uuid4().hex[:6]  # unique names: a reused PostgreSQL keeps earlier runs
    codes = ["now" if source is None else "before" for source in sources]
    with tempfile.TemporaryDirectory(prefix="phalanx-bench-") as tmp, ExitStack() as stack:
        servers, clients_of = [], []
        for code, source in zip(codes, sources, strict=True):
            url = db if db is None or code == "now" else other_database(db, "before")
            server = stack.enter_context(ServerProcess(
                Path(tmp) / code, *(["--db", url] if url else []), source=source))
            client = stack.enter_context(server.client())
            client.apply(HELD_QUEUE)
            console.log(f"{store} ({code}): control plane at {server.url}")
            servers.append(server)
            clients_of.append(client)
        idle = [[start_latency(client, f"{run}-idle-{i}") for i in range(samples)]
                for client in clients_of]
        keys = [member_key(client) for client in clients_of]
        console.log(f"{store}: submitting {jobs:,} jobs to each from {clients} clients, half "
                    "with the admin token, half with a member's JWTs, alternating")
        rounds: list[dict[str, list[dict[str, Any]]]] = [
            {mode: [] for mode in AUTH_MODES} for _ in servers]
        per_round = max(1, jobs // (2 * ROUNDS))
        for r in range(ROUNDS):
            for server, key, mine in zip(servers, keys, rounds, strict=True):
                for mode in AUTH_MODES:
                    mine[mode].append(submit_many(
                        server, f"{run}-{mode}{r}", per_round, clients,
                        None if mode == "token" else key))
        loaded = [[start_latency(client, f"{run}-loaded-{i}") for i in range(samples)]
                  for client in clients_of]
    return [{
        "store": store,
        "code": code,
        "submit": {mode: _merged(parts) for mode, parts in mine.items()},
        "start_idle_s": {"p50": percentile(quiet, 50), "max": max(quiet), "samples": quiet},
        "start_loaded_s": {"p50": percentile(busy, 50), "max": max(busy), "samples": busy},
    } for code, mine, quiet, busy in zip(codes, rounds, idle, loaded, strict=True)]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--jobs", type=int, default=10_000)
    parser.add_argument("--clients", type=int, default=4, help="concurrent HTTP clients")
    parser.add_argument("--samples", type=int, default=5, help="start-latency samples")
    parser.add_argument("--db", default=os.environ.get("PHALANX_BENCH_POSTGRES_URL"),
                        help="also measure on this PostgreSQL URL")
    parser.add_argument("--out", type=Path, default=None)
    parser.add_argument("--baseline", type=Path, default=None, metavar="SRC",
                        help="also measure the control plane of this src folder, alongside")
    parser.add_argument("--verify-only", action="store_true",
                        help="measure a token's verification only (no server)")
    args = parser.parse_args()
    if args.verify_only:
        verify = verify_cost()
        print_verify_cost(verify)
        console.log(f"wrote {write_json('api_submit_verify', verify, args.out)}")
        return

    stores = [("sqlite", None), *([("postgresql", args.db)] if args.db else [])]
    sources = [args.baseline, None] if args.baseline else [None]
    results = [result for store, db in stores
               for result in measure(store, db, args.jobs, args.clients, args.samples, sources)]

    table = Table(title=f"HTTP submission of {args.jobs:,} jobs ({args.clients} clients)")
    for column in ("store", "code", "auth", "jobs/s", "p50 ms", "p99 ms",
                   "server CPU ms per submit", "start idle p50 s",
                   f"start with {args.jobs:,} pending p50 s"):
        table.add_column(column, justify="right")
    for r in results:
        for mode in AUTH_MODES:
            s = r["submit"][mode]
            table.add_row(r["store"], r["code"], mode, f"{s['per_second']:,.0f}",
                          f"{s['p50_ms']:.1f}",
                          f"{s['p99_ms']:.1f}",
                          "?" if s["server_cpu_ms_per_submit"] is None
                          else f"{s['server_cpu_ms_per_submit']:.2f}",
                          f"{r['start_idle_s']['p50']:.2f}",
                          f"{r['start_loaded_s']['p50']:.2f}")
        cost = 1 - r["submit"]["jwt"]["per_second"] / r["submit"]["token"]["per_second"]
        r["jwt_cost_of_throughput"] = cost
        console.log(f"{r['store']} ({r['code']}): JWTs cost {cost:.1%} of submit throughput")
    verify = verify_cost()
    # The server's time per submit, at most: the clients' wall time shared by the jobs.
    per_submit = min(r["submit"]["jwt"]["wall_s"] / r["submit"]["jwt"]["jobs"] for r in results
                     if r["code"] == "now")
    verify["share_of_a_submit"] = verify["seen_token_s"] / per_submit
    print_verify_cost(verify)
    console.log(f"a seen token's verification is {verify['share_of_a_submit']:.2%} of a "
                f"submit's {per_submit * 1e3:.2f} ms")
    Console().print(table)
    path = write_json("api_submit", {"jobs": args.jobs, "clients": args.clients,
                                     "results": results, "verify": verify}, args.out)
    console.log(f"wrote {path}")


if __name__ == "__main__":
    main()
