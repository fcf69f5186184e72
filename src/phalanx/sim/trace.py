"""Job traces for the simulator: the Philly trace and a generic CSV.

Two formats, told apart by their header:

* **Philly** (``timestamp,duration,num_gpus,gpu_time,cluster``): Microsoft's
  Philly trace in per-job form. ``timestamp`` is the submission time
  (``YYYY-MM-DD HH:MM:SS``, UTC), ``duration`` the run time in seconds,
  ``num_gpus`` the job's GPUs, ``gpu_time`` their product (checked), ``cluster``
  the virtual cluster, i.e. the team.
* **Generic** (``submit,duration,gpus,team`` plus optional ``name``,
  ``priority`` and ``checkpoint_every``): ``submit`` in seconds from any origin
  (a number) or an ISO 8601 timestamp, ``duration`` in seconds, ``gpus`` a whole
  number >= 1, ``team`` the LocalQueue the job is submitted to, ``priority`` an integer or a
  PriorityClass name, ``name`` a job name (default ``job-<row>``),
  ``checkpoint_every`` the seconds between the job's checkpoints (empty: the
  simulation's own setting; 0: it keeps all its progress).

Submission times are shifted so the earliest job arrives at 0. Jobs come back
sorted by (submission, row), so a trace file in any order replays the same way.
Every bad value raises a SpecError naming the file, row (the line number, the
header being line 1) and column.
"""

from __future__ import annotations

import csv
import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from enum import StrEnum
from pathlib import Path

from phalanx.errors import SpecError
from phalanx.spec.base import check_name

PHILLY_COLUMNS = ("timestamp", "duration", "num_gpus", "gpu_time", "cluster")
GENERIC_COLUMNS = ("submit", "duration", "gpus", "team")
GENERIC_OPTIONAL = ("name", "priority", "checkpoint_every")


class TraceFormat(StrEnum):
    AUTO = "auto"
    PHILLY = "philly"
    GENERIC = "generic"


@dataclass(frozen=True, slots=True)
class TraceJob:
    """One job of a trace: when it arrives, how long it runs, what it needs, whose it is."""

    name: str
    submit: float  # seconds since the trace's first submission
    duration: float  # seconds of run time once admitted
    gpus: int
    team: str  # the LocalQueue it is submitted to
    priority: str | int = "default"
    row: int = 0  # line in the source file, for messages
    checkpoint_every: float | None = None  # seconds between checkpoints; None: the run's

    @property
    def gpu_seconds(self) -> float:
        return self.duration * self.gpus


def read_trace(path: str | Path, fmt: TraceFormat | str = TraceFormat.AUTO) -> list[TraceJob]:
    """Read a trace file; ``fmt`` auto-detects Philly or generic from the header."""
    source = str(path)
    try:
        chosen = TraceFormat(fmt)
    except ValueError:
        raise SpecError(f"unknown trace format {fmt!r}", field="--format",
                        fix=f"use one of {', '.join(f.value for f in TraceFormat)}") from None
    try:
        with Path(path).expanduser().open(newline="") as handle:
            return parse_trace(handle, source, chosen)
    except FileNotFoundError:
        raise SpecError("no such file", field=source, fix="check the trace path") from None
    except IsADirectoryError:
        raise SpecError("is a directory", field=source, fix="name a CSV file") from None
    except UnicodeDecodeError:
        raise SpecError("is not a text file", field=source, fix="name a CSV file") from None


def parse_trace(lines: Iterable[str], source: str = "trace",
                fmt: TraceFormat = TraceFormat.AUTO) -> list[TraceJob]:
    reader = csv.reader(lines)
    header = next(reader, None)
    if header is None:
        raise SpecError("is empty", field=source,
                        fix="write a header line and one row per job")
    header = [h.strip() for h in header]
    if fmt is TraceFormat.AUTO:
        fmt = _detect(header, source)
    if fmt is TraceFormat.PHILLY:
        jobs = _philly(reader, header, source)
    else:
        jobs = _generic(reader, header, source)
    if not jobs:
        raise SpecError("has a header but no jobs", field=source, fix="add one row per job")
    origin = min(j.submit for j in jobs)
    jobs = [_shift(j, origin) for j in jobs]
    jobs.sort(key=lambda j: (j.submit, j.row))
    return jobs


def _shift(job: TraceJob, origin: float) -> TraceJob:
    return TraceJob(job.name, job.submit - origin, job.duration, job.gpus, job.team,
                    job.priority, job.row, job.checkpoint_every)


def _detect(header: Sequence[str], source: str) -> TraceFormat:
    if set(PHILLY_COLUMNS) <= set(header):
        return TraceFormat.PHILLY
    if set(GENERIC_COLUMNS) <= set(header):
        return TraceFormat.GENERIC
    raise SpecError(
        f"header {','.join(header)!r} is neither a Philly trace nor a generic trace",
        field=f"{source} row 1",
        fix=f"use the columns {','.join(GENERIC_COLUMNS)} (optional: "
            f"{','.join(GENERIC_OPTIONAL)}) or Philly's {','.join(PHILLY_COLUMNS)}",
    )


def _columns(header: Sequence[str], required: Sequence[str], optional: Sequence[str],
             source: str) -> dict[str, int]:
    where = f"{source} row 1"
    index: dict[str, int] = {}
    for i, name in enumerate(header):
        if name in index:
            raise SpecError(f"column {name!r} appears twice", field=where,
                            fix="name each column once")
        index[name] = i
    missing = [c for c in required if c not in index]
    if missing:
        raise SpecError(f"lacks the column{'s' if len(missing) > 1 else ''} "
                        f"{', '.join(missing)}", field=where,
                        fix=f"the header must name {','.join(required)}")
    unknown = [c for c in header if c not in required and c not in optional]
    if unknown:
        raise SpecError(f"has unknown column {unknown[0]!r}", field=where,
                        fix=f"use only {', '.join([*required, *optional])}")
    return index


class _Row:
    """One CSV row with the column look-ups and the error messages that name it."""

    def __init__(self, cells: list[str], line: int, index: dict[str, int], source: str) -> None:
        self.cells = cells
        self.line = line
        self.index = index
        self.source = source
        if len(cells) != len(index):
            raise SpecError(f"has {len(cells)} fields, the header {len(index)}",
                            field=f"{source} row {line}",
                            fix="give every row one value per header column")

    def fail(self, column: str, message: str, fix: str) -> SpecError:
        return SpecError(message, field=f"{self.source} row {self.line}, column {column}",
                         fix=fix)

    def raw(self, column: str) -> str:
        value = self.cells[self.index[column]].strip()
        if not value:
            raise self.fail(column, "is empty", f"give every job a {column}")
        return value

    def seconds(self, column: str, *, positive: bool) -> float:
        value = self.raw(column)
        try:
            number = float(value)
        except ValueError:
            raise self.fail(column, f"{value!r} is not a number",
                            "write seconds as a number, e.g. 3600") from None
        if not math.isfinite(number) or number < 0 or (positive and number == 0):
            bound = "above 0" if positive else "0 or more"
            raise self.fail(column, f"{value!r} is out of range", f"use a number {bound}")
        return number

    def gpus(self, column: str) -> int:
        value = self.raw(column)
        try:
            number = int(value)
        except ValueError:
            raise self.fail(column, f"{value!r} is not a whole number",
                            "write the job's GPU count, e.g. 8") from None
        if number < 1:
            raise self.fail(column, f"{value!r} is below 1", "a job needs at least one GPU")
        return number

    def name(self, column: str) -> str:
        value = self.raw(column)
        try:
            return check_name(value, column)
        except ValueError as exc:
            raise self.fail(column, str(exc).split("; ")[0],
                            "use lowercase letters, digits and '-' (at most 63)") from None


def _philly(reader: Iterable[list[str]], header: list[str], source: str) -> list[TraceJob]:
    index = _columns(header, PHILLY_COLUMNS, (), source)
    jobs: list[TraceJob] = []
    parse = datetime.strptime
    for line, cells in enumerate(reader, start=2):
        if not cells:
            continue
        row = _Row(cells, line, index, source)
        stamp = row.raw("timestamp")
        try:
            submit = parse(stamp, "%Y-%m-%d %H:%M:%S").replace(tzinfo=UTC).timestamp()
        except ValueError:
            raise row.fail("timestamp", f"{stamp!r} is not a timestamp",
                           "write it as YYYY-MM-DD HH:MM:SS") from None
        duration = row.seconds("duration", positive=True)
        gpus = row.gpus("num_gpus")
        gpu_time = row.seconds("gpu_time", positive=True)
        if abs(gpu_time - duration * gpus) > 1e-6 * max(1.0, gpu_time):
            raise row.fail("gpu_time", f"{gpu_time:g} is not duration x num_gpus "
                           f"({duration:g} x {gpus})", "fix the row; gpu_time must be their "
                           "product")
        team = row.name("cluster")
        jobs.append(TraceJob(f"job-{line}", submit, duration, gpus, team, "default", line))
    return jobs


def _generic(reader: Iterable[list[str]], header: list[str], source: str) -> list[TraceJob]:
    index = _columns(header, GENERIC_COLUMNS, GENERIC_OPTIONAL, source)
    jobs: list[TraceJob] = []
    names: dict[str, int] = {}
    stamps: bool | None = None  # whether ``submit`` holds timestamps (decided by row 2)
    for line, cells in enumerate(reader, start=2):
        if not cells:
            continue
        row = _Row(cells, line, index, source)
        value = row.raw("submit")
        is_stamp = not _is_number(value)
        if stamps is None:
            stamps = is_stamp
        elif stamps != is_stamp:
            raise row.fail("submit", f"{value!r} mixes timestamps and seconds",
                           "write every submit time the same way")
        if is_stamp:
            try:
                moment = datetime.fromisoformat(value)
            except ValueError:
                raise row.fail("submit", f"{value!r} is neither seconds nor an ISO timestamp",
                               "write seconds (e.g. 120) or e.g. 2024-01-31T09:00:00") from None
            if moment.tzinfo is None:
                moment = moment.replace(tzinfo=UTC)
            submit = moment.timestamp()
        else:
            submit = row.seconds("submit", positive=False)
        duration = row.seconds("duration", positive=True)
        gpus = row.gpus("gpus")
        team = row.name("team")
        name = row.name("name") if "name" in index else f"job-{line}"
        if name in names:
            raise row.fail("name", f"{name!r} is also the name on row {names[name]}",
                           "give every job its own name")
        names[name] = line
        priority: str | int = "default"
        if "priority" in index:
            text = row.raw("priority")
            priority = int(text) if _is_int(text) else text
        every: float | None = None
        if "checkpoint_every" in index and row.cells[index["checkpoint_every"]].strip():
            every = row.seconds("checkpoint_every", positive=False)
        jobs.append(TraceJob(name, submit, duration, gpus, team, priority, line, every))
    return jobs


def _is_number(text: str) -> bool:
    try:
        float(text)
    except ValueError:
        return False
    return True


def _is_int(text: str) -> bool:
    return text.lstrip("+-").isdigit()
