"""Handing whole CPUs to pinned pods: NUMA nodes from sysfs, best fit, no sharing."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from phalanx.compute.local.cpus import (
    CPUsUnavailable,
    assign_cpus,
    describe,
    numa_topology,
    parse_cpu_list,
)
from phalanx.errors import SpecError
from phalanx.spec import JobSpec
from phalanx.spec.base import validate

TWO_NODES = {0: [0, 1, 2, 3], 1: [4, 5, 6, 7]}


def test_cpu_lists_read_as_the_kernel_writes_them() -> None:
    assert parse_cpu_list("0-3,8,10-11\n") == [0, 1, 2, 3, 8, 10, 11]
    assert parse_cpu_list("5") == [5]


def test_topology_from_sysfs_keeps_only_cpus_this_process_may_use(tmp_path: Path) -> None:
    usable = sorted(os.sched_getaffinity(0))
    half = len(usable) // 2 or 1
    for node, cpus in ((0, usable[:half]), (1, usable[half:])):
        (tmp_path / f"node{node}").mkdir()
        (tmp_path / f"node{node}" / "cpulist").write_text(",".join(map(str, cpus)) + "\n")
    (tmp_path / "node2").mkdir()  # a memory-only node: no CPUs
    (tmp_path / "node2" / "cpulist").write_text("\n")
    topology = numa_topology(tmp_path)
    assert topology == {n: c for n, c in ((0, usable[:half]), (1, usable[half:])) if c}
    # No sysfs: every usable CPU, as one node.
    assert numa_topology(tmp_path / "missing") == {0: usable}


def test_a_pod_gets_cpus_of_one_numa_node_when_they_fit() -> None:
    # Best fit: the 2-CPU pod takes node 1, which has 2 free, keeping node 0's 3 whole.
    assert assign_cpus([2], TWO_NODES, held={0, 4, 5}) == [(6, 7)]
    assert assign_cpus([3, 2], TWO_NODES, held={0, 4, 5}) == [(1, 2, 3), (6, 7)]
    # Four fit node 0 exactly; the next pod starts node 1.
    assert assign_cpus([4, 1], TWO_NODES, held=()) == [(0, 1, 2, 3), (4,)]


def test_a_pod_larger_than_any_free_node_spans_nodes_and_none_share() -> None:
    got = assign_cpus([5, 0, 2], TWO_NODES, held={7})
    assert got[1] == ()  # not pinned
    assert len(got[0]) == 5 and len(got[2]) == 2
    assert not set(got[0]) & set(got[2]) and 7 not in set(got[0]) | set(got[2])
    assert describe(got[0], TWO_NODES).endswith("(NUMA nodes 0, 1)")
    assert describe((4,), TWO_NODES) == "CPU 4 (NUMA node 1)"


def test_more_than_are_free_is_refused_whole() -> None:
    with pytest.raises(CPUsUnavailable) as refused:
        assign_cpus([4, 4], TWO_NODES, held={3})
    assert "need 8 whole CPU(s) but 7 of 8 are free" in refused.value.message


@pytest.mark.parametrize("cpu", [None, "500m", "1.5"])
def test_exclusive_pinning_needs_a_whole_number_of_cpus(cpu: str | None) -> None:
    resources = {} if cpu is None else {"cpu": cpu}
    with pytest.raises(SpecError) as refused:
        validate(JobSpec, {"name": "p", "podSets": [
            {"command": ["x"], "resources": resources, "cpuPinning": "exclusive"}]})
    assert refused.value.field == "podSets[0].cpuPinning"
    assert "integer cpu" in (refused.value.fix or "")
