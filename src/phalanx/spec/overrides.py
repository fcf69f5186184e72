"""Changing fields of a job document from the command line: ``--set PATH=VALUE``, ``--env``.

A path names a field as YAML does, in camelCase, with list indices in brackets:
``maxRuntime``, ``podSets[0].replicas``, ``podSets[1].env.NCCL_DEBUG``. The value is
typed as the schema says: a field that holds text takes it as written (``--set
name=007`` is the name "007"), any other is read as YAML (``replicas=4`` is a number,
``command=[python, train.py]`` a list). A path that names no field is refused, naming it.
"""

from __future__ import annotations

import itertools
import re
import types
from collections.abc import Iterable
from typing import Annotated, Any, Union, get_args, get_origin

import yaml
from pydantic import BaseModel

from phalanx.errors import SpecError
from phalanx.spec.base import validate
from phalanx.spec.resources import JobSpec

_SEGMENT = re.compile(r"([A-Za-z_][A-Za-z0-9_./-]*?)((?:\[\d+\])*)(?:\.|$)")
SET_FIX = "name a field of the job as in its YAML, e.g. podSets[0].replicas or maxRuntime"


def split_assignment(text: str, option: str) -> tuple[str, str]:
    key, sep, value = text.partition("=")
    if not sep or not key:
        raise SpecError(f"{text!r} is not KEY=VALUE", field=option,
                        fix=f"write {option} KEY=VALUE")
    return key, value


def _parse_path(path: str) -> list[str | int]:
    parts: list[str | int] = []
    position = 0
    while position < len(path):
        match = _SEGMENT.match(path, position)
        if match is None or match.end() == position:
            raise SpecError(f"{path!r} is not a field path", field=path, fix=SET_FIX)
        parts.append(match.group(1))
        parts += [int(i) for i in re.findall(r"\[(\d+)\]", match.group(2))]
        position = match.end()
    if path.endswith("."):
        raise SpecError(f"{path!r} is not a field path", field=path, fix=SET_FIX)
    return parts


def _unwrap(annotation: Any) -> Any:
    """The type inside Annotated and Optional (None dropped)."""
    while True:
        origin = get_origin(annotation)
        if origin is Annotated:
            annotation = get_args(annotation)[0]
        elif origin in (Union, types.UnionType):
            args = [a for a in get_args(annotation) if a is not type(None)]
            if len(args) != 1:
                return annotation
            annotation = args[0]
        else:
            return annotation


def _field_type(path: str, parts: list[str | int]) -> Any:
    """The annotation of the field ``parts`` names; SpecError naming ``path`` if none."""
    current: Any = JobSpec
    for part in parts:
        current = _unwrap(current)
        origin = get_origin(current)
        if isinstance(part, int):
            if origin is not list:
                raise SpecError(f"{path!r}: a [{part}] follows a field that is no list",
                                field=path, fix=SET_FIX)
            current = get_args(current)[0]
        elif isinstance(current, type) and issubclass(current, BaseModel):
            fields = {(f.alias or n): f for n, f in current.model_fields.items()}
            if part not in fields:
                raise SpecError(f"{path!r} is not a field of the job ({part!r} is unknown)",
                                field=path, fix=SET_FIX)
            current = fields[part].annotation
        elif origin is dict:
            current = get_args(current)[1]
        else:
            raise SpecError(f"{path!r} is not a field of the job ({part!r} is inside a "
                            "value)", field=path, fix=SET_FIX)
    return _unwrap(current)


def set_field(document: dict[str, Any], path: str, text: str) -> None:
    """Set the field ``path`` of a job ``document`` (its wire form) to ``text``, typed."""
    parts = _parse_path(path)
    kind = _field_type(path, parts)
    value: Any = text
    if kind is not str:
        try:
            value = yaml.safe_load(text)
        except yaml.YAMLError:
            raise SpecError(f"{text!r} is not a value {path} takes", field=path,
                            fix="write the value as in YAML") from None
    target: Any = document
    for part, following in itertools.pairwise(parts):
        if isinstance(part, int):
            if not isinstance(target, list) or part >= len(target):
                size = len(target) if isinstance(target, list) else 0
                raise SpecError(f"{path!r}: the job has {size} item(s) there", field=path,
                                fix="name an item the job has (counting from 0)")
            target = target[part]
        else:
            if target.get(part) is None:
                target[part] = [] if isinstance(following, int) else {}
            target = target[part]
    last = parts[-1]
    if isinstance(last, int) and (not isinstance(target, list) or last >= len(target)):
        raise SpecError(f"{path!r}: the job has no item {last} there", field=path,
                        fix="name an item the job has (counting from 0)")
    target[last] = value


def apply_overrides(spec: JobSpec, *, sets: Iterable[str] = (), env: Iterable[str] = (),
                    unique: bool = False) -> JobSpec:
    """``spec`` with ``--set PATH=VALUE`` and ``--env K=V`` (every pod set) applied,
    validated again (an error names the path it came from); ``unique``: a taken name gets
    a suffix (``generateName`` of the name, unless the job has one)."""
    assignments = [split_assignment(text, "--set") for text in sets]
    variables = [split_assignment(text, "--env") for text in env]
    if not assignments and not variables and not unique:
        return spec
    document = spec.to_dict()
    if unique and not document.get("generateName"):
        document["generateName"] = unique_prefix(spec.name)
    for key, value in variables:
        for pod_set in document["podSets"]:
            pod_set.setdefault("env", {})[key] = value
    for path, value in assignments:
        set_field(document, path, value)
    return validate(JobSpec, document)


def unique_prefix(name: str) -> str:
    """The generateName that keeps ``name`` recognisable: ``name-``, shortened to fit."""
    return name[:57].rstrip("-") + "-"
