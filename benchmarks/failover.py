"""Failover and planned handover times of replicated control planes (``phalanx up --ha``)
on PostgreSQL.

Starts N replicas (default 3) sharing one state directory and one PostgreSQL database, then
for each failover trial: finds the leader, kills it with SIGKILL, and submits a one-pod job
through a client given every replica's URL until one is acknowledged and admitted. The
failover time is from the kill to the moment the job is seen admitted (the new leader's
first admission). Each handover trial does the same with SIGTERM (a planned stop, as in a
rolling upgrade) instead, and also counts the requests that failed (none should). The
stopped replica is started again, as a follower, before the next trial.

    python -m benchmarks.failover --db postgresql://USER@HOST:PORT/DB        # 20 + 20 trials
    python -m benchmarks.failover --db ... --trials 5 --handovers 5 --lease 3s   # quicker

What a failover costs: the lease running out (at most ``--lease`` after the last renewal),
the follower's next look (within 0.2 s), and the new leader building the control plane
(reading the store, adopting the local plane's pods) before it admits. A handover costs no
lease: the leader releases it once its writes under way are done.
"""

from __future__ import annotations

import argparse
import os
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import httpx
from rich.console import Console
from rich.table import Table

from benchmarks.harness import REPO, percentile, write_json
from phalanx.errors import PhalanxError
from phalanx.sdk import Client
from phalanx.spec import parse_duration

console = Console(stderr=True)
ADMITTED = {"Admitted", "Starting", "Running", "Succeeded"}


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


class Replica:
    def __init__(self, home: Path, db: str, lease: str, index: int) -> None:
        self.home, self.db, self.lease, self.index = home, db, lease, index
        self.port = _free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.proc: subprocess.Popen[bytes] | None = None

    def start(self) -> None:
        with (self.home / f"replica-{self.index}.log").open("ab") as log:
            self.proc = subprocess.Popen(
                [sys.executable, "-m", "phalanx.cli.main", "up", "--ha", "--db", self.db,
                 "--host", "127.0.0.1", "--port", str(self.port), "--lease", self.lease,
                 "--run-as-user", str(os.geteuid())],
                cwd=REPO, stdout=log, stderr=log,
                env={**os.environ, "PHALANX_HOME": str(self.home)})

    def _answers(self, path: str) -> bool:
        """Whether the process runs and ``path`` answers 200."""
        if self.proc is None or self.proc.poll() is not None:
            return False
        try:
            return httpx.get(f"{self.url}{path}", timeout=2).status_code == 200
        except httpx.TransportError:
            return False

    def leads(self) -> bool:
        return self._answers("/readyz")

    def up(self) -> bool:
        """Whether it answers at all (a follower or the leader)."""
        return self._answers("/healthz")

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(30)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()


def _leader(replicas: list[Replica], timeout: float = 120.0) -> Replica:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        for replica in replicas:
            if replica.leads():
                return replica
        time.sleep(0.05)
    raise RuntimeError("no replica leads; see replica-*.log in the state directory")


def _admitted_after_kill(client: Client, name: str, killed: float) -> tuple[float, int]:
    """Submit ``name`` until acknowledged, then wait until it is admitted: seconds since
    ``killed``, and how many requests failed meanwhile."""
    job = {"name": name, "podSets": [{"name": "main", "replicas": 1, "command": ["true"],
                                      "resources": {"cpu": "100m"}}]}
    failed = 0
    while True:
        try:
            client.submit(job)
            break
        except PhalanxError as exc:
            if "already exists" in exc.message:  # a retry whose first try was stored
                break
            failed += 1
            console.print(f"  submit failed: {exc}")
            time.sleep(0.05)
    while True:
        try:
            if client.get(name).status.value in ADMITTED:
                return time.monotonic() - killed, failed
        except PhalanxError as exc:
            failed += 1
            console.print(f"  get failed: {exc}")
        time.sleep(0.02)


def _trials(replicas: list[Replica], urls: str, token: str, count: int, sig: int,
            what: str) -> tuple[list[float], int]:
    """``count`` trials stopping the leader with ``sig``: the seconds of each, and the
    requests that failed in all."""
    seconds: list[float] = []
    failed = 0
    for trial in range(count):
        # Every replica up first (the one stopped last trial restarts as a follower): a
        # trial measures a takeover by a follower, not a replica's start.
        deadline = time.monotonic() + 120
        while not all(replica.up() for replica in replicas):
            if time.monotonic() > deadline:
                raise RuntimeError("a replica did not start; see replica-*.log")
            time.sleep(0.1)
        leader = _leader(replicas)
        with Client(urls, token, timeout=60) as client:
            assert leader.proc is not None
            stopped = time.monotonic()
            leader.proc.send_signal(sig)
            took, failures = _admitted_after_kill(
                client, f"{what}-{os.getpid()}-{trial}", stopped)
            leader.proc.wait()
        seconds.append(took)
        failed += failures
        console.print(f"{what} {trial + 1}/{count}: {took:.2f} s"
                      + (f", {failures} failed requests" if failures else ""))
        leader.start()  # back, as a follower
    return seconds, failed


def _figures(seconds: list[float]) -> dict[str, Any]:
    if not seconds:
        return {"trials": 0, "seconds": []}
    return {"trials": len(seconds), "seconds": seconds,
            "p50_s": percentile(seconds, 50), "p99_s": percentile(seconds, 99),
            "min_s": min(seconds), "max_s": max(seconds)}


@contextmanager
def started_replicas(db: str, count: int, lease: str,
                     prefix: str) -> Iterator[tuple[Path, list[Replica], str]]:
    """``count`` replicas on ``db`` sharing a new state directory, once one leads: the
    directory, the replicas and the bootstrap token; stopped, their pods killed, after."""
    home = Path(tempfile.mkdtemp(prefix=prefix))
    home.chmod(0o700)
    replicas = [Replica(home, db, lease, i) for i in range(count)]
    try:
        for replica in replicas:
            replica.start()
        _leader(replicas)
        yield home, replicas, (home / "token").read_text().strip()
    finally:
        for replica in replicas:
            replica.stop()
        subprocess.run([sys.executable, "-c", "import sys; from pathlib import Path; "
                        "from tests.leftovers import kill_pods_under; "
                        "kill_pods_under(Path(sys.argv[1]))", str(home)], cwd=REPO, check=False)


def run(db: str, trials: int, count: int, lease: str, handovers: int) -> dict[str, Any]:
    with started_replicas(db, count, lease, "phalanx-failover-") as (_, replicas, token):
        urls = ",".join(r.url for r in replicas)
        failover, _ = _trials(replicas, urls, token, trials, signal.SIGKILL, "failover")
        handover, failed = _trials(replicas, urls, token, handovers, signal.SIGTERM,
                                   "handover")
    # The failover's figures at the top level, as before; the handover's beside them.
    return {"replicas": count, "lease": lease, **_figures(failover),
            "handover": {**_figures(handover), "failed_requests": failed}}


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--db", default=os.environ.get("PHALANX_TEST_POSTGRES_URL"),
                        help="PostgreSQL URL of a database the replicas share")
    parser.add_argument("--trials", type=int, default=20, help="failover trials (SIGKILL)")
    parser.add_argument("--handovers", type=int, default=20,
                        help="planned handover trials (SIGTERM)")
    parser.add_argument("--replicas", type=int, default=3)
    parser.add_argument("--lease", default="7s", help="the replicas' --lease (default 7s, "
                        "phalanx up's)")
    parser.add_argument("--out", type=Path, default=None)
    args = parser.parse_args(argv)
    if not args.db:
        parser.error("--db postgresql://... is needed (or PHALANX_TEST_POSTGRES_URL)")
    parse_duration(args.lease, field="--lease")
    result = run(args.db, args.trials, args.replicas, args.lease, args.handovers)
    table = Table(title=f"Leader stopped to the first admission ({args.replicas} replicas, "
                        f"lease {args.lease})")
    for column in ("stop", "trials", "p50 s", "p99 s", "min s", "max s", "failed requests"):
        table.add_column(column, justify="right")
    for label, figures, failed in (
        ("failover (SIGKILL)", result, "-"),
        ("handover (SIGTERM)", result["handover"], str(result["handover"]["failed_requests"])),
    ):
        if figures["trials"]:
            table.add_row(label, str(figures["trials"]), f"{figures['p50_s']:.2f}",
                          f"{figures['p99_s']:.2f}", f"{figures['min_s']:.2f}",
                          f"{figures['max_s']:.2f}", failed)
    Console().print(table)
    path = write_json("failover", result, args.out)
    console.print(f"wrote {path}")


if __name__ == "__main__":
    main()
