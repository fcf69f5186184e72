"""Nodes declared in a YAML file: those of the simulated compute plane and of the simulator.

The file holds Node documents (``phalanx.spec.resources.Node``) in any of three
shapes: a YAML list of them, several YAML documents, or a mapping with a
``nodes:`` list. An entry may also stand for many identical nodes with
``count`` (named ``<name>-0`` .. ``<name>-<count-1>``) and, with it,
``rackSize`` (nodes per rack, labelled ``rack: <name>-rack-<i>``)::

    nodes:
      - name: cpu
        count: 4
        allocatable: {cpu: 32, memory: 128Gi}
      - name: gpu-a
        labels: {rack: r1}
        allocatable: {cpu: 64, memory: 512Gi, nvidia.com/gpu: 8}

Every error names the entry and field at fault (``nodes.yaml[1].allocatable.cpu``).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from phalanx.errors import SpecError
from phalanx.spec.base import validate
from phalanx.spec.config import yaml_documents
from phalanx.spec.resources import Node

RACK_LABEL = "rack"


def load_nodes(path: str | Path) -> list[Node]:
    """The nodes a YAML file declares (SpecError naming the file and field if it is wrong)."""
    source = str(path)
    try:
        text = Path(path).expanduser().read_text(encoding="utf-8")
    except FileNotFoundError:
        raise SpecError("no such file", field=source,
                        fix="pass --nodes the path of a YAML file of nodes") from None
    except (IsADirectoryError, UnicodeDecodeError):
        raise SpecError("is not a text file", field=source,
                        fix="pass --nodes the path of a YAML file of nodes") from None
    return parse_nodes(text, source)


def parse_nodes(text: str, source: str = "nodes") -> list[Node]:
    docs = yaml_documents(text, source)
    entries: list[Any] = []
    for doc in docs:
        if isinstance(doc, list):
            entries.extend(doc)
        elif isinstance(doc, dict) and set(doc) == {"nodes"}:
            if not isinstance(doc["nodes"], list):
                raise SpecError("must be a list of nodes", field=f"{source}.nodes",
                                fix="write nodes: [{name: ..., allocatable: {...}}, ...]")
            entries.extend(doc["nodes"])
        else:
            entries.append(doc)
    nodes: list[Node] = []
    for i, entry in enumerate(entries):
        nodes.extend(_expand(entry, f"{source}[{i}]"))
    if not nodes:
        raise SpecError("declares no nodes", field=source,
                        fix="list at least one node with a name and its allocatable resources")
    seen: set[str] = set()
    for node in nodes:
        if node.name in seen:
            raise SpecError(f"declares node {node.name!r} twice", field=source,
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
    for key, value in (("count", count), ("rackSize", rack_size)):
        if value is not None and (
            not isinstance(value, int) or isinstance(value, bool) or value < 1
        ):
            raise SpecError(f"{value!r} is not a whole number of at least 1",
                            field=f"{where}.{key}", fix=f"set {key} to a number of nodes")
    if count is None:
        if rack_size is not None:
            raise SpecError("rackSize needs count", field=f"{where}.rackSize",
                            fix="add count, or drop rackSize and give the node a rack label")
        return [validate(Node, doc, prefix=where)]
    base = validate(Node, doc, prefix=where)
    width = len(str(count - 1))
    nodes = []
    for i in range(count):
        labels = dict(base.labels)
        if rack_size is not None:
            labels[RACK_LABEL] = f"{base.name}-rack-{i // rack_size}"
        nodes.append(base.model_copy(update={"name": f"{base.name}-{i:0{width}d}",
                                             "labels": labels}))
    return nodes
