"""Pod logs on disk."""

from __future__ import annotations

import threading
from pathlib import Path

import pytest

from phalanx.errors import SpecError
from phalanx.store import LogStore


@pytest.fixture
def logs(tmp_path: Path) -> LogStore:
    return LogStore(tmp_path / "logs")


def test_path_is_the_pods_file_under_the_jobs_directory(logs: LogStore) -> None:
    path = logs.path("train", "train-worker-0")
    assert path == logs.root / "train" / "train-worker-0.log"
    assert path.parent.is_dir()
    assert not path.exists()


def test_reads_follow_offsets(logs: LogStore) -> None:
    logs.append("train", "train-worker-0", b"line 1\n")
    logs.append("train", "train-worker-0", b"line 2\npart")

    data, offset = logs.read("train", "train-worker-0")
    assert (data, offset) == (b"line 1\nline 2\npart", 18)
    assert logs.read("train", "train-worker-0", offset) == (b"", 18)

    logs.append("train", "train-worker-0", b"ial\n")
    assert logs.read("train", "train-worker-0", offset) == (b"ial\n", 22)
    assert logs.read("train", "train-worker-0", 7, limit=4) == (b"line", 11)
    assert logs.read("train", "train-worker-0", 100) == (b"", 100)


def test_reading_a_log_not_yet_written_returns_nothing(logs: LogStore) -> None:
    assert logs.read("train", "train-worker-3", 5) == (b"", 5)
    assert logs.pods("train") == []


def test_files_written_directly_are_read_and_listed(logs: LogStore) -> None:
    # The local compute plane hands this path to a process as its stdout.
    with open(logs.path("train", "train-worker-1"), "wb") as stdout:
        stdout.write(b"rank 1 ready\n")
    assert logs.read("train", "train-worker-1") == (b"rank 1 ready\n", 13)
    assert logs.pods("train") == ["train-worker-1"]


def test_pods_sort_naturally_and_only_count_logs(logs: LogStore) -> None:
    for index in (10, 2, 1, 0, 11):
        logs.append("big", f"big-worker-{index}", b"x")
    logs.append("big", "big-launcher-0", b"x")
    (logs.root / "big" / "notes.txt").write_text("not a log")

    assert logs.pods("big") == [
        "big-launcher-0", "big-worker-0", "big-worker-1", "big-worker-2", "big-worker-10",
        "big-worker-11",
    ]


def test_delete_removes_the_jobs_logs_only(logs: LogStore) -> None:
    logs.append("a", "a-worker-0", b"a")
    logs.append("b", "b-worker-0", b"b")

    logs.delete("a")
    logs.delete("never-ran")

    assert logs.pods("a") == []
    assert logs.read("b", "b-worker-0") == (b"b", 1)


@pytest.mark.parametrize("job", ["..", ".", "../escape", "a/b", "/abs", "", ".hidden",
                                 "nul\x00", "back\\slash"])
def test_job_names_that_could_escape_the_root_are_refused(logs: LogStore, job: str) -> None:
    for call in (lambda: logs.path(job, "p"), lambda: logs.append(job, "p", b"x"),
                 lambda: logs.read(job, "p"), lambda: logs.pods(job), lambda: logs.delete(job)):
        with pytest.raises(SpecError) as caught:
            call()
        assert caught.value.field == "job"
    assert not logs.root.exists() or list(logs.root.parent.iterdir()) == [logs.root]


@pytest.mark.parametrize("pod", ["..", "../../etc/passwd", "x/../../y", ""])
def test_pod_names_that_could_escape_the_root_are_refused(
    logs: LogStore, tmp_path: Path, pod: str
) -> None:
    for call in (lambda: logs.path("job", pod), lambda: logs.append("job", pod, b"x"),
                 lambda: logs.read("job", pod)):
        with pytest.raises(SpecError) as caught:
            call()
        assert caught.value.field == "pod"
    assert sorted(p.name for p in tmp_path.rglob("*")) == []


def test_negative_offsets_and_limits_are_refused(logs: LogStore) -> None:
    with pytest.raises(SpecError) as caught:
        logs.read("a", "a-worker-0", -1)
    assert caught.value.field == "offset"
    with pytest.raises(SpecError) as caught:
        logs.read("a", "a-worker-0", 0, limit=-5)
    assert caught.value.field == "limit"


def test_concurrent_appends_keep_chunks_whole(logs: LogStore) -> None:
    def writer(index: int) -> None:
        for i in range(200):
            logs.append("j", "j-worker-0", f"writer {index} line {i:03d}\n".encode())

    threads = [threading.Thread(target=writer, args=(i,)) for i in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()

    lines = logs.read("j", "j-worker-0")[0].decode().splitlines()
    assert sorted(lines) == sorted(f"writer {w} line {i:03d}" for w in range(4) for i in range(200))
