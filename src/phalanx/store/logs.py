"""Pod logs on disk: ``<root>/<job>/<pod-name>.log``, kept after the job ends.

A state directory keeps them under ``<home>/logs`` (``LogStore.for_home``). This
module is the one place that knows the layout: state directories written by
earlier versions are read as they are, so it must not change.

A pod's log is capped (``Rotation``): past ``max_bytes`` the current file becomes
``<pod>.log.1`` (the older ones shift to ``.2`` ... ``.<keep>``, the oldest is
dropped) and a new ``<pod>.log`` starts; each file has a time index beside it,
``<file>.idx`` (``logfile.py`` writes both). The local compute plane's pod
supervisor writes the pod's output this way; other compute planes ``append``
what they stream in. Logs written before rotation existed are one file without
an index, and read as they are.

Readers never hold a whole log: they read from a ``LogPosition`` (a file, by its
inode, and an offset in it) up to a limit, and get the position to go on from,
which stays right across rotations. ``tail_position`` and ``since_position`` say
where the last N lines, or the lines written since a time, begin.
"""

from __future__ import annotations

import contextlib
import math
import os
import re
import shutil
import threading
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from phalanx.defaults import PRIVATE_DIR_MODE, make_private_dir
from phalanx.errors import SpecError
from phalanx.store.logfile import RotatingLog, index_path, segment_paths

LOGS_DIR = "logs"  # under the state directory
SUFFIX = ".log"
MAX_BYTES_ENV = "PHALANX_LOG_MAX_BYTES"
KEEP_ENV = "PHALANX_LOG_KEEP"
DEFAULT_MAX_BYTES = 64 * 1024 * 1024
DEFAULT_KEEP = 3
MIN_MAX_BYTES = 4096
# Tail and index lookups read this much at a time.
BLOCK = 64 * 1024
# One path component made of safe characters: no separators, no "." or "..", no hidden files.
_SAFE_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,252}$")
_DIGITS = re.compile(r"(\d+)")


def natural_key(name: str) -> tuple[str | int, ...]:
    """Sort key under which pod-2 comes before pod-10."""
    return tuple(int(part) if i % 2 else part for i, part in enumerate(_DIGITS.split(name)))


def _checked(value: str, field: str) -> str:
    if not isinstance(value, str) or not _SAFE_NAME.match(value):
        raise SpecError(
            f"{value!r} is not a valid {field} name for a log",
            field=field,
            fix="use letters, digits, '.', '_' and '-', starting with a letter or digit",
        )
    return value


@dataclass(frozen=True, slots=True)
class Rotation:
    """How much of a pod's log is kept: ``keep`` full files of ``max_bytes`` and the current
    one, so at most ``(keep + 1) * max_bytes`` bytes (indexes included) per pod."""

    max_bytes: int = DEFAULT_MAX_BYTES
    keep: int = DEFAULT_KEEP

    def __post_init__(self) -> None:
        if self.max_bytes < MIN_MAX_BYTES:
            raise SpecError(f"is {self.max_bytes}", field=MAX_BYTES_ENV,
                            fix=f"use at least {MIN_MAX_BYTES} bytes")
        if self.keep < 0:
            raise SpecError(f"is {self.keep}", field=KEEP_ENV, fix="use 0 or more rotated files")

    @classmethod
    def from_env(cls, environ: Mapping[str, str] = os.environ) -> Rotation:
        """``$PHALANX_LOG_MAX_BYTES`` and ``$PHALANX_LOG_KEEP``, or the defaults."""
        values = {}
        for env, name, default, unit in ((MAX_BYTES_ENV, "max_bytes", DEFAULT_MAX_BYTES, "bytes"),
                                         (KEEP_ENV, "keep", DEFAULT_KEEP, "files")):
            raw = environ.get(env, "").strip()
            try:
                values[name] = int(raw) if raw else default
            except ValueError:
                raise SpecError(f"{raw!r} is not a whole number", field=env,
                                fix=f"set it to a number of {unit} or unset it "
                                    f"(default {default})") from None
        return cls(**values)


@dataclass(frozen=True, slots=True)
class LogPosition:
    """Where a reader is in a pod's log: an offset in the file with inode ``inode``.

    ``inode`` None means the start of the oldest file there is (or will be).
    """

    inode: int | None = None
    offset: int = 0


START = LogPosition()


@dataclass(frozen=True, slots=True)
class _Segment:
    path: Path
    inode: int
    size: int
    mtime: float


class LogStore:
    def __init__(self, root: Path, rotation: Rotation | None = None) -> None:
        self.root = Path(root)
        self.rotation = rotation if rotation is not None else Rotation()
        self._append_lock = threading.Lock()

    @classmethod
    def for_home(cls, home: Path) -> LogStore:
        """The logs of the state directory ``home``, rotated as the environment says."""
        return cls(Path(home) / LOGS_DIR, Rotation.from_env())

    def job_dir(self, job: str) -> Path:
        return self.root / _checked(job, "job")

    def path(self, job: str, pod: str) -> Path:
        """The pod's log file (its directory is created; the file may not exist yet)."""
        directory = self.job_dir(job)
        name = _checked(pod, "pod") + SUFFIX
        # Owner-only: a job's logs are for the control plane to serve, not for other pods.
        make_private_dir(self.root)
        directory.mkdir(mode=PRIVATE_DIR_MODE, exist_ok=True)
        return directory / name

    def pods(self, job: str) -> list[str]:
        """Names of the pods with a log, in natural order."""
        directory = self.job_dir(job)
        try:
            names = [
                entry.name.removesuffix(SUFFIX)
                for entry in os.scandir(directory)
                if entry.name.endswith(SUFFIX) and entry.is_file()
            ]
        except FileNotFoundError:
            return []
        return sorted(names, key=natural_key)

    def append(self, job: str, pod: str, data: bytes) -> None:
        """Append to the pod's log, rotating and indexing it as its supervisor would."""
        path = str(self.path(job, pod))
        # One writer at a time: a rotation must not move a file another append writes.
        with self._append_lock, RotatingLog(
            path, self.rotation.max_bytes, self.rotation.keep
        ) as log:
            log.write(data)

    # ------------------------------------------------------------------ reading
    def _segments(self, job: str, pod: str) -> list[_Segment]:
        """The pod's files that exist, oldest first."""
        current = self.job_dir(job) / (_checked(pod, "pod") + SUFFIX)
        found = []
        # Rotated files beyond ``keep`` may remain from a larger setting: read them too.
        for path in reversed(segment_paths(str(current), max(self.rotation.keep, DEFAULT_KEEP))):
            try:
                stat = os.stat(path)
            except FileNotFoundError:
                continue
            found.append(_Segment(Path(path), stat.st_ino, stat.st_size, stat.st_mtime))
        return found

    def read_from(
        self, job: str, pod: str, position: LogPosition, limit: int
    ) -> tuple[bytes, LogPosition]:
        """Up to ``limit`` bytes from ``position`` on, and the position after them.

        Goes on into newer files when one is read to its end. A file rotated away (and
        dropped) before it was read is skipped: reading resumes at the oldest file left.
        """
        if limit <= 0:
            raise SpecError(f"is {limit}", field="limit", fix="use 1 or more")
        for _ in range(5):  # a rotation between listing and opening: list again
            segments = self._segments(job, pod)
            if not segments:
                return b"", position
            inodes = [s.inode for s in segments]
            if position.inode in inodes:
                i, offset = inodes.index(position.inode), position.offset
            else:
                i, offset = 0, position.offset if position.inode is None else 0
            while True:
                segment = segments[i]
                try:
                    with open(segment.path, "rb") as file:
                        stat = os.fstat(file.fileno())
                        if stat.st_ino != segment.inode:
                            break  # rotated meanwhile
                        if offset > stat.st_size:  # truncated: start it again
                            offset = 0
                        file.seek(offset)
                        data = file.read(limit)
                except FileNotFoundError:
                    break
                if data or i == len(segments) - 1:
                    return data, LogPosition(segment.inode, offset + len(data))
                i, offset = i + 1, 0
        return b"", position

    def start_position(
        self, job: str, pod: str, *, tail: int | None = None, since: float | None = None
    ) -> LogPosition:
        """Where reading starts to give the last ``tail`` lines written at or after ``since``
        (either may be None: no such bound)."""
        candidates = [START]
        if tail is not None:
            candidates.append(self.tail_position(job, pod, tail))
        if since is not None:
            candidates.append(self.since_position(job, pod, since))
        order = {s.inode: i for i, s in enumerate(self._segments(job, pod))}
        return max(candidates, key=lambda p: (
            -1 if p.inode is None else order.get(p.inode, -1), p.offset))

    def end_position(self, job: str, pod: str) -> LogPosition:
        """After everything written so far."""
        segments = self._segments(job, pod)
        if not segments:
            return START
        return LogPosition(segments[-1].inode, segments[-1].size)

    def tail_position(self, job: str, pod: str, lines: int) -> LogPosition:
        """Where the last ``lines`` lines begin (a last line without newline counts as one).

        Reads backwards in blocks from the end, never more than those lines (and a block).
        """
        if lines < 0:
            raise SpecError(f"is {lines}", field="tail", fix="use 0 or more lines")
        segments = self._segments(job, pod)
        if lines == 0:
            return self.end_position(job, pod)
        wanted = lines
        at_end = True  # the log's last byte: a newline there ends the last line, not another
        for segment in reversed(segments):
            try:
                file = open(segment.path, "rb")  # noqa: SIM115 - closed below
            except FileNotFoundError:
                continue
            with file:
                end = segment.size
                while end > 0:
                    start = max(0, end - BLOCK)
                    file.seek(start)
                    block = file.read(end - start)
                    stop = len(block)
                    if at_end and block:
                        at_end = False
                        if block.endswith(b"\n"):
                            stop -= 1
                    while (newline := block.rfind(b"\n", 0, stop)) >= 0:
                        wanted -= 1
                        if wanted == 0:
                            return LogPosition(segment.inode, start + newline + 1)
                        stop = newline
                    end = start
        return START

    def since_position(self, job: str, pod: str, since: float) -> LogPosition:
        """Where the lines written at or after ``since`` (epoch seconds) begin.

        Exact to the second: lines written earlier in the second of ``since`` are included,
        and a line is included whole if any of it was written then or later. A file
        written before logs had an index is included whole if it was modified since.
        """
        second = math.floor(since)
        for segment in self._segments(job, pod):
            if segment.mtime < second:
                continue  # last written before then
            offset = _indexed_offset(index_path(str(segment.path)), second)
            if offset is None:
                continue  # the index says nothing was written since
            return LogPosition(segment.inode, _line_start(segment.path, offset))
        return self.end_position(job, pod)

    def read(
        self, job: str, pod: str, offset: int = 0, limit: int | None = None
    ) -> tuple[bytes, int]:
        """Bytes from ``offset`` (up to ``limit``) and the offset to read from next."""
        if offset < 0:
            raise SpecError(f"is {offset}", field="offset", fix="use 0 or more")
        if limit is not None and limit < 0:
            raise SpecError(f"is {limit}", field="limit", fix="use 0 or more")
        path = self.job_dir(job) / (_checked(pod, "pod") + SUFFIX)
        try:
            with open(path, "rb") as file:
                file.seek(offset)
                data = file.read() if limit is None else file.read(limit)
        except FileNotFoundError:
            return b"", offset
        return data, offset + len(data)

    def delete(self, job: str) -> None:
        """Remove every log of the job (nothing happens if it has none)."""
        with contextlib.suppress(FileNotFoundError):
            shutil.rmtree(self.job_dir(job))


def _indexed_offset(index: str, second: int) -> int | None:
    """The offset of the first write at or after ``second``: 0 when there is no index, None
    when the index has no write that late."""
    try:
        file = open(index, "rb")  # noqa: SIM115 - closed below
    except FileNotFoundError:
        return 0
    with file:
        rest = b""
        seen = False
        while block := file.read(BLOCK):
            lines = (rest + block).split(b"\n")
            rest = lines.pop()
            for line in lines:
                fields = line.split()
                if len(fields) != 2:
                    continue
                seen = True
                if int(fields[0]) >= second:
                    return int(fields[1])
    return None if seen else 0


def _line_start(path: Path, offset: int) -> int:
    """The start of the line holding ``offset`` (a write may begin mid-line)."""
    with open(path, "rb") as file:
        end = offset
        while end > 0:
            start = max(0, end - BLOCK)
            file.seek(start)
            newline = file.read(end - start).rfind(b"\n")
            if newline >= 0:
                return start + newline + 1
            end = start
    return 0
