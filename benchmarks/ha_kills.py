"""Replicas under repeated leader kills: nothing acknowledged lost, no rank started twice.

Starts N replicas (default 3) of ``phalanx up --ha`` on one PostgreSQL database and, in each
trial, sends a burst of gang submits from several clients (each given every replica's URL)
and kills the leader with SIGKILL once a third of the burst is acknowledged and a pod
runs (waiting up to a minute for one), while the first gangs run; the killed replica comes
back as a follower (as its supervisor would restart it). Once every acknowledged job has
ended, the trial counts:

- acknowledged submits that are not in the store (lost),
- acknowledged jobs that did not succeed (every job must finish, and succeed),
- pods that started more than once in one attempt, and attempts beyond the first
  (each pod appends its attempt number to a file of its own when it starts),
- the pods running when the leader was killed (started, not ended: each pod runs
  ``--pod-seconds`` and marks its end), so the kill lands among running gangs,
- the failover: from the kill to the new leader's ``/readyz``.

It writes its results after every trial (so a run cut short keeps the trials done) and
exits with status 1 if any trial lost an acknowledged submit, left a job not succeeded, or
started a pod twice.

    python -m benchmarks.ha_kills --db postgresql://USER@HOST:PORT/DB       # 20 x 2,000
    python -m benchmarks.ha_kills --db ... --trials 3 --burst 200           # quicker

Pods are ``sh`` one-liners, so a burst measures the control plane, not Python start-ups.
"""

from __future__ import annotations

import argparse
import os
import threading
import time
from collections import Counter
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.table import Table

from benchmarks.failover import Replica, _leader, started_replicas
from benchmarks.harness import percentile, write_json
from phalanx.errors import PhalanxError
from phalanx.sdk import Client
from phalanx.spec import parse_duration

console = Console(stderr=True)
TERMINAL = {"Succeeded", "Failed", "Cancelled"}
# Each pod appends its attempt to a file named after it: two lines of one attempt mean a
# pod of that attempt started twice.
# It then runs for a while and marks its end, so the trial knows which pods ran at the kill.
MARK = ('echo "$PHALANX_ATTEMPT" >> "$MARKS/$PHALANX_POD_NAME"; sleep "$POD_SECONDS"; '
        'touch "$MARKS/$PHALANX_POD_NAME.ended"')
ENDED = ".ended"
RUNNING_WAIT_SECONDS = 60.0  # for a pod to run once a third of the burst is acknowledged


def _gang(name: str, marks: Path, pods: int, seconds: float) -> dict[str, Any]:
    return {"name": name, "podSets": [{
        "name": "w", "replicas": pods, "resources": {"cpu": "10m"},
        "command": ["sh", "-c", MARK], "env": {"MARKS": str(marks),
                                                "POD_SECONDS": f"{seconds:g}"}}]}


def _running(marks: Path) -> int:
    """Pods started and not ended, now."""
    names = {p.name for p in marks.iterdir()}
    return sum(1 for n in names if not n.endswith(ENDED) and n + ENDED not in names)


def _burst(urls: str, token: str, names: list[str], marks: Path, pods: int, seconds: float,
           acknowledged: list[str], errors: list[str]) -> None:
    with Client(urls, token, timeout=60) as client:
        for name in names:
            try:
                client.submit(_gang(name, marks, pods, seconds))
                acknowledged.append(name)
            except PhalanxError as exc:  # not acknowledged: may or may not exist
                if "already exists" in exc.message:  # a retry of a stored first try
                    acknowledged.append(name)
                else:
                    errors.append(f"{name}: {exc.message}")


def _trial(replicas: list[Replica], token: str, trial: int, burst: int, clients: int,
           pods: int, seconds: float, home: Path) -> dict[str, Any]:
    marks = home / f"marks-{trial}"
    marks.mkdir()
    urls = ",".join(r.url for r in replicas)
    leader = _leader(replicas)
    names = [f"k{trial}-{i}" for i in range(burst)]
    acknowledged: list[str] = []
    errors: list[str] = []
    threads = [threading.Thread(target=_burst, args=(urls, token, names[c::clients], marks,
                                                     pods, seconds, acknowledged, errors))
               for c in range(clients)]
    started = time.monotonic()
    for thread in threads:
        thread.start()
    while len(acknowledged) < burst // 3 and any(t.is_alive() for t in threads):
        time.sleep(0.01)
    # The kill lands among running gangs: wait (a while at most) for a pod to be running.
    running_by = time.monotonic() + RUNNING_WAIT_SECONDS
    while not _running(marks) and time.monotonic() < running_by:
        time.sleep(0.01)
    assert leader.proc is not None
    running_at_kill = _running(marks)
    killed = time.monotonic()
    leader.proc.kill()
    leader.proc.wait()
    new = _leader(replicas)  # (the killed one is back as a follower: the Supervisor)
    failover = time.monotonic() - killed
    for thread in threads:
        thread.join()
    with Client(urls, token, timeout=60) as client:
        deadline = time.monotonic() + max(600.0, burst * 0.5)
        statuses: dict[str, str] = {}
        while time.monotonic() < deadline:
            try:
                statuses = {r.name: r.status.value for r in client.list(limit=None)
                            if r.name.startswith(f"k{trial}-")}
            except PhalanxError as exc:  # every replica restarting at once: ask again
                console.print(f"  listing the jobs failed, trying again: {exc.message}")
                time.sleep(1.0)
                continue
            if all(statuses.get(n) in TERMINAL for n in acknowledged):
                break
            time.sleep(0.5)
    took = time.monotonic() - started
    lost = [n for n in acknowledged if n not in statuses]
    unsucceeded = [n for n in acknowledged if n in statuses and statuses[n] != "Succeeded"]
    twice, restarts = 0, 0
    for path in marks.iterdir():
        if path.name.endswith(ENDED):
            continue
        attempts = Counter(path.read_text().split())
        twice += sum(n - 1 for n in attempts.values() if n > 1)
        restarts += sum(1 for a in attempts if a != "1")
    pod_files = sum(1 for p in marks.iterdir() if not p.name.endswith(ENDED))
    result = {"trial": trial + 1, "acknowledged": len(acknowledged), "refused": len(errors),
              "lost": len(lost), "not_succeeded": len(unsucceeded), "pods_started": pod_files,
              "pods_started_twice": twice, "later_attempts": restarts,
              "pods_running_at_kill": running_at_kill,
              "failover_s": round(failover, 2), "trial_s": round(took, 1),
              "new_leader": new.index, "lost_names": lost[:10],
              "not_succeeded_names": unsucceeded[:10], "errors": errors[:5]}
    console.print(f"trial {trial + 1}: {len(acknowledged)} acknowledged, {len(lost)} lost, "
                  f"{len(unsucceeded)} not succeeded, {twice} pods started twice, "
                  f"{running_at_kill} pods running at the kill, failover "
                  f"{failover:.1f} s, {took:.0f} s in all")
    return result


class Supervisor:
    """Starts again every replica that exits, as systemd or Kubernetes would: the one the
    trial kills, and one that stops leading on its own (status 75: it could not renew its
    lease in time, as on a machine too loaded to answer within the lease)."""

    def __init__(self, replicas: list[Replica]) -> None:
        self.replicas = replicas
        self.restarts: Counter[int] = Counter()  # exit status -> times
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def __enter__(self) -> Supervisor:
        self._thread.start()
        return self

    def __exit__(self, *_: object) -> None:
        self._stop.set()
        self._thread.join(10)

    def _run(self) -> None:
        while not self._stop.wait(0.2):
            for replica in self.replicas:
                if replica.proc is not None and replica.proc.poll() is not None:
                    self.restarts[replica.proc.returncode] += 1
                    replica.start()


def run(db: str, trials: int, count: int, lease: str, burst: int, clients: int,
        pods: int, seconds: float = 1.0, out: Path | None = None) -> dict[str, Any]:
    results: list[dict[str, Any]] = []
    with started_replicas(db, count, lease, "phalanx-ha-kills-") as (home, replicas, token), \
            Supervisor(replicas) as supervisor:
        for trial in range(trials):
            results.append(_trial(replicas, token, trial, burst, clients, pods, seconds, home))
            summary = _summary(results, count, lease, trials, burst, clients, pods, seconds,
                               supervisor)
            write_json("ha_kills", summary, out)  # after each trial: a run cut short keeps it
    return summary


def _summary(results: list[dict[str, Any]], count: int, lease: str, trials: int, burst: int,
             clients: int, pods: int, seconds: float,
             supervisor: Supervisor) -> dict[str, Any]:
    failovers = [r["failover_s"] for r in results]
    return {
        "replicas": count, "lease": lease, "trials": trials, "trials_done": len(results),
        "burst": burst, "clients": clients, "pods_per_job": pods, "pod_seconds": seconds,
        "acknowledged": sum(r["acknowledged"] for r in results),
        "lost": sum(r["lost"] for r in results),
        "not_succeeded": sum(r["not_succeeded"] for r in results),
        "pods_started_twice": sum(r["pods_started_twice"] for r in results),
        "later_attempts": sum(r["later_attempts"] for r in results),
        "pods_running_at_kill": [r["pods_running_at_kill"] for r in results],
        "failover_p50_s": percentile(failovers, 50), "failover_p99_s": percentile(failovers, 99),
        # Exits besides the kills (-9): 75 is a leader that could not renew its lease in time.
        "exits": {str(status): n for status, n in supervisor.restarts.items()},
        "per_trial": results,
    }


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--db", default=os.environ.get("PHALANX_TEST_POSTGRES_URL"),
                        help="PostgreSQL URL of a database the replicas share")
    parser.add_argument("--trials", type=int, default=20)
    parser.add_argument("--burst", type=int, default=2000, help="jobs submitted per trial")
    parser.add_argument("--clients", type=int, default=8, help="clients submitting at once")
    parser.add_argument("--pods", type=int, default=2, help="pods per job (a gang)")
    parser.add_argument("--pod-seconds", type=float, default=1.0,
                        help="how long each pod runs (so gangs run when the leader is killed)")
    parser.add_argument("--replicas", type=int, default=3)
    parser.add_argument("--lease", default="7s", help="the replicas' --lease")
    parser.add_argument("--out", type=Path, default=None)
    args = parser.parse_args(argv)
    if not args.db:
        parser.error("--db postgresql://... is needed (or PHALANX_TEST_POSTGRES_URL)")
    parse_duration(args.lease, field="--lease")
    if args.trials < 1:
        parser.error("--trials must be 1 or more")
    result = run(args.db, args.trials, args.replicas, args.lease, args.burst, args.clients,
                 args.pods, args.pod_seconds, args.out)
    table = Table(title=f"Leader killed mid-burst: {args.trials} trials of {args.burst} "
                        f"gangs of {args.pods} ({args.replicas} replicas, lease {args.lease})")
    for column in ("acknowledged", "lost", "not succeeded", "pods started twice",
                   "later attempts", "failover p50 s", "failover p99 s"):
        table.add_column(column, justify="right")
    table.add_row(str(result["acknowledged"]), str(result["lost"]),
                  str(result["not_succeeded"]), str(result["pods_started_twice"]),
                  str(result["later_attempts"]), f"{result['failover_p50_s']:.2f}",
                  f"{result['failover_p99_s']:.2f}")
    Console().print(table)
    path = write_json("ha_kills", result, args.out)
    console.print(f"wrote {path}")
    if result["lost"] or result["not_succeeded"] or result["pods_started_twice"]:
        console.print("FAILED: an acknowledged submit was lost, a job did not succeed, or a "
                      "pod started twice (per_trial names them)")
        raise SystemExit(1)


if __name__ == "__main__":
    main()
