"""Trace readers: Philly's per-job CSV and the generic CSV, and what bad input says."""

from __future__ import annotations

import itertools
from pathlib import Path

import pytest

from phalanx.errors import SpecError
from phalanx.sim import TraceFormat, parse_nodes, parse_trace, read_trace

SHARED_TRACE = Path(__file__).resolve().parents[3] / "shared" / "traces" / "philly.csv"

# The first lines of the shared trace (its rows are not in time order).
PHILLY = """timestamp,duration,num_gpus,gpu_time,cluster
2017-10-09 07:01:55,66.0,1,66.0,11cb48
2017-10-09 06:13:03,2951.0,1,2951.0,6214e9
2017-09-29 07:58:32,860662.0,1,860662.0,6c71a0
2017-10-09 06:13:36,2759.0,8,22072.0,6214e9
"""


def parse(text: str, fmt: TraceFormat = TraceFormat.AUTO) -> list:
    return parse_trace(text.splitlines(keepends=True), "t.csv", fmt)


def test_philly_rows_sorted_and_shifted_to_zero() -> None:
    jobs = parse(PHILLY)
    # 2017-09-29 07:58:32 is the origin; 2017-10-09 06:13:03 is 9 d 22 h 14 min 31 s later.
    assert [(j.name, j.submit, j.duration, j.gpus, j.team) for j in jobs] == [
        ("job-4", 0.0, 860662.0, 1, "6c71a0"),
        ("job-3", 9 * 86400 + 22 * 3600 + 14 * 60 + 31, 2951.0, 1, "6214e9"),
        ("job-5", 9 * 86400 + 22 * 3600 + 15 * 60 + 4, 2759.0, 8, "6214e9"),
        ("job-2", 9 * 86400 + 23 * 3600 + 3 * 60 + 23, 66.0, 1, "11cb48"),
    ]
    assert jobs[2].gpu_seconds == 22072.0
    assert parse(PHILLY, TraceFormat.PHILLY) == jobs


def test_generic_seconds_names_and_priorities() -> None:
    jobs = parse("submit,duration,gpus,team,name,priority\n"
                 "100,60,2,team-a,first,high\n"
                 "40,30.5,1,team-b,second,7\n")
    assert [(j.name, j.submit, j.duration, j.gpus, j.team, j.priority, j.row) for j in jobs] == [
        ("second", 0.0, 30.5, 1, "team-b", 7, 3),
        ("first", 60.0, 60.0, 2, "team-a", "high", 2),
    ]


def test_generic_iso_timestamps_and_default_names() -> None:
    jobs = parse("team,gpus,duration,submit\n"
                 "team-a,1,10,2024-01-31T09:00:00\n"
                 "team-a,4,20,2024-01-31T10:00:00+01:00\n"
                 "team-a,8,5,2024-01-31T09:30:00Z\n")
    # 10:00+01:00 is 09:00 UTC, the same instant as the naive (UTC) first row.
    assert [(j.name, j.submit, j.gpus) for j in jobs] == [
        ("job-2", 0.0, 1), ("job-3", 0.0, 4), ("job-4", 1800.0, 8)]


@pytest.mark.parametrize(("text", "field", "words"), [
    ("a,b\n1,2\n", "t.csv row 1", "neither a Philly trace"),
    ("", "t.csv", "is empty"),
    ("submit,duration,gpus,team\n", "t.csv", "no jobs"),
    ("submit,duration,gpus,team,colour\n0,1,1,a,red\n", "t.csv row 1", "unknown column"),
    ("submit,duration,gpus,team,team\n0,1,1,a,a\n", "t.csv row 1", "appears twice"),
    ("submit,duration,gpus,team\n0,1,1,a\n0,1,1\n", "t.csv row 3", "3 fields"),
    ("submit,duration,gpus,team\n0,-5,1,a\n", "t.csv row 2, column duration", "out of range"),
    ("submit,duration,gpus,team\n0,0,1,a\n", "t.csv row 2, column duration", "out of range"),
    ("submit,duration,gpus,team\n0,ten,1,a\n", "t.csv row 2, column duration", "not a number"),
    ("submit,duration,gpus,team\n0,5,0,a\n", "t.csv row 2, column gpus", "below 1"),
    ("submit,duration,gpus,team\n0,5,1.5,a\n", "t.csv row 2, column gpus", "whole number"),
    ("submit,duration,gpus,team\n0,5,1,Team A\n", "t.csv row 2, column team", ""),
    ("submit,duration,gpus,team\n0,5,1,\n", "t.csv row 2, column team", "is empty"),
    ("submit,duration,gpus,team\n0,5,1,a\nmonday,5,1,a\n", "t.csv row 3, column submit",
     "mixes"),
    ("submit,duration,gpus,team\nmonday,5,1,a\n", "t.csv row 2, column submit",
     "neither seconds nor"),
    ("submit,duration,gpus,team,name\n0,5,1,a,x\n1,5,1,a,x\n", "t.csv row 3, column name",
     "row 2"),
    ("timestamp,duration,num_gpus,gpu_time,cluster\n2017-10-09,6,1,6,a\n",
     "t.csv row 2, column timestamp", "not a timestamp"),
    ("timestamp,duration,num_gpus,gpu_time,cluster\n2017-10-09 07:01:55,6,2,6,a\n",
     "t.csv row 2, column gpu_time", "not duration x num_gpus"),
])
def test_bad_input_names_row_and_column(text: str, field: str, words: str) -> None:
    with pytest.raises(SpecError) as err:
        parse(text)
    assert err.value.field == field
    assert words in err.value.message
    assert err.value.fix


def test_read_trace_file_errors(tmp_path: Path) -> None:
    with pytest.raises(SpecError, match="no such file"):
        read_trace(tmp_path / "missing.csv")
    with pytest.raises(SpecError, match="directory"):
        read_trace(tmp_path)
    (tmp_path / "bin.csv").write_bytes(b"\xff\xfe\x00\x81")
    with pytest.raises(SpecError, match="not a text file"):
        read_trace(tmp_path / "bin.csv")
    with pytest.raises(SpecError) as err:
        read_trace(tmp_path / "missing.csv", "parquet")
    assert err.value.field == "--format"


@pytest.mark.skipif(not SHARED_TRACE.exists(), reason="the shared Philly trace is not here")
def test_the_whole_philly_trace_reads() -> None:
    jobs = read_trace(SHARED_TRACE)
    assert len(jobs) == 82_247
    assert len({j.team for j in jobs}) == 15
    assert jobs[0].submit == 0 and all(a.submit <= b.submit for a, b in itertools.pairwise(jobs))
    assert sum(j.gpus == 1 for j in jobs) == 76_627


def test_nodes_file_counts_and_racks() -> None:
    nodes = parse_nodes("- {name: gpu, count: 3, rackSize: 2, allocatable: {nvidia.com/gpu: 8}}\n"
                        "- {name: big, allocatable: {nvidia.com/gpu: 16}, labels: {rack: r9}}\n")
    assert [(n.name, n.labels.get("rack")) for n in nodes] == [
        ("gpu-0", "gpu-rack-0"), ("gpu-1", "gpu-rack-0"), ("gpu-2", "gpu-rack-1"),
        ("big", "r9")]
    for text, field in [
        ("- {name: gpu, count: 0, allocatable: {nvidia.com/gpu: 8}}", "nodes[0].count"),
        ("- {name: gpu, rackSize: 2, allocatable: {nvidia.com/gpu: 8}}", "nodes[0].rackSize"),
        ("- [1, 2]", "nodes[0]"),
        ("- {name: a, allocatable: {nvidia.com/gpu: 8}}\n- {name: a, allocatable: {}}", "nodes"),
        ("[", "nodes"),
    ]:
        with pytest.raises(SpecError) as err:
            parse_nodes(text)
        assert err.value.field == field, text
