"""No rank runs on two clusters at once: the lease fence, the worker's own fence, the
timers of a silent plane, and a control plane that was down longer than worker-lost-after.

Ranks append ``<epoch> <time>`` to a file while they run; their own timestamps are what
the assertions compare (never the test's wall-clock durations).
"""

from __future__ import annotations

import time
from pathlib import Path

import psutil
import pytest

from tests.planes.harness import Federation, job_spec, wait_until

pytestmark = pytest.mark.timeout(240)


def stamping(path: Path, first_runs_for: float, later_runs_for: float = 1.0) -> str:
    """Code of a rank that stamps ``path`` every 0.1 s: attempt 1 for ``first_runs_for``
    seconds, later attempts for ``later_runs_for``; then it exits 0."""
    return (
        "import os, time\n"
        f"limit = {first_runs_for!r} if os.environ['PHALANX_EPOCH'] == '1' "
        f"else {later_runs_for!r}\n"
        "end = time.time() + limit\n"
        "while time.time() < end:\n"
        f"    with open({str(path)!r}, 'a') as f:\n"
        "        f.write(f\"{os.environ['PHALANX_EPOCH']} {os.environ['PHALANX_RANK']} "
        "{time.time()}\\n\")\n"
        "    time.sleep(0.1)\n"
    )


def stamps(path: Path) -> dict[int, list[float]]:
    by_epoch: dict[int, list[float]] = {}
    if not path.exists():
        return by_epoch
    for line in path.read_text().splitlines():
        parts = line.split()
        if len(parts) == 3:
            by_epoch.setdefault(int(parts[0]), []).append(float(parts[2]))
    return by_epoch


def running_ranks(marker: str) -> int:
    found = 0
    for proc in psutil.process_iter(["cmdline"]):
        if any(marker in part for part in proc.info.get("cmdline") or []) and \
                "-c" in (proc.info.get("cmdline") or []):
            found += 1
    return found


def plane_of(job: dict[str, object]) -> str:
    admission = job["admission"]
    assert isinstance(admission, dict)
    return str(admission["podSets"][0]["nodes"][0]).split(".")[0]


def test_kill9_worker_fences_pods_and_the_gang_succeeds_on_the_other_plane(
        tmp_path: Path) -> None:
    out = tmp_path / "stamps-kill9"
    with Federation(tmp_path, lost_after="6s") as fed:
        east = fed.start_worker("east", "--fence-after", "3s")
        fed.submit(job_spec("train", stamping(out, 600.0), replicas=2, cpu="500m",
                            system_restarts=2))
        job = fed.wait_status("train", "Running")
        assert plane_of(job) == "east"
        wait_until(lambda: len(stamps(out).get(1, [])) >= 4, what="ranks of attempt 1")
        fed.start_worker("west", "--fence-after", "3s")
        east.kill9()
        killed_at = time.time()
        # The pods' supervisors stop them when the lease lapses, with no worker left.
        wait_until(lambda: running_ranks(str(out)) == 0, timeout=20,
                   what="the fence to stop attempt 1")
        done = fed.wait_status("train", "Succeeded", timeout=90)
        assert done["attempt"] == 2 and plane_of(done) == "west"
        by_epoch = stamps(out)
        # From the ranks' own clocks: attempt 1 ended before attempt 2 began.
        assert max(by_epoch[1]) < min(by_epoch[2])
        assert max(by_epoch[1]) - killed_at < 3.0 + 2.0  # stopped by the fence, not later
        # The worker comes back: it reports attempt 1's pods (fenced) and runs nothing.
        fed.start_worker("east", "--fence-after", "3s")
        wait_until(lambda: not list((east.state_dir / "pods").glob("train*")), timeout=60,
                   what="the old attempt to be forgotten")
        assert running_ranks(str(out)) == 0
        final = fed.job("train")
        assert final["status"] == "Succeeded" and final["attempt"] == 2
        assert len(stamps(out)) == 2


def test_partition_worker_fences_itself_before_the_control_plane_requeues(
        tmp_path: Path) -> None:
    out = tmp_path / "stamps-partition"
    with Federation(tmp_path, lost_after="8s") as fed:
        gate = fed.gate()
        fed.start_worker("east", "--fence-after", "3s", via=gate)
        fed.submit(job_spec("cut", stamping(out, 600.0), system_restarts=2))
        fed.wait_status("cut", "Running")
        wait_until(lambda: stamps(out).get(1), what="attempt 1 to stamp")
        gate.cut()
        # The control plane keeps the job (and its quota) while the plane is silent.
        wait_until(lambda: fed.plane("east")["state"].startswith("disconnected"),
                   what="the plane to read as disconnected")
        assert fed.job("cut")["status"] == "Running"
        requeued = wait_until(lambda: fed.job("cut")["status"] != "Running" and time.time(),
                              timeout=30, every=0.05, what="the requeue")
        # The worker stopped its pods itself, before the control plane gave up on it.
        assert max(stamps(out)[1]) < requeued
        assert running_ranks(str(out)) == 0
        gate.heal()
        done = fed.wait_status("cut", "Succeeded", timeout=60)
        assert done["attempt"] == 2
        assert max(stamps(out)[1]) < min(stamps(out)[2])


def test_a_job_that_succeeds_while_cut_off_is_reported_after_reconnect_and_not_rerun(
        tmp_path: Path) -> None:
    out = tmp_path / "stamps-quiet"
    with Federation(tmp_path, lost_after="25s") as fed:
        gate = fed.gate()
        fed.start_worker("east", "--fence-after", "15s", via=gate)
        fed.submit(job_spec("quiet", stamping(out, 1.5), replicas=2, cpu="500m"))
        fed.wait_status("quiet", "Running")
        gate.cut()
        wait_until(lambda: running_ranks(str(out)) == 0 and stamps(out).get(1), timeout=20,
                   what="the job to end while cut off")
        assert fed.job("quiet")["status"] == "Running"  # not seen is not failed
        gate.heal()
        done = fed.wait_status("quiet", "Succeeded", timeout=30)
        assert done["attempt"] == 1
        assert set(stamps(out)) == {1}


def test_control_plane_down_longer_than_worker_lost_after_requeues_nothing(
        tmp_path: Path) -> None:
    out = tmp_path / "stamps-down"
    with Federation(tmp_path, lost_after="5s") as fed:
        gate = fed.gate()
        fed.start_worker("east", "--fence-after", "3s", via=gate)
        fed.submit(job_spec("steady", stamping(out, 1.0), system_restarts=2))
        fed.wait_status("steady", "Running")
        fed.server.stop()
        time.sleep(6.0)  # longer than --worker-lost-after
        fed.server.start()
        gate.target = ("127.0.0.1", int(fed.server.url.rsplit(":", 1)[1]))
        # Every silence clock starts with the control plane: no plane is lost, no job
        # requeued while the worker reconnects.
        states = []
        for _ in range(20):
            states.append(fed.plane("east")["state"])
            time.sleep(0.1)
        assert not any(s.startswith("lost") for s in states)
        done = fed.wait_status("steady", "Succeeded", timeout=30)
        events = fed.api().get("/v1/jobs/steady/events").json()["items"]
        assert done["attempt"] == 1, [(e["reason"], e["message"]) for e in events]
        assert "Requeued" not in [e["reason"] for e in events]


def test_a_second_worker_for_a_plane_takes_it_over_and_the_first_stops_its_pods(
        tmp_path: Path) -> None:
    # Two workers with one plane's key would both start what the plane should run: the one
    # that said hello last drives it, and the other stops its pods and exits at once,
    # without waiting for its fence.
    from tests.planes.harness import WorkerProcess
    out = tmp_path / "stamps-second"
    with Federation(tmp_path, lost_after="60s") as fed:
        first = fed.start_worker("east", "--fence-after", "30s")
        fed.submit(job_spec("train", stamping(out, 600.0), replicas=2, cpu="500m",
                            system_restarts=2))
        fed.wait_status("train", "Running")
        wait_until(lambda: len(stamps(out).get(1, [])) >= 4, what="ranks of attempt 1")
        second = WorkerProcess(tmp_path / "second", "east", first.key_file,
                               ["--fence-after", "30s"]).start(fed.server.url)
        try:
            assert first.proc is not None
            wait_until(lambda: first.proc is not None and first.proc.poll() is not None,
                       timeout=20, what="the first worker to stop:\n" + first.log())
            assert first.proc.returncode != 0
            assert "driven by worker" in first.log()
            # Well before its 30 s fence: it stopped its pods as it went (attempt 1's ranks
            # stamp no more; a later attempt may run under the second worker).
            wait_until(lambda: time.time() - max(stamps(out)[1]) > 2.0, timeout=15,
                       what="the first worker's pods to stop")
        finally:
            second.stop()


def test_a_plane_removed_by_force_moves_its_jobs_only_once_its_fence_has_acted(
        tmp_path: Path) -> None:
    # The removed plane's worker loses its key at once and may never hear the stop: the job
    # runs elsewhere only once that worker's fence has surely stopped its ranks.
    out = tmp_path / "stamps-removed"
    with Federation(tmp_path, lost_after="60s") as fed:
        fed.start_worker("east", "--fence-after", "3s")
        spec = job_spec("moved", stamping(out, 600.0), replicas=2, cpu="500m",
                        system_restarts=2)
        spec["restart"]["backoff"] = "0s"  # (no restart backoff to hide an overlap)
        fed.submit(spec)
        assert plane_of(fed.wait_status("moved", "Running")) == "east"
        wait_until(lambda: len(stamps(out).get(1, [])) >= 4, what="ranks of attempt 1")
        fed.start_worker("west", "--fence-after", "3s")
        removed = fed.cli("plane", "remove", "east", "--force")
        assert removed.returncode == 0, removed.stderr
        said = removed.stdout.decode() + removed.stderr.decode()
        assert "1 job(s) requeued, held until its fence" in " ".join(said.split()), said
        held = wait_until(lambda: (j := fed.job("moved"))["status"] == "Queued" and j,
                          what="the job to be requeued")
        assert "after compute plane east was removed" in str(held.get("pendingMessage")), \
            held.get("pendingMessage")
        done = fed.wait_status("moved", "Succeeded", timeout=90)
        assert done["attempt"] == 2 and plane_of(done) == "west"
        # From the ranks' own clocks: attempt 1 stopped (at the fence) before 2 started.
        assert max(stamps(out)[1]) < min(stamps(out)[2])
