"""Pods' logs on the local plane, over real HTTP: the supervisor rotates a chatty pod's log
past its cap, readers and followers read the rotated files in order, and tail and since
pick lines by position and by the time they were written."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path

import pytest

from tests.e2e.conftest import ControlPlane, py_job, running

pytestmark = pytest.mark.slow

CAP = 64 * 1024
KEEP = 2


@pytest.fixture
def capped(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[ControlPlane]:
    """A control plane whose pods' logs rotate past CAP bytes, keeping KEEP old files."""
    monkeypatch.setenv("PHALANX_LOG_MAX_BYTES", str(CAP))
    monkeypatch.setenv("PHALANX_LOG_KEEP", str(KEEP))
    with running(ControlPlane(tmp_path / "home")) as cp:
        yield cp


def numbers(text: str) -> list[int]:
    return [int(line.split()[1]) for line in text.splitlines()]


def test_a_chatty_pods_log_is_capped_and_read_in_order(capped: ControlPlane) -> None:
    code = "for i in range(40000): print(f'line {i:06d} ' + 'x' * 40)"
    capped.submit(py_job("chatty", code))
    assert capped.wait_for("chatty", "Succeeded", "Failed")["status"] == "Succeeded"
    directory = capped.home / "logs" / "chatty"
    files = sorted(p.name for p in directory.iterdir() if not p.name.endswith(".idx"))
    assert files == ["chatty-worker-0.log", "chatty-worker-0.log.1", "chatty-worker-0.log.2"]
    # About 2 MB written; what is kept stays within the cap per file, past it by at most
    # the rest of one line (files rotate at a line's end).
    assert sum(p.stat().st_size for p in directory.iterdir()) <= (KEEP + 1) * (CAP + 100)
    kept = numbers(capped.logs("chatty"))
    assert kept == list(range(kept[0], 40000)) and kept[0] > 0
    assert numbers(capped.logs("chatty", tail=3)) == [39997, 39998, 39999]


def test_a_follower_reads_across_rotations_without_gaps(capped: ControlPlane) -> None:
    code = ("import time\n"
            "for i in range(6000):\n"
            "    print(f'line {i:06d} ' + 'y' * 40)\n"
            "    if i % 100 == 0: time.sleep(0.02)\n")
    capped.submit(py_job("rolling", code))
    with capped.api.stream("GET", "/v1/jobs/rolling/logs", params={"follow": "true"}) as stream:
        assert stream.status_code == 200
        text = "".join(stream.iter_text())
    assert capped.job("rolling")["status"] == "Succeeded"
    assert (capped.home / "logs" / "rolling" / "rolling-worker-0.log.1").exists()
    assert numbers(text) == list(range(6000))


def test_since_uses_when_the_supervisor_wrote_each_line(capped: ControlPlane) -> None:
    code = ("import time\n"
            "print('early', flush=True)\n"
            "time.sleep(3)\n"
            "print('late', time.time(), flush=True)\n")
    capped.submit(py_job("timed", code))
    assert capped.wait_for("timed", "Succeeded", "Failed")["status"] == "Succeeded"
    late = [line for line in capped.logs("timed").splitlines() if line.startswith("late")]
    written = float(late[0].split()[1])
    since = datetime.fromtimestamp(written - 0.5, tz=UTC).isoformat()
    assert capped.logs("timed", since=since).splitlines() == late
    assert capped.logs("timed", since="1h").splitlines()[0] == "early"
