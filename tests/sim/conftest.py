"""Small queue configs, nodes and traces whose outcomes are worked out by hand in the tests."""

from __future__ import annotations

from pathlib import Path

import pytest

from phalanx.sim import TraceJob, parse_nodes, parse_trace
from phalanx.spec import Node, QueueConfig, load_config_yaml

FLAVOR = "kind: ResourceFlavor\nname: gpu\n"

# 2 nodes x 8 GPUs.
TWO_NODES = "- {name: gpu, count: 2, allocatable: {nvidia.com/gpu: 8}}\n"


def cluster_queue(name: str, nominal: int, *, cohort: str | None = None,
                  strategy: str = "BestEffortFIFO") -> str:
    lines = [f"kind: ClusterQueue\nname: {name}\nqueueingStrategy: {strategy}\n"]
    if cohort:
        lines.append(f"cohort: {cohort}\n")
    lines.append(
        "resourceGroups:\n"
        "- coveredResources: [nvidia.com/gpu]\n"
        "  flavors:\n"
        "  - name: gpu\n"
        f"    resources: [{{name: nvidia.com/gpu, nominalQuota: {nominal}}}]\n"
        f"---\nkind: LocalQueue\nname: {name}\nclusterQueue: {name}\n"
    )
    return "".join(lines)


def one_queue_yaml(strategy: str = "BestEffortFIFO") -> str:
    """One ClusterQueue ``team-a`` owning all 16 GPUs, no cohort."""
    return FLAVOR + "---\n" + cluster_queue("team-a", 16, strategy=strategy)


def cohort_yaml() -> str:
    """Two ClusterQueues of 8 GPUs each in cohort ``lab``, as written: no reclaim preemption."""
    return (FLAVOR + "---\nkind: Cohort\nname: lab\n---\n"
            + cluster_queue("team-a", 8, cohort="lab") + "---\n"
            + cluster_queue("team-b", 8, cohort="lab"))


def config(text: str) -> QueueConfig:
    return QueueConfig().merged(load_config_yaml(text))


def trace(text: str) -> list[TraceJob]:
    return parse_trace(text.splitlines(keepends=True), "test.csv")


# Four jobs on one queue of 16 GPUs (2 nodes x 8):
#   j1 arrives at 0 for 100 s on 8 GPUs, j2 at 10 for 50 s on 16 (both nodes),
#   j3 at 20 for 30 s on 4, j4 at 30 for 40 s on 8.
FOUR_JOBS = """submit,duration,gpus,team,name
0,100,8,team-a,j1
10,50,16,team-a,j2
20,30,4,team-a,j3
30,40,8,team-a,j4
"""

# Team a fills the cluster by borrowing team b's idle quota; team b then wants its own back.
RECLAIM = """submit,duration,gpus,team,name
0,100,8,team-a,a1
1,100,8,team-a,a2
10,30,8,team-b,b1
"""


@pytest.fixture
def two_nodes() -> list[Node]:
    return parse_nodes(TWO_NODES)


@pytest.fixture
def files(tmp_path: Path) -> dict[str, Path]:
    """The four-job scenario as the files ``phalanx sim`` reads."""
    paths = {
        "trace": tmp_path / "trace.csv",
        "queues": tmp_path / "queues.yaml",
        "nodes": tmp_path / "nodes.yaml",
    }
    paths["trace"].write_text(FOUR_JOBS)
    paths["queues"].write_text(one_queue_yaml())
    paths["nodes"].write_text(TWO_NODES)
    return paths
