"""Pod logs on disk."""

from __future__ import annotations

import os
import threading
from pathlib import Path

import pytest

from phalanx.errors import SpecError
from phalanx.store import LogStore
from phalanx.store.logfile import RotatingLog
from phalanx.store.logs import START, LogPosition, Rotation


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


# --------------------------------------------------------------------------- rotation
def read_all(logs: LogStore, job: str, pod: str, position: LogPosition = START,
             limit: int = 1000) -> tuple[bytes, LogPosition]:
    """Everything from ``position``, in reads of at most ``limit`` bytes."""
    out = b""
    while True:
        data, position = logs.read_from(job, pod, position, limit)
        if not data:
            return out, position
        assert len(data) <= limit
        out += data


def test_a_pods_log_rotates_past_its_cap_and_keeps_only_the_newest_files(
    tmp_path: Path,
) -> None:
    logs = LogStore(tmp_path / "logs", Rotation(max_bytes=4096, keep=2))
    for i in range(5000):
        logs.append("big", "big-w-0", b"line %d\n" % i)
    names = sorted(p.name for p in (logs.root / "big").iterdir())
    assert names == ["big-w-0.log", "big-w-0.log.1", "big-w-0.log.1.idx", "big-w-0.log.2",
                     "big-w-0.log.2.idx", "big-w-0.log.idx"]
    on_disk = sum(p.stat().st_size for p in (logs.root / "big").iterdir())
    assert on_disk <= 3 * 4096
    assert logs.pods("big") == ["big-w-0"]
    # Read oldest file first: the newest lines, in order, ending with the last one.
    text, _ = read_all(logs, "big", "big-w-0")
    numbers = [int(line.split()[1]) for line in text.decode().splitlines()]
    assert numbers == list(range(numbers[0], 5000)) and numbers[0] > 0


def test_a_reader_keeps_its_place_across_rotations(tmp_path: Path) -> None:
    logs = LogStore(tmp_path / "logs", Rotation(max_bytes=4096, keep=3))
    seen = b""
    position = START
    for i in range(3000):
        logs.append("r", "r-w-0", b"line %d\n" % i)
        if i % 200 == 0:  # fewer reads than rotations of one file: none is missed
            data, position = read_all(logs, "r", "r-w-0", position)
            seen += data
    data, position = read_all(logs, "r", "r-w-0", position)
    seen += data
    assert seen.decode().splitlines() == [f"line {i}" for i in range(3000)]
    assert logs.read_from("r", "r-w-0", position, 100) == (b"", position)


def test_tail_finds_the_last_lines_across_files(tmp_path: Path) -> None:
    logs = LogStore(tmp_path / "logs", Rotation(max_bytes=4096, keep=3))
    for i in range(1000):
        logs.append("t", "t-w-0", b"line %d\n" % i)

    def tail(n: int) -> list[str]:
        return read_all(logs, "t", "t-w-0", logs.tail_position("t", "t-w-0", n))[0] \
            .decode().splitlines()

    assert tail(2) == ["line 998", "line 999"]
    assert tail(0) == []
    # More lines than the newest file holds: the start is in an older one.
    assert tail(300) == [f"line {i}" for i in range(700, 1000)]
    # More than are kept: everything kept.
    assert tail(10**6) == read_all(logs, "t", "t-w-0")[0].decode().splitlines()
    logs.append("t", "t-w-0", b"no newline yet")
    assert tail(1) == ["no newline yet"]
    assert logs.tail_position("t", "none", 5) == START
    with pytest.raises(SpecError) as info:
        logs.tail_position("t", "t-w-0", -1)
    assert info.value.field == "tail"


def test_since_starts_at_the_first_line_of_that_second(tmp_path: Path) -> None:
    logs = LogStore(tmp_path / "logs")
    path = str(logs.path("s", "s-w-0"))
    now = [1000.2]
    with RotatingLog(path, 1 << 20, 3, clock=lambda: now[0]) as log:
        log.write(b"early 1\nearly ")
        log.write(b"2\n")
        now[0] = 1005.7
        log.write(b"late 1\nlate 2\n")
        now[0] = 1009.1
        log.write(b"latest\n")

    def since(moment: float) -> str:
        return read_all(logs, "s", "s-w-0", logs.since_position("s", "s-w-0", moment))[0] \
            .decode()

    assert since(999) == "early 1\nearly 2\nlate 1\nlate 2\nlatest\n"
    assert since(1003) == since(1005.9) == "late 1\nlate 2\nlatest\n"
    assert since(1006) == "latest\n"
    assert since(1010) == ""


def test_since_includes_a_line_begun_before_it_whole(tmp_path: Path) -> None:
    logs = LogStore(tmp_path / "logs")
    now = [2000.0]
    with RotatingLog(str(logs.path("s", "s-w-0")), 1 << 20, 3, clock=lambda: now[0]) as log:
        log.write(b"old\nbegun ")
        now[0] = 2003.0
        log.write(b"ended\n")
    position = logs.since_position("s", "s-w-0", 2002)
    assert read_all(logs, "s", "s-w-0", position)[0] == b"begun ended\n"


def test_a_log_without_index_counts_as_written_at_its_mtime(logs: LogStore) -> None:
    # Written before logs had an index: all of it if modified since, else none of it.
    path = logs.path("old", "old-w-0")
    path.write_bytes(b"a\nb\n")
    os.utime(path, (5000, 5000))
    assert logs.since_position("old", "old-w-0", 4000).offset == 0
    assert logs.since_position("old", "old-w-0", 6000).offset == 4


def test_start_position_takes_the_later_of_tail_and_since(tmp_path: Path) -> None:
    logs = LogStore(tmp_path / "logs")
    now = [100.0]
    with RotatingLog(str(logs.path("b", "b-w-0")), 1 << 20, 3, clock=lambda: now[0]) as log:
        log.write(b"1\n2\n3\n")
        now[0] = 200.0
        log.write(b"4\n5\n")

    def start(**bounds: float) -> bytes:
        return read_all(logs, "b", "b-w-0", logs.start_position("b", "b-w-0", **bounds))[0]  # type: ignore[arg-type]

    assert start() == b"1\n2\n3\n4\n5\n"
    assert start(tail=3, since=150) == b"4\n5\n"
    assert start(tail=1, since=150) == b"5\n"


@pytest.mark.parametrize(("env", "field"), [
    ({"PHALANX_LOG_MAX_BYTES": "lots"}, "PHALANX_LOG_MAX_BYTES"),
    ({"PHALANX_LOG_MAX_BYTES": "100"}, "PHALANX_LOG_MAX_BYTES"),
    ({"PHALANX_LOG_KEEP": "-1"}, "PHALANX_LOG_KEEP"),
])
def test_bad_rotation_settings_name_the_variable(env: dict[str, str], field: str) -> None:
    with pytest.raises(SpecError) as info:
        Rotation.from_env(env)
    assert info.value.field == field and info.value.fix


def test_rotation_settings_come_from_the_environment() -> None:
    assert Rotation.from_env({}) == Rotation(64 * 1024 * 1024, 3)
    assert Rotation.from_env({"PHALANX_LOG_MAX_BYTES": "65536", "PHALANX_LOG_KEEP": "0"}) \
        == Rotation(65536, 0)


def test_rotation_waits_for_the_end_of_a_line(tmp_path: Path) -> None:
    """Output arrives in chunks that cut lines anywhere (a busy pipe); every kept file still
    starts with a whole line, so the oldest kept line is never a fragment."""
    path = str(tmp_path / "p.log")
    text = b"".join(b"line %06d %s\n" % (i, b"x" * 40) for i in range(3000))
    with RotatingLog(path, 4096, 50) as log:
        for start in range(0, len(text), 1000):  # 1000-byte chunks: never on a line's end
            log.write(text[start:start + 1000])
    rotated = sorted(tmp_path.glob("p.log.*[0-9]"), key=lambda p: int(p.suffix[1:]))
    files = [Path(path), *rotated]
    assert len(files) > 10
    for file in files:
        data = file.read_bytes()
        assert data.startswith(b"line ") and data.endswith(b"\n"), file.name
        # Past the cap by at most the rest of one line.
        assert len(data) <= 4096 + 60, (file.name, len(data))
    kept = b"".join(f.read_bytes() for f in reversed(files))
    assert kept == text
