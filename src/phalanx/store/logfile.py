"""Writing one pod's log under a size cap: rotation and the time index.

Standard library only, and importing nothing of Phalanx: the local plane's pod
supervisor (``compute/local/shim.py``), which must start in milliseconds, loads
this file by its path; ``LogStore.append`` uses it for the other planes. So every
writer rotates and indexes the same way.

Files of a pod, newest first: ``<pod>.log`` (written now), ``<pod>.log.1``, ...,
``<pod>.log.<keep>``. When a write would take the current file and its index past
``max_bytes``, the files shift by one (the oldest is dropped) and a new current
file starts. Each file has an index, ``<file>.idx``: a text line ``<second>
<offset>`` for the first write of every wall-clock second (epoch seconds), at the
offset that write starts at. Reading ``since`` a time finds the first line of
that second through it, so it is exact to the second.
"""

from __future__ import annotations

import contextlib
import itertools
import os
import time
from collections.abc import Callable

INDEX_SUFFIX = ".idx"
# Logs are the control plane's, owner-only like the rest of its state directory.
PRIVATE_FILE_MODE = 0o600


def segment_paths(current: str, keep: int) -> list[str]:
    """The pod's files, newest first: the current one, then ``.1`` to ``.<keep>``."""
    return [current] + [f"{current}.{i}" for i in range(1, keep + 1)]


def index_path(segment: str) -> str:
    return segment + INDEX_SUFFIX


def rotate_files(current: str, keep: int) -> None:
    """Shift ``current`` to ``.1``, ``.1`` to ``.2``, ...; the file at ``.<keep>`` is dropped."""
    paths = segment_paths(current, keep)
    if keep == 0:
        for path in (current, index_path(current)):
            with contextlib.suppress(FileNotFoundError):
                os.unlink(path)
        return
    for newer, older in reversed(list(itertools.pairwise(paths))):
        for source, target in ((newer, older), (index_path(newer), index_path(older))):
            try:
                os.replace(source, target)
            except FileNotFoundError:
                # Nothing newer to move here: what is there is older still, and goes too.
                with contextlib.suppress(FileNotFoundError):
                    os.unlink(target)


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view):]


def last_indexed_second(index: str) -> int | None:
    """The second of an index's last entry, if it has one."""
    try:
        with open(index, "rb") as file:
            size = file.seek(0, os.SEEK_END)
            file.seek(max(0, size - 64))
            lines = file.read().splitlines()
    except OSError:
        return None
    for line in reversed(lines):
        with contextlib.suppress(ValueError, IndexError):
            return int(line.split()[0])
    return None


class RotatingLog:
    """Appends to a pod's current log file, rotating it past ``max_bytes`` and indexing it.

    One writer per pod at a time (the pod's supervisor, or LogStore under its lock).
    """

    def __init__(
        self, path: str, max_bytes: int, keep: int, clock: Callable[[], float] = time.time
    ) -> None:
        self.path = path
        self.max_bytes = max_bytes
        self.keep = keep
        self.clock = clock
        self._fd = -1
        self._index_fd = -1
        self.size = 0
        self._index_size = 0
        self._second: int | None = None
        self._open()

    def _open(self) -> None:
        flags = os.O_WRONLY | os.O_APPEND | os.O_CREAT
        self._fd = os.open(self.path, flags, PRIVATE_FILE_MODE)
        self._index_fd = os.open(index_path(self.path), flags, PRIVATE_FILE_MODE)
        self.size = os.fstat(self._fd).st_size
        self._index_size = os.fstat(self._index_fd).st_size
        self._second = last_indexed_second(index_path(self.path)) if self._index_size else None
        self._ends_line = self.last_byte() in (b"", b"\n")

    def last_byte(self) -> bytes:
        """The current file's last byte (b"" when it is empty)."""
        if not self.size:
            return b""
        with open(self.path, "rb") as file:
            file.seek(self.size - 1)
            return file.read(1)

    def write(self, data: bytes) -> None:
        if not data:
            return
        if self.size and self.size + self._index_size + len(data) > self.max_bytes:
            # Rotate at a line's end, so every file starts with a whole line: output comes
            # in chunks that need not end with one. The current file takes the rest of its
            # line first (past the cap by at most that), unless the line runs on past
            # twice the cap.
            if not self._ends_line:
                end = data.find(b"\n") + 1
                if end == 0 and self.size + len(data) <= 2 * self.max_bytes:
                    self._append(data)
                    return
                if end:
                    self._append(data[:end])
                    data = data[end:]
                    if not data:
                        return
            self._close()
            rotate_files(self.path, self.keep)
            self._open()
        self._append(data)

    def _append(self, data: bytes) -> None:
        second = int(self.clock())
        if second != self._second:
            # The entry goes first, so a reader never sees data its index does not cover.
            entry = f"{second} {self.size}\n".encode()
            _write_all(self._index_fd, entry)
            self._index_size += len(entry)
            self._second = second
        _write_all(self._fd, data)
        self.size += len(data)
        self._ends_line = data.endswith(b"\n")

    def _close(self) -> None:
        for fd in (self._fd, self._index_fd):
            if fd >= 0:
                os.close(fd)
        self._fd = self._index_fd = -1

    def close(self) -> None:
        self._close()

    def __enter__(self) -> RotatingLog:
        return self

    def __exit__(self, *_: object) -> None:
        self.close()
