"""This machine's CPUs by NUMA node, and handing whole CPUs out to pinned pods.

A pod set with ``cpuPinning: exclusive`` gets, for each pod, as many CPUs as its
cpu request, none shared with another pinned pod, from one NUMA node when they fit
in one (the node with the fewest free CPUs that still fits them, so the larger free
nodes stay whole for larger pods). Its supervisor sets the affinity
(``sched_setaffinity``) before starting the command, which inherits it.

Only the CPUs this process may run on (its own affinity) are handed out, so a
control plane confined to some CPUs (a container's cpuset) pins pods inside them.
Pods without pinning are not confined: they share every CPU, pinned ones included,
as they did before any pod was pinned.
"""

from __future__ import annotations

import os
from collections.abc import Collection, Mapping, Sequence
from pathlib import Path

from phalanx.errors import PhalanxError

NODES_DIR = Path("/sys/devices/system/node")


def parse_cpu_list(text: str) -> list[int]:
    """The CPUs of a kernel CPU list such as ``0-3,8,10-11``."""
    cpus: list[int] = []
    for part in text.strip().split(","):
        if not part:
            continue
        first, _, last = part.partition("-")
        cpus.extend(range(int(first), int(last or first) + 1))
    return cpus


def usable() -> set[int]:
    try:
        return set(os.sched_getaffinity(0))
    except AttributeError:  # not on Linux: every CPU the OS counts
        return set(range(os.cpu_count() or 1))


def numa_topology(nodes_dir: Path = NODES_DIR) -> dict[int, list[int]]:
    """NUMA node -> the CPUs of it this process may use; one node 0 where sysfs has none."""
    allowed = usable()
    topology: dict[int, list[int]] = {}
    try:
        entries = sorted(nodes_dir.glob("node[0-9]*"), key=lambda p: int(p.name[4:]))
    except OSError:
        entries = []
    for entry in entries:
        try:
            cpus = [c for c in parse_cpu_list((entry / "cpulist").read_text()) if c in allowed]
        except (OSError, ValueError):
            continue
        if cpus:
            topology[int(entry.name[4:])] = cpus
    covered = {c for cpus in topology.values() for c in cpus}
    if not topology or covered != allowed:  # no sysfs, or CPUs it does not place: one node
        return {0: sorted(allowed)}
    return topology


class CPUsUnavailable(PhalanxError):
    """Pinned pods asked for more whole CPUs than are free on this machine right now."""

    status_code = 409


def assign_cpus(
    wanted: Sequence[int], topology: Mapping[int, Sequence[int]], held: Collection[int],
) -> list[tuple[int, ...]]:
    """Whole CPUs for pods wanting ``wanted[i]`` of them (0: not pinned), avoiding ``held``.

    All or nothing: raises CPUsUnavailable, having assigned nothing, when they do not fit.
    A pod's CPUs come from one NUMA node when any has room for all of them.
    """
    free = {node: [c for c in sorted(cpus) if c not in held] for node, cpus in topology.items()}
    need = sum(wanted)
    total = sum(len(cpus) for cpus in free.values())
    if need > total:
        raise CPUsUnavailable(
            f"the pinned pods need {need} whole CPU(s) but {total} of "
            f"{sum(len(c) for c in topology.values())} are free (held by pinned pods: "
            f"{sorted(set(held))})",
            field="cpuPinning",
            fix="wait for the pinned pods holding CPUs to stop, then launch again",
        )
    assigned: list[tuple[int, ...]] = []
    for count in wanted:
        if count == 0:
            assigned.append(())
            continue
        fitting = [node for node, cpus in free.items() if len(cpus) >= count]
        if fitting:  # best fit: the fullest node that still holds the whole pod
            node = min(fitting, key=lambda n: (len(free[n]), n))
            mine, free[node] = free[node][:count], free[node][count:]
        else:  # spread over the nodes with the most free CPUs first
            mine = []
            for node in sorted(free, key=lambda n: (-len(free[n]), n)):
                take = min(count - len(mine), len(free[node]))
                mine += free[node][:take]
                free[node] = free[node][take:]
        assigned.append(tuple(sorted(mine)))
    return assigned


def describe(cpus: Sequence[int], topology: Mapping[int, Sequence[int]]) -> str:
    """``CPUs 2,3 (NUMA node 0)``: what a pinned pod got."""
    nodes = sorted({n for n, node_cpus in topology.items() for c in cpus if c in node_cpus})
    where = ", ".join(str(n) for n in nodes)
    return (f"CPU{'s' if len(cpus) > 1 else ''} {','.join(str(c) for c in cpus)} "
            f"(NUMA node{'s' if len(nodes) > 1 else ''} {where})")
