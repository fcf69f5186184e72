"""The simulated cluster's nodes: from a YAML file, or generated in racks.

A nodes file is a YAML list of Node documents (or several ``kind: Node``
documents, or a mapping with a ``nodes:`` list). An entry may also stand for
many identical nodes with two extra fields: ``count`` (nodes named
``<name>-0`` .. ``<name>-<count-1>``) and ``rackSize`` (nodes per rack; each
gets the label ``rack: <name>-rack-<i>``)::

    - name: gpu
      count: 64
      rackSize: 16
      allocatable: {nvidia.com/gpu: 8, cpu: 96, memory: 1Ti}
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

from phalanx.errors import SpecError
from phalanx.spec import GPU, Node, validate

RACK_LABEL = "rack"


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


def load_nodes(path: str | Path) -> list[Node]:
    source = str(path)
    try:
        text = Path(path).expanduser().read_text()
    except FileNotFoundError:
        raise SpecError("no such file", field=source, fix="check the nodes path") from None
    except (IsADirectoryError, UnicodeDecodeError):
        raise SpecError("is not a text file", field=source, fix="name a YAML file") from None
    return parse_nodes(text, source)


def parse_nodes(text: str, source: str = "nodes") -> list[Node]:
    try:
        docs = [d for d in yaml.safe_load_all(text) if d is not None]
    except yaml.YAMLError as exc:
        raise SpecError(f"is not valid YAML: {exc}", field=source,
                        fix="fix the YAML syntax") from None
    entries: list[Any] = []
    for doc in docs:
        if isinstance(doc, list):
            entries.extend(doc)
        elif isinstance(doc, dict) and set(doc) == {"nodes"} and isinstance(doc["nodes"], list):
            entries.extend(doc["nodes"])
        else:
            entries.append(doc)
    nodes: list[Node] = []
    for i, entry in enumerate(entries):
        nodes.extend(_expand(entry, f"{source}[{i}]"))
    if not nodes:
        raise SpecError("holds no nodes", field=source, fix="list at least one node")
    seen: set[str] = set()
    for node in nodes:
        if node.name in seen:
            raise SpecError(f"names node {node.name!r} twice", field=source,
                            fix="give every node its own name")
        seen.add(node.name)
    return nodes


def _expand(entry: Any, where: str) -> list[Node]:
    if not isinstance(entry, dict):
        raise SpecError(f"is a {type(entry).__name__}, not a mapping", field=where,
                        fix="write each node as a mapping with name and allocatable")
    doc = dict(entry)
    count = doc.pop("count", None)
    rack_size = doc.pop("rackSize", None)
    if count is None:
        if rack_size is not None:
            raise SpecError("rackSize needs count", field=f"{where}.rackSize",
                            fix="add count, or drop rackSize and set a rack label")
        return [validate(Node, doc, prefix=where)]
    for key, value in (("count", count), ("rackSize", rack_size)):
        if value is not None and (not isinstance(value, int) or isinstance(value, bool)
                                  or value < 1):
            raise SpecError(f"{value!r} is not a whole number >= 1", field=f"{where}.{key}",
                            fix=f"set {key} to the number of nodes")
    base = validate(Node, doc, prefix=where)
    width = len(str(count - 1))
    out = []
    for i in range(count):
        labels = dict(base.labels)
        if rack_size is not None:
            labels[RACK_LABEL] = f"{base.name}-rack-{i // rack_size}"
        out.append(base.model_copy(update={"name": f"{base.name}-{i:0{width}d}",
                                           "labels": labels}))
    return out
