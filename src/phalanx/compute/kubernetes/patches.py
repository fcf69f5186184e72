"""Object edits as the API server takes them: JSONPatch ops and JSON merge patches
(RFC 7386) that set a path or make one object into another."""

from __future__ import annotations

import copy
from typing import Any

Object = dict[str, Any]
# A path into an object: keys of mappings (and indexes of lists, where a reader allows).
Path = tuple[str | int, ...]


def pointer(key: str) -> str:
    """``key`` as one JSON Pointer token (RFC 6901)."""
    return key.replace("~", "~0").replace("/", "~1")


def add_ops(obj: Object, path: Path, value: Any) -> list[Object]:
    """JSONPatch ops setting ``path`` to ``value``: an ``add`` at the deepest part of the
    path that exists, of what is missing below it (JSONPatch adds no parents)."""
    depth = 0
    node: Any = obj
    while depth < len(path) - 1 and isinstance(node, dict) and isinstance(
            node.get(str(path[depth])), dict):
        node = node[str(path[depth])]
        depth += 1
    return [{"op": "add", "path": "".join(f"/{pointer(str(p))}" for p in path[:depth + 1]),
             "value": nested(path[depth + 1:], value)}]


def nested(path: Path, value: Any) -> Any:
    """``value`` under the mappings ``path`` names (a merge patch setting it)."""
    for step in reversed(path):
        value = {str(step): value}
    return value


def put(obj: Object, path: Path, value: Any) -> None:
    """Set ``path`` in ``obj`` to ``value`` (None: remove it), making missing mappings."""
    node: Any = obj
    for step in path[:-1]:
        node = node[step] if isinstance(step, int) else node.setdefault(step, {})
    if isinstance(path[-1], int):
        node[path[-1]] = value
    else:
        set_or_drop(node, path[-1], value)


def set_or_drop(mapping: Object, key: str, value: Any) -> None:
    """``mapping[key] = value``, or no ``key`` for None."""
    if value is None:
        mapping.pop(key, None)
    else:
        mapping[key] = value


def merge_diff(old: Any, new: Any) -> Any:
    """The JSON merge patch (RFC 7386) that makes ``old`` into ``new`` (lists whole)."""
    if not isinstance(old, dict) or not isinstance(new, dict):
        return copy.deepcopy(new)
    out: Object = {key: None for key in old if key not in new}
    for key, value in new.items():
        if key not in old:
            out[key] = copy.deepcopy(value)
        elif old[key] != value:
            out[key] = merge_diff(old[key], value)
    return out
