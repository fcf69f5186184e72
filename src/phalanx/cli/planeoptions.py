"""The options of ``phalanx up`` and ``phalanx worker`` that pick and configure a compute
plane, made from the planes' declarations (``spec/computeplanes/``): ``--compute`` takes
their names, and each plane option is a flag of the verbs it is declared for. A new plane
declares its options in its own module; neither verb changes."""

from __future__ import annotations

import functools
import inspect
from collections.abc import Callable
from enum import StrEnum
from pathlib import Path
from typing import Annotated, Any, TypeVar

import typer

from phalanx.spec import parse_duration
from phalanx.spec.computeplanes import (
    OptionKind,
    PlaneOption,
    PlaneOptions,
    plane_info,
    plane_options,
    planes,
    planes_taking,
    render_option,
)

Verb = TypeVar("Verb", bound=Callable[..., None])

_TYPES: dict[OptionKind, Any] = {OptionKind.TEXT: str, OptionKind.FILE: Path,
                                  OptionKind.DIRECTORY: Path, OptionKind.COUNT: int,
                                  OptionKind.DURATION: str,
                                  OptionKind.LIST: list[str]}


def _plane_names() -> type[StrEnum]:
    """The declared planes' names as an enum: typer offers them as ``--compute``'s choices."""
    names: type[StrEnum] = StrEnum(  # type: ignore[misc]
        "ComputePlane", {p.name: p.name for p in planes()})
    return names


def _help(option: PlaneOption) -> str:
    takers = ", ".join(planes_taking(option.param))
    default = f"; default {option.cli_default}" if option.cli_default is not None else ""
    return f"{option.help} (for --compute {takers}{default})"


def _typer_option(option: PlaneOption) -> Any:
    if option.kind is OptionKind.FILE:
        return typer.Option(option.flag, help=_help(option), envvar=option.envvar,
                            exists=True, dir_okay=False, resolve_path=True)
    if option.kind is OptionKind.COUNT:
        return typer.Option(option.flag, help=_help(option), envvar=option.envvar, min=1)
    return typer.Option(option.flag, help=_help(option), envvar=option.envvar,
                        show_envvar=option.envvar is not None)


def with_plane_options(verb: str) -> Callable[[Verb], Verb]:
    """Add to a verb, after its ``compute`` parameter, a typer option per plane option
    declared for ``verb`` ("up" or "worker"); the verb gets those given, read (a duration in
    seconds), as ``plane_options`` (by ``PlaneOption.param``)."""

    def decorate(function: Verb) -> Verb:
        signature = inspect.signature(function, eval_str=True)
        declared = plane_options(verb)
        added = [
            inspect.Parameter(o.param, inspect.Parameter.KEYWORD_ONLY, default=None,
                              annotation=Annotated[_TYPES[o.kind] | None, _typer_option(o)])
            for o in declared
        ]
        own = [p for p in signature.parameters.values() if p.name != "plane_options"]
        at = next(i for i, p in enumerate(own) if p.name == "compute")
        names = _plane_names()
        own[at] = own[at].replace(annotation=Annotated[names, typer.Option(
            help="Compute plane")], default=names(own[at].default))
        at += 1
        own = [p.replace(kind=inspect.Parameter.KEYWORD_ONLY) if i >= at else p
               for i, p in enumerate(own)]

        @functools.wraps(function)
        def run(*args: Any, **kwargs: Any) -> None:
            given = {o.param: kwargs.pop(o.param, None) for o in declared}
            compute = kwargs["compute"] = str(kwargs["compute"])
            function(*args, plane_options=read_plane_options(verb, compute, given), **kwargs)

        made = signature.replace(parameters=[*own[:at], *added, *own[at:]])
        # typer reads the verb's parameters from these two.
        setattr(run, "__signature__", made)  # noqa: B010
        run.__annotations__ = {p.name: p.annotation for p in made.parameters.values()}
        return run  # type: ignore[return-value]

    return decorate


def read_plane_options(verb: str, compute: str, given: dict[str, object]) -> dict[str, object]:
    """The options of ``verb`` given, read; one the plane takes with a CLI default is given
    that default when absent (``up``'s --health-interval on the local plane)."""
    info = plane_info(compute)
    out: dict[str, object] = {}
    for option in plane_options(verb):
        value = given.get(option.param)
        if value is None and info is not None and info.takes(option.param):
            value = option.cli_default
        if value is None:
            continue
        if option.kind is OptionKind.DURATION:
            value = parse_duration(str(value), field=option.flag)
        if option.kind is OptionKind.LIST:
            if not value:
                continue  # a repeatable flag not given reads as an empty list
            value = tuple(str(v) for v in value)  # type: ignore[attr-defined]
        out[option.param] = value
    return out


def plane_args(options: PlaneOptions) -> list[str]:
    """The options as flags again, for a verb started anew (``up -d``)."""
    by_param = {o.param: o for o in plane_options()}
    args: list[str] = []
    for param, value in options.items():
        option = by_param[param]
        if option.kind is OptionKind.LIST and isinstance(value, list | tuple):
            for item in value:  # a repeatable flag, once per value
                args += [option.flag, str(item)]
            continue
        args += [option.flag, render_option(option, value)]
    return args
