"""Pod logs on disk: ``<root>/<job>/<pod-name>.log``, kept after the job ends.

A state directory keeps them under ``<home>/logs`` (``LogStore.for_home``). This
module is the one place that knows the layout: state directories written by
earlier versions are read as they are, so it must not change.

The local compute plane points its processes' stdout/stderr straight at
``path(job, pod)``; other compute planes append what they stream in. Readers
poll with byte offsets, so following a log is a loop of ``read`` calls.
"""

from __future__ import annotations

import contextlib
import os
import re
import shutil
from pathlib import Path

from phalanx.defaults import PRIVATE_DIR_MODE, make_private_dir, open_private
from phalanx.errors import SpecError

LOGS_DIR = "logs"  # under the state directory
SUFFIX = ".log"
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


class LogStore:
    def __init__(self, root: Path) -> None:
        self.root = Path(root)

    @classmethod
    def for_home(cls, home: Path) -> LogStore:
        """The logs of the state directory ``home``."""
        return cls(Path(home) / LOGS_DIR)

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
        # O_APPEND keeps concurrent writers' chunks whole and in order of arrival.
        with os.fdopen(open_private(self.path(job, pod), os.O_WRONLY | os.O_APPEND), "ab") as file:
            file.write(data)

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
