"""The simulated cluster's nodes: from a YAML file, or generated in racks.

Nodes files are read exactly as ``phalanx up --compute simulated --nodes`` reads
them (``phalanx.spec.nodes``), so one file serves both; entries may
stand for many identical nodes with ``count`` and ``rackSize``::

    - name: gpu
      count: 64
      rackSize: 16
      allocatable: {nvidia.com/gpu: 8, cpu: 96, memory: 1Ti}
"""

from __future__ import annotations

from typing import Any

from phalanx.spec import GPU, Node, validate
from phalanx.spec.nodes import RACK_LABEL, load_nodes, parse_nodes

__all__ = ["RACK_LABEL", "load_nodes", "parse_nodes", "racked_nodes"]


def racked_nodes(count: int, gpus_per_node: int = 8, rack_size: int = 16, *,
                 prefix: str = "gpu", extra: dict[str, str] | None = None) -> list[Node]:
    """``count`` GPU nodes of ``gpus_per_node`` GPUs, ``rack_size`` to a rack."""
    allocatable: dict[str, Any] = {GPU: gpus_per_node, **(extra or {})}
    width = len(str(max(count - 1, 0)))
    return [
        validate(Node, {
            "name": f"{prefix}-{i:0{width}d}",
            "labels": {RACK_LABEL: f"{prefix}-rack-{i // rack_size}"},
            "allocatable": allocatable,
        })
        for i in range(count)
    ]
